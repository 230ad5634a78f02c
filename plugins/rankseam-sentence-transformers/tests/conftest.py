"""Every test runs offline: Hugging Face offline flags, and no socket may reach off-host."""

from __future__ import annotations

import os

import pytest

from rankseam.testing import block_off_host_connections

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    block_off_host_connections(monkeypatch)
