"""Every test runs offline: Hugging Face offline flags, and no socket may reach off-host."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

from rankseam.testing import block_off_host_connections

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The ONNX export of the packaged model goes to a folder of this test session (made once, on
# first use), never to the user's own cache.
_ONNX_CACHE = tempfile.mkdtemp(prefix="rankseam-st-onnx-")
os.environ["RANKSEAM_MODEL_CACHE"] = _ONNX_CACHE
atexit.register(shutil.rmtree, _ONNX_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    block_off_host_connections(monkeypatch)
