"""rankseam.testing.block_off_host_connections: off-host connections fail, loopback works."""

from __future__ import annotations

import socket
import threading

import pytest

from rankseam.testing import NetworkBlocked, block_off_host_connections


@pytest.mark.parametrize(
    "address", [("192.0.2.1", 80), ("2001:db8::1", 443, 0, 0), ("example.org", 80)]
)
def test_a_connection_to_another_host_is_refused_at_once(monkeypatch, address):
    block_off_host_connections(monkeypatch)
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)  # without the guard, fail in seconds rather than hang
        with pytest.raises(NetworkBlocked, match="network blocked in tests"):
            sock.connect(address)
        with pytest.raises(NetworkBlocked):
            sock.connect_ex(address)


def test_loopback_still_works_and_the_guard_ends_with_the_test():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(b"hello")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with pytest.MonkeyPatch.context() as monkeypatch:
        block_off_host_connections(monkeypatch)
        guarded = socket.socket.connect
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            assert sock.recv(5) == b"hello"
    thread.join(5)
    server.close()
    assert socket.socket.connect is not guarded  # undone with the monkeypatch
