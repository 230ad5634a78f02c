"""Searches served by a real hot standby (streaming replication between two servers from the
bundled binaries: ``pg_basebackup -R``, ``standby.signal``, ``primary_conninfo``), writes by
the primary, and read-your-writes within a Memory.

The standby's replay is paused (``pg_wal_replay_pause()``) to make its lag visible: a search
that finds a memory the paused standby has not replayed was served by the primary, one that
misses it was served by the standby. Waits for replication are bounded polls for a state."""

from __future__ import annotations

import time

import psycopg
import pytest

import rankseam
from rankseam.errors import StoreUnavailableError
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
    options = {"connect_timeout": 3, "replicas": ["postgresql://reader:hunter2@standby.internal"]}
    with rankseam.open_memory(pg_server.url(), config={"stores": {"postgres": options}}) as memory:
        stats = memory.stats()
        assert stats["connect_timeout"] == 3 and len(stats["replicas"]) == 1
        assert "hunter2" not in repr(stats) and "hunter2" not in memory.path
