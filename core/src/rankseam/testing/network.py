"""Keep a plugin's tests off the network: every connection to a host other than this machine
fails at once with :class:`NetworkBlocked` (loopback and Unix sockets still work, so a test can
serve real HTTP on ``127.0.0.1``). A test suite that downloads a model or calls a hosted API
by accident then fails loudly instead of depending on the network.

Use it from your ``conftest.py``::

    import pytest
    from rankseam.testing import block_off_host_connections

    @pytest.fixture(autouse=True)
    def no_network(monkeypatch):
        block_off_host_connections(monkeypatch)
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

__all__ = ["NetworkBlocked", "block_off_host_connections", "is_loopback"]

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


class NetworkBlocked(OSError):
    """A test tried to connect to another host."""


def is_loopback(address: Any) -> bool:
    """Whether a socket address stays on this machine (a Unix socket path, ``localhost``, or
    a loopback IP address)."""
    if not isinstance(address, tuple):  # AF_UNIX paths are local
        return True
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _guarded(real: Any) -> Any:
    def connect(self: socket.socket, address: Any) -> Any:
        if not is_loopback(address):
            raise NetworkBlocked(f"network blocked in tests: connect to {address!r}")
        return real(self, address)

    return connect


def block_off_host_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse every socket connection to another host until ``monkeypatch`` is undone (the end
    of the test)."""
    monkeypatch.setattr(socket.socket, "connect", _guarded(_real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded(_real_connect_ex))
