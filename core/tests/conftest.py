"""Shared fixtures of the core tests."""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rankseam.plugins import reset_plugins
from rankseam.testing import block_off_host_connections

Install = Callable[..., None]

# With rankseam-sentence-transformers installed, the latency benchmark's tests build its
# `semantic` reranker, whose first use exports the model to ONNX: into this session's folder,
# not the user's data folder.
if "RANKSEAM_MODEL_CACHE" not in os.environ:
    os.environ["RANKSEAM_MODEL_CACHE"] = tempfile.mkdtemp(prefix="rankseam-tests-models-")
    atexit.register(shutil.rmtree, os.environ["RANKSEAM_MODEL_CACHE"], ignore_errors=True)


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


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs off the network: a connection to another host fails at once with
    NetworkBlocked (loopback and Unix sockets still work, so servers the tests start on
    127.0.0.1 are reached). A test that must reach another host opts out by name here."""
    block_off_host_connections(monkeypatch)
