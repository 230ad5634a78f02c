"""The plugin is listed by `rankseam plugins` and adds `rankseam mcp` through the
register_commands hook; the command line does not import the MCP SDK until it runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rankseam.testing import assert_integration

RANKSEAM = str(Path(sys.executable).parent / "rankseam")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RANKSEAM, *args], capture_output=True, text=True, timeout=120)


def test_listed_by_rankseam_plugins() -> None:
    assert_integration(
        "mcp", distribution="rankseam-mcp", framework="mcp", hooks=["register_commands"]
    )


def test_rankseam_mcp_is_a_command() -> None:
    out = run("--help")
    assert out.returncode == 0 and "mcp" in out.stdout
    out = run("mcp", "--help")
    assert out.returncode == 0
    assert "stdio" in out.stdout and "--db" in out.stdout


def test_loading_plugins_does_not_import_the_sdk() -> None:
    code = (
        "import sys; from rankseam.testing import invoke_cli; "
        "assert invoke_cli(['plugins']).exit_code == 0; "
        "print('mcp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
