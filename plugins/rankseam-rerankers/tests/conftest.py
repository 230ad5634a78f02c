"""Offline tests: every off-host socket connection is refused, and the cross-encoder is a tiny
one built here (random weights, its own small vocabulary, saved to a temporary folder)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rankseam_rerankers.tiny import build_cross_encoder

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT cross-encoder (2 layers, hidden size 32, random weights, about 160 kB)."""
    return build_cross_encoder(tmp_path_factory.mktemp("tiny") / "tiny-cross-encoder")


def _is_loopback(address: Any) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths are local
        return True
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class NetworkBlocked(OSError):
    """A test tried to connect off-host."""


def _guarded(real: Any) -> Any:
    def connect(self: socket.socket, address: Any) -> Any:
        if not _is_loopback(address):
            raise NetworkBlocked(f"network blocked in tests: connect to {address!r}")
        return real(self, address)

    return connect


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded(_real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded(_real_connect_ex))
    yield
