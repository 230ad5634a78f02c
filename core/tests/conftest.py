"""Shared fixtures of the core tests."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rankseam.plugins import reset_plugins

Install = Callable[..., None]


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """Make a real distribution (module + dist-info with entry points) importable."""
    for var in ("RANKSEAM_LOAD_PLUGINS", "RANKSEAM_DISABLE_PLUGINS", "RANKSEAM_STRICT_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    modules: list[str] = []

    def _install(ep_name: str, source: str, *, module: str | None = None) -> None:
        module = module or f"rs_test_{ep_name}"
        modules.append(module)
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        dist = site / f"{module}-0.3.1.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.3.1\n")
        (dist / "entry_points.txt").write_text(f"[rankseam]\n{ep_name} = {module}\n")
        importlib.invalidate_caches()

    reset_plugins()
    yield _install
    reset_plugins()
    for module in modules:
        sys.modules.pop(module, None)
