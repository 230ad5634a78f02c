"""Every test runs off the network (loopback still works)."""

from __future__ import annotations

import pytest

from rankseam.testing import block_off_host_connections


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    block_off_host_connections(monkeypatch)
