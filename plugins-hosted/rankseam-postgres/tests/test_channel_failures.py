"""Every PostgreSQL failure of a search whose channels run side by side
(``concurrent_channels=true``) is a typed rankseam error (issue #39, case 5): a channel
statement that hits ``search_timeout`` (the lexical one, the vector one), a connection the
server terminates (``pg_terminate_backend``), the server stopped mid-search; each with the
sibling on a connection of its own and sharing the search's connection.

Deterministic: a statement is held by an ACCESS EXCLUSIVE lock that another session holds on
the one table it reads (``postings`` for the lexical channel, ``vectors`` for the vector
channel), so it waits until its ``search_timeout`` cancels it, or until the test, having
seen it wait (a bounded poll of ``pg_locks``), terminates its backend or stops the server.
No verdict depends on how fast the machine is."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

import rankseam
from rankseam.errors import StoreError, StoreUnavailableError
from rankseam_postgres.testing import TemporaryServer

RECORDS = [
    {"id": f"f{i}", "text": f"ferry log {i}: the {c} ferry waits at the {p} pier"}
    for i, (c, p) in enumerate(zip(["red", "blue"] * 10, ["north", "south"] * 10, strict=True))
]
QUERY = "blue ferry south pier"
#: The table each channel's statement reads.
TABLES = {"lexical": "postings", "vector": "vectors"}
#: A sibling on a connection of its own (idle ones from the start), or sharing the search's.
MODES = {
    "own connection": {"pool_min": "3", "pool_max": "3"},
    "shared connection": {"pool_min": "1", "pool_max": "1"},
}


def _schema(url: str) -> str:
    return url.rsplit("schema=", 1)[1].split("&", 1)[0]


@contextmanager
def _filled(server: TemporaryServer, mode: str, search_timeout: str) -> Iterator[tuple[Any, str]]:
    """A memory on ``server`` holding RECORDS, its channels side by side with the sibling's
    connection of ``mode`` (MODES), and the schema it lives in."""
    url = server.url(search_timeout=search_timeout, concurrent_channels="true", **MODES[mode])
    with rankseam.open_memory(url, reranker=None) as memory:
        memory.ingest(RECORDS)
        yield memory, _schema(url)


@pytest.fixture(params=[(c, m) for c in TABLES for m in MODES], ids="-".join)
def case(request: pytest.FixtureRequest) -> tuple[str, str]:
    """A channel (TABLES) and a sibling's connection (MODES): each channel-failure test runs
    for every pair."""
    return request.param  # type: ignore[no-any-return]


@contextmanager
def _locked(server: TemporaryServer, schema: str, table: str) -> Iterator[None]:
    """Another session holds an ACCESS EXCLUSIVE lock on ``table`` while the block runs."""
    conn = psycopg.connect(server.base_url)
    try:
        conn.execute(f"LOCK TABLE {schema}.{table} IN ACCESS EXCLUSIVE MODE")
        yield
    finally:
        try:
            conn.rollback()
            conn.close()
        except psycopg.Error:  # the server was stopped under it
            pass


def _waiting(server: TemporaryServer, schema: str, table: str, limit: float = 120.0) -> int:
    """The backend whose statement waits for the lock on ``table`` (a bounded poll)."""
    deadline = time.monotonic() + limit
    with psycopg.connect(server.base_url, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT pid FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
                (f"{schema}.{table}",),
            ).fetchone()
            if row is not None:
                return int(row[0])
            assert time.monotonic() < deadline, f"no statement waited for {table} in {limit} s"
            time.sleep(0.05)


def _in_thread(call: Callable[[], Any]) -> Callable[[], BaseException | None]:
    """Run ``call`` in a thread; the returned function joins it (bounded) and gives its
    error."""
    got: list[BaseException | None] = [None]

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            got[0] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join() -> BaseException | None:
        thread.join(120)
        assert not thread.is_alive(), "the search did not end within 120 s"
        return got[0]

    return join


def test_after_a_sibling_times_out_on_the_shared_connection_every_statement_raises_it(
    pg_server: TemporaryServer,
) -> None:
    """The case of the issue, one step at a time: the vector statement of a sibling that
    shares the search's connection hits search_timeout; the lexical statement that follows on
    that connection raises the same typed timeout, not InFailedSqlTransaction."""
    url = pg_server.url(pool_min="1", pool_max="1", search_timeout="0.3", concurrent_channels="on")
    with rankseam.open_memory(url, reranker=None) as memory:
        memory.ingest(RECORDS)
        space = memory.embedder.descriptor
        query = memory.embedder.embed([QUERY])[0]
        with _locked(pg_server, _schema(url), "vectors"), memory.store.read() as reader:
            with reader.siblings(1) as (sibling,):
                with pytest.raises(StoreError) as err:
                    sibling.vector("default", space, query, 5)
                assert err.value.reason == "timeout"
                with pytest.raises(StoreError) as err:
                    reader.bm25("default", {"ferri": 1.0}, 5)
                assert err.value.reason == "timeout", err.value
                assert "search_timeout=0.3" in str(err.value)


def test_a_channel_statement_past_search_timeout_is_the_typed_timeout(
    pg_server: TemporaryServer, case: tuple[str, str]
) -> None:
    channel, mode = case
    with _filled(pg_server, mode, search_timeout="1") as (memory, schema):
        for _ in range(3):  # whichever channel's thread reaches the connection first
            with _locked(pg_server, schema, TABLES[channel]):
                with pytest.raises(StoreError) as err:
                    memory.search(QUERY, 5)
            assert err.value.reason == "timeout", err.value
        assert memory.search(QUERY, 5).hits


def test_a_channel_connection_the_server_terminates_is_the_typed_outage(
    pg_server: TemporaryServer, case: tuple[str, str]
) -> None:
    channel, mode = case
    table = TABLES[channel]
    with _filled(pg_server, mode, search_timeout="600") as (memory, schema):
        with _locked(pg_server, schema, table):
            join = _in_thread(lambda: memory.search(QUERY, 5))
            pid = _waiting(pg_server, schema, table)
            with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            error = join()
        assert isinstance(error, StoreUnavailableError), repr(error)
        assert "lost the connection" in str(error) and not error.maybe_committed
        assert memory.search(QUERY, 5).hits  # the pool replaced the connection


@pytest.mark.parametrize("mode", list(MODES))
def test_the_server_stopped_mid_search_is_the_typed_outage(
    spare_server: TemporaryServer, mode: str
) -> None:
    with _filled(spare_server, mode, search_timeout="600") as (memory, schema):
        try:
            with _locked(spare_server, schema, "vectors"):
                join = _in_thread(lambda: memory.search(QUERY, 5))
                _waiting(spare_server, schema, "vectors")
                spare_server.stop_server("immediate")
                error = join()
        finally:
            spare_server.start_server()
        assert isinstance(error, StoreUnavailableError), repr(error)
        assert memory.search(QUERY, 5).hits
