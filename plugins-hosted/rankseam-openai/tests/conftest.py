from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from rankseam.testing import block_off_host_connections
from rankseam_openai.testing import FakeOpenAIServer

_ENV = ("OPENAI_API_KEY", "RANKSEAM_OPENAI_BASE_URL", "RANKSEAM_OPENAI_MODEL")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--live",
        action="store_true",
        default=False,
        help="run the tests marked 'live' against RANKSEAM_OPENAI_BASE_URL (nox -s live)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "live: talks to a real server; needs --live (nox -s live)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--live"):
        return
    skip = pytest.mark.skip(reason="live test: run `nox -s live` (pytest --live) to enable")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _clean_env(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline tests never see a developer's real key or server."""
    if "live" in request.keywords:
        return
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def live_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in _ENV}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs off the network: a connection to another host fails at once with
    NetworkBlocked (loopback and Unix sockets still work, so servers the tests start on
    127.0.0.1 are reached). A test that must reach another host opts out by name here."""
    block_off_host_connections(monkeypatch)
