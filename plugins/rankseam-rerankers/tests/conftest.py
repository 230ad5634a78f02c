"""Offline tests: every off-host socket connection is refused, and the cross-encoder is a tiny
one built here (random weights, its own small vocabulary, saved to a temporary folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankseam.testing import block_off_host_connections
from rankseam_rerankers.tiny import build_cross_encoder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT cross-encoder (2 layers, hidden size 32, random weights, about 160 kB)."""
    return build_cross_encoder(tmp_path_factory.mktemp("tiny") / "tiny-cross-encoder")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    block_off_host_connections(monkeypatch)
