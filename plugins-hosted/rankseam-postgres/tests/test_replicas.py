"""Searches served by a real hot standby (streaming replication between two servers from the
bundled binaries: ``pg_basebackup -R``, ``standby.signal``, ``primary_conninfo``), writes by
the primary, and read-your-writes within a Memory.

The standby's replay is paused (``pg_wal_replay_pause()``) to make its lag visible: a search
that finds a memory the paused standby has not replayed was served by the primary, one that
misses it was served by the standby. A standby joins the searches' rotation once the store's
background check has reached it. Waits for replication and for that check are bounded polls
for a state."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import rankseam
from rankseam.errors import ConfigurationError, StoreUnavailableError
from rankseam_postgres import pools
from rankseam_postgres.schema import SCHEMA_VERSION
from rankseam_postgres.testing import TemporaryServer, TemporaryStandby


def _ids(memory: rankseam.Memory, query: str) -> set[str]:
    return {h.ref.memory_id for h in memory.search(query, 10, reranker=None).hits}


def _served(memory: rankseam.Memory) -> tuple[int, int]:
    """(searches served by the primary, by the standby) so far."""
    stats = memory.stats()
    return stats["primary_searches"], stats["replicas"][0]["searches"]


def _caught_up(primary: TemporaryServer, standby: TemporaryStandby, limit: float = 120) -> None:
    with psycopg.connect(primary.base_url, autocommit=True) as conn:
        target = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
    deadline = time.monotonic() + limit
    with psycopg.connect(standby.base_url, autocommit=True) as conn:
        while not conn.execute(
            "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)
        ).fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline, f"the standby did not replay {target} in {limit} s"
            time.sleep(0.05)


def _poll(get: Callable[[], Any], what: str, limit: float = 120) -> Any:
    """``get()`` once it is truthy (a bounded poll for a state)."""
    deadline = time.monotonic() + limit
    while not (value := get()):
        assert time.monotonic() < deadline, f"gave up waiting {limit:.0f} s for {what}"
        time.sleep(0.05)
    return value


def _in_rotation(memory: rankseam.Memory) -> None:
    """Wait until the background check has put the standby in the searches' rotation."""
    _poll(lambda: memory.stats()["replicas"][0]["in_rotation"], "the standby's check")


def _replay(standby: TemporaryStandby, *, paused: bool) -> None:
    with psycopg.connect(standby.base_url, autocommit=True) as conn:
        conn.execute(f"SELECT pg_wal_replay_{'pause' if paused else 'resume'}()")


def test_searches_go_to_the_standby_with_read_your_writes(spare_server: TemporaryServer) -> None:
    primary = spare_server
    with primary.standby() as standby:
        url = primary.url("replicated", replica=standby.socket_dir)
        with rankseam.open_memory(url) as writer, rankseam.open_memory(url) as other:
            writer.add("the red kettle is on the stove", memory_id="red")
            _caught_up(primary, standby)
            _in_rotation(writer)
            _in_rotation(other)
            assert _ids(other, "kettle") == {"red"}
            assert _served(other) == (0, 1)  # a Memory that wrote nothing reads the standby

            _replay(standby, paused=True)
            try:
                writer.add("the blue kettle is in the cupboard", memory_id="blue")
                # read-your-writes: the standby has not replayed it, so the primary answers
                p0, s0 = _served(writer)
                assert _ids(writer, "kettle") == {"red", "blue"}
                assert _served(writer) == (p0 + 1, s0)
                # another Memory (another process, as far as the store knows) reads the
                # standby, as of its replay: the documented staleness
                assert _ids(other, "kettle") == {"red"}
                assert _served(other) == (0, 2)
            finally:
                _replay(standby, paused=False)

            _caught_up(primary, standby)
            p1, s1 = _served(writer)
            assert _ids(writer, "kettle") == {"red", "blue"}
            assert _served(writer) == (p1, s1 + 1)  # caught up: the standby serves it again
            assert _ids(other, "kettle") == {"red", "blue"}

            # the primary goes away: searches are still served by the standby, writes fail
            # with the typed error; once it is back, writes go on
            primary.stop_server("immediate")
            try:
                assert _ids(other, "kettle") == {"red", "blue"}
                with pytest.raises(StoreUnavailableError):
                    writer.add("written while the primary is down")
            finally:
                primary.start_server()
            assert _served(other) == (0, 4)  # (stats() itself reads the primary)

            # the standby goes away: searches fall back to the primary, nothing fails
            standby.stop()
            p2, _s = _served(writer)
            assert _ids(writer, "kettle") == {"red", "blue"}
            stats = writer.stats()
            assert stats["primary_searches"] == p2 + 1
            assert stats["replicas"][0]["in_rotation"] is False
            assert writer.add("a green kettle", memory_id="green").ref is not None


def test_replica_urls_are_checked_and_redacted(pg_server: TemporaryServer) -> None:
    url = pg_server.url(replica="postgresql://reader:hunter2@standby.internal/db")
    with rankseam.open_memory(url) as memory:
        assert "hunter2" not in memory.path and "hunter2" not in repr(memory.stats())
    with pytest.raises(rankseam.ConfigurationError, match="connect_timeout"):
        rankseam.open_memory(pg_server.url(connect_timeout="1"))
    # an empty standby is refused, naming the parameter (it was taken for the primary's host)
    with pytest.raises(ConfigurationError, match="empty replica="):
        rankseam.open_memory(pg_server.url(replica=""))
    with pytest.raises(ConfigurationError, match="replicas has an empty entry"):
        rankseam.open_memory(
            pg_server.url(), config={"stores": {"postgres": {"replicas": ["standby1", " "]}}}
        )
    options = {"connect_timeout": 3, "replicas": ["postgresql://reader:hunter2@standby.internal"]}
    with rankseam.open_memory(pg_server.url(), config={"stores": {"postgres": options}}) as memory:
        stats = memory.stats()
        assert stats["connect_timeout"] == 3 and len(stats["replicas"]) == 1
        assert "hunter2" not in repr(stats) and "hunter2" not in memory.path


KETTLES = [
    {"id": "red", "text": "the red kettle is on the stove"},
    {"id": "blue", "text": "the blue kettle is in the cupboard"},
]


def _version_1(primary: TemporaryServer, schema: str) -> None:
    """Turn the store in ``schema`` into a version 1 store (no lexical tables, a GIN index)."""
    with psycopg.connect(primary.base_url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {schema}.postings, {schema}.terms")
        conn.execute(f"CREATE INDEX revisions_tsv ON {schema}.revisions USING gin (tsv) WHERE live")
        conn.execute(f"UPDATE {schema}.meta SET value = '1' WHERE key = 'schema_version'")


def test_creation_and_migration_are_read_your_writes(spare_server: TemporaryServer) -> None:
    """A standby that has not replayed a store's creation or migration serves none of its
    searches, in the process that created or migrated it and in one that opens it after;
    once it has replayed them, it serves them again."""
    primary = spare_server
    with psycopg.connect(primary.base_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # replayed before the pause
    with primary.standby() as standby:
        with rankseam.open_memory(primary.url("lag_migrated"), reranker=None) as memory:
            memory.ingest(KETTLES)
        _version_1(primary, "lag_migrated")
        _caught_up(primary, standby)
        _replay(standby, paused=True)
        try:
            for schema, found in (("lag_created", set()), ("lag_migrated", {"red", "blue"})):
                url = primary.url(schema, replica=standby.socket_dir)
                # the first opens creates or migrates the store; the second is another process
                for _process in ("creates or migrates", "opens after"):
                    with rankseam.open_memory(url, reranker=None) as memory:
                        assert memory.stats()["schema_version"] == SCHEMA_VERSION
                        _in_rotation(memory)
                        assert _ids(memory, "kettle") == found
                        assert _served(memory) == (1, 0), schema
        finally:
            _replay(standby, paused=False)
        _caught_up(primary, standby)
        url = primary.url("lag_migrated", replica=standby.socket_dir)
        with rankseam.open_memory(url, reranker=None) as memory:
            _in_rotation(memory)
            assert _ids(memory, "kettle") == {"red", "blue"}
            assert _served(memory) == (0, 1)


def test_a_standby_without_pgvector_is_reported_as_such_and_rejoins(
    spare_server: TemporaryServer, caplog: pytest.LogCaptureFixture, monkeypatch: Any
) -> None:
    """A standby that has not replayed ``CREATE EXTENSION vector`` (a database whose first
    store was created while its replay was paused) is left out with that reason, not as "cannot
    be reached"; searches go to the primary; once it has replayed, the background check puts
    it back (checked every REPLICA_RETRY_S seconds, shortened here)."""
    monkeypatch.setattr(pools, "REPLICA_RETRY_S", 0.5)
    primary = spare_server
    with psycopg.connect(primary.base_url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS novector")
        conn.execute("CREATE DATABASE novector")
    with primary.standby() as standby:
        _caught_up(primary, standby)
        _replay(standby, paused=True)
        url = primary.url("plain", replica=standby.socket_dir).replace("/postgres?", "/novector?")
        try:
            with caplog.at_level(logging.WARNING, logger="rankseam_postgres"):
                with rankseam.open_memory(url, reranker=None) as memory:
                    memory.add("the kettle whistles", memory_id="w")
                    problem = _poll(
                        lambda: memory.stats()["replicas"][0]["problem"], "the standby's check"
                    )
                    assert "pgvector" in problem and "cannot be reached" not in problem
                    assert _ids(memory, "kettle") == {"w"}
                    assert _served(memory) == (1, 0)
                    assert memory.stats()["replicas"][0]["in_rotation"] is False
                    messages = [r.getMessage() for r in caplog.records]
                    assert any("pgvector" in m for m in messages), messages
                    assert not any("cannot be reached" in m for m in messages), messages

                    _replay(standby, paused=False)
                    _caught_up(primary, standby)
                    _in_rotation(memory)
                    assert memory.stats()["replicas"][0]["problem"] is None
                    assert _ids(memory, "kettle") == {"w"}
                    assert _served(memory) == (1, 1)
        finally:
            _replay(standby, paused=False)


def test_a_standby_that_never_answers_costs_no_search_its_connect_timeout(
    pg_server: TemporaryServer,
) -> None:
    """A standby host that accepts connections and never answers (a listening socket nobody
    reads) is found out by the background check: no search waits for it, in any process.
    Before, each process's first search waited the whole connect timeout (60 s here); the
    bound below is half of that, hundreds of times what a search takes."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    try:
        url = pg_server.url(replica=f"127.0.0.1:{port}", connect_timeout="60")
        for _process in ("first", "second"):
            with rankseam.open_memory(url, reranker=None) as memory:
                memory.ingest(KETTLES)
                for _search in range(3):
                    started = time.monotonic()
                    assert _ids(memory, "kettle") == {"red", "blue"}
                    assert time.monotonic() - started < 30
                stats = memory.stats()
                assert stats["primary_searches"] == 3
                assert stats["replicas"][0]["searches"] == 0
                assert stats["replicas"][0]["in_rotation"] is False
    finally:
        listener.close()  # the background checks' connection attempts end at once
