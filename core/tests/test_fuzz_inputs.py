"""Random bytes and random JSON to snapshot verify/import and to ingest, under a memory cap,
see only clean rankseam errors (the properties are in fuzz_inputs.py, run in a child process
whose address space is capped, so a cap that fails shows as a MemoryError there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")

FUZZ = Path(__file__).with_name("fuzz_inputs.py")


@pytest.mark.skipif(sys.platform != "linux", reason="the memory cap (RLIMIT_AS) is Linux-only")
def test_random_inputs_meet_only_clean_errors_under_a_memory_cap(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "no-user-config")
    done = subprocess.run(
        [sys.executable, str(FUZZ), str(tmp_path), "512"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert done.stdout.count("ok ") == 7, done.stdout
