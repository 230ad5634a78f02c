"""Run the default nox sessions, two at a time, and fail if any fails.

Each session gets its own virtual environment (nox); running them side by side keeps
`make test` within CI's time on a 2-core machine. Output of each session is printed whole
when it ends, so logs do not interleave.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOX = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py")]


def sessions() -> list[str]:
    out = subprocess.run(
        [*NOX, "-l", "--json"], check=True, capture_output=True, text=True, cwd=ROOT
    )
    listed = json.loads(out.stdout)
    return [s["session"] for s in listed if s.get("selected", True)]


def run(name: str) -> tuple[str, int, str]:
    proc = subprocess.run([*NOX, "-s", name], capture_output=True, text=True, cwd=ROOT)
    return name, proc.returncode, proc.stdout + proc.stderr


def main() -> int:
    names = sessions()
    jobs = int(os.environ.get("RANKSEAM_TEST_JOBS", "2"))
    failed = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, rc, output in pool.map(run, names):
            print(
                f"\n===== nox -s {name}: {'ok' if rc == 0 else f'FAILED ({rc})'} =====", flush=True
            )
            print(output[-20000:], flush=True)
            if rc:
                failed.append(name)
    print("\nsessions:", ", ".join(names))
    if failed:
        print("FAILED:", ", ".join(failed))
        return 1
    print("all sessions passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
