"""Every test session of the repository runs off the network: each test folder's conftest.py
turns the kit's guard on for every test (core, integration, every plugin), so a test that
reaches another host fails at once instead of depending on the network."""

from __future__ import annotations

import ast
import socket
from pathlib import Path

import pytest

from rankseam.testing import NetworkBlocked

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = sorted(
    {
        *ROOT.glob("core/tests"),
        *ROOT.glob("tests"),
        *ROOT.glob("plugins*/*/tests"),
        *ROOT.glob("plugins*/*/standard_tests"),
    }
)

pytestmark = pytest.mark.skipif(
    not (ROOT / "plugins").is_dir(), reason="needs the rankseam source tree next to core/"
)


def _guards_every_test(conftest: Path) -> bool:
    """An autouse fixture of ``conftest`` calls ``block_off_host_connections``."""
    tree = ast.parse(conftest.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        autouse = any(
            isinstance(d, ast.Call)
            and any(k.arg == "autouse" and getattr(k.value, "value", False) for k in d.keywords)
            for d in node.decorator_list
        )
        calls = {
            getattr(c.func, "id", getattr(c.func, "attr", None))
            for c in ast.walk(node)
            if isinstance(c, ast.Call)
        }
        if autouse and "block_off_host_connections" in calls:
            return True
    return False


def test_every_test_folder_turns_the_network_guard_on() -> None:
    assert len(FOLDERS) >= 10, FOLDERS
    missing = [
        str(folder.relative_to(ROOT))
        for folder in FOLDERS
        if not (folder / "conftest.py").is_file() or not _guards_every_test(folder / "conftest.py")
    ]
    assert not missing, (
        f"{missing}: add an autouse fixture calling rankseam.testing.block_off_host_connections "
        "to the folder's conftest.py"
    )


def test_the_guard_is_on_here() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        with pytest.raises(NetworkBlocked):
            sock.connect(("192.0.2.1", 80))
