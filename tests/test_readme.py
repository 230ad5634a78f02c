"""The README's install and quickstart blocks, extracted and executed as they are written:
installed from this checkout into a fresh virtual environment, then each quickstart run twice
in a row (the second run must give the same results and store nothing new)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, flags=re.S | re.M)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def console(block: str) -> str:
    lines = [ln[2:] for ln in block.splitlines() if ln.startswith("$ ")]
    assert lines, f"no '$ ' command lines in {block!r}"
    return "set -euo pipefail\n" + "\n".join(lines) + "\n"


def bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"{script}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A folder that looks like the checkout's root, with the README's install block run in it."""
    work = tmp_path_factory.mktemp("readme")
    for name in ("core", "plugins", "plugins-hosted"):
        (work / name).symlink_to(ROOT / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANKSEAM_", "VIRTUAL_ENV"))}
    # the interpreter running the tests plays `python3` (a nox session's, or any 3.11+)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    install = console(blocks(section("Install"), "console")[0])
    proc = bash(install, work, env)
    assert proc.stdout.strip().splitlines()[-1].startswith("rankseam, version")
    env["PATH"] = f"{work / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"
    return work, env


def stored(work: Path, env: dict[str, str]) -> list[tuple[str, int]]:
    code = (
        "import rankseam, json\n"
        "with rankseam.open_memory('memories.sqlite3', create=False) as m:\n"
        "    print(json.dumps(sorted((x.ref.memory_id, x.ref.revision) for x in m.list())))\n"
    )
    python = str(work / ".venv" / "bin" / "python")
    proc = subprocess.run([python, "-c", code], cwd=work, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return [tuple(x) for x in json.loads(proc.stdout)]


def test_python_quickstart_twice(checkout: tuple[Path, dict[str, str]]) -> None:
    work, env = checkout
    (code,) = blocks(section("Quickstart (Python)"), "python")
    (work / "quickstart.py").write_text(code)
    runs = [bash("python quickstart.py", work, env).stdout for _ in range(2)]
    hits = [[ln for ln in run.splitlines() if not ln.startswith("{")] for run in runs]
    assert hits[0] == hits[1] and hits[0], runs
    assert hits[0][0].startswith("dinner 1 ")
    traces = [ln for run in runs for ln in run.splitlines() if ln.startswith("{")]
    assert len(traces) == 2
    assert all(
        "'policy_id': 'rankseam.rerank.mmr.v1'" in t and "'status': 'ok'" in t for t in traces
    )
    assert stored(work, env) == [("dinner", 1), ("standup", 1)]


def test_cli_quickstart_twice(checkout: tuple[Path, dict[str, str]]) -> None:
    work, env = checkout
    text = section("Quickstart (command line)")
    (notes,) = blocks(text, "json")
    (work / "notes.jsonl").write_text(notes)
    script = console(blocks(text, "console")[0])
    runs = [bash(script, work, env) for _ in range(2)]
    for run in runs:
        assert run.stderr == "", run.stderr  # no progress bar off a terminal, no error
    first, second = (run.stdout.splitlines() for run in runs)
    assert first[0] in (
        "stored default/dinner revision 1",
        "unchanged default/dinner revision 1 (already stored)",  # the Python quickstart's
    )
    assert second[0] == "unchanged default/dinner revision 1 (already stored)"
    assert second[1].startswith("2 records: 0 added, 0 updated, 2 unchanged")

    def answers(lines: list[str]) -> str:  # the searches and the plugin list, timings aside
        return re.sub(r'"latency_ms": [0-9.]+', '"latency_ms": 0', "\n".join(lines[2:]))

    assert answers(first) == answers(second)
    assert '"memory_id": "dinner"' in answers(first)
    assert stored(work, env) == [("cat", 1), ("dinner", 1), ("standup", 1)]
