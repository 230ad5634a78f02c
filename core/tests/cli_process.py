"""The ``rankseam`` command run as a user runs it: a real process of the installed console
script, with no ``RANKSEAM_*`` variable of the caller's and never the real user's
configuration (the command-line tests that need a process of their own import these)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

RANKSEAM = str(Path(sys.executable).with_name("rankseam"))


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``rankseam ARGS`` in ``cwd``, its output captured (a two-minute bound)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")}
    env["XDG_CONFIG_HOME"] = str(cwd / "no-user-config")  # never the real user's config
    return subprocess.run(
        [RANKSEAM, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def ok(*args: str, cwd: Path) -> str:
    """``rankseam ARGS``'s standard output; the test fails with its error output unless it
    exits 0."""
    done = run(*args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout
