"""Shared test set-up: every test runs off the network."""

from __future__ import annotations

import pytest

from rankseam.testing import block_off_host_connections


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs off the network: a connection to another host fails at once with
    NetworkBlocked (loopback and Unix sockets still work, so servers the tests start on
    127.0.0.1 are reached). A test that must reach another host opts out by name here."""
    block_off_host_connections(monkeypatch)
