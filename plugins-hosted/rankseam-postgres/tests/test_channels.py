"""A search's lexical and vector statements side by side (``concurrent_channels=true``): the
search's reader lends its snapshot (``rankseam.plugin.stores.ConcurrentReader``) to a second
connection that imports it (``pg_export_snapshot()`` / ``SET TRANSACTION SNAPSHOT``); without
a connection to spare the sibling shares the search's own; by default one connection serves
the whole search. Every way ranks alike, and the kit's siblings test passes."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

import rankseam
from rankseam.errors import ConfigurationError
from rankseam.plugin.stores import ConcurrentReader
from rankseam.testing import StoreContract
from rankseam_postgres.testing import TemporaryServer

ON = {"concurrent_channels": "true"}

RECORDS = [
    {"id": f"h{i}", "text": f"harbour log {i}: the {c} ferry waits for the {t} tide"}
    for i, (c, t) in enumerate(
        zip(["red", "blue", "white"] * 20, ["high", "low"] * 30, strict=True)
    )
]
QUERIES = ["blue ferry high tide", "harbour log 7", "the white ferry", "low tide waits"]


def _in_transaction(server: TemporaryServer) -> int:
    """Sessions of the test server inside a transaction right now (tests run one at a time)."""
    with psycopg.connect(server.url().rsplit("&schema=", 1)[0], autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND state = 'idle in transaction' AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


def _sibling_answers(reader: Any, memory: Any, server: TemporaryServer) -> tuple[Any, ...]:
    """The sibling's live count and vector answer, asked from another thread (as the host
    asks), with the number of sessions in a transaction while both readers are open."""
    space = memory.embedder.descriptor
    query = memory.embedder.embed(["blue ferry"])[0]
    got: list[Any] = []
    with reader.siblings(1) as (sibling,):

        def run() -> None:
            got.append((sibling.live_count("default"), sibling.vector("default", space, query, 5)))

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        sessions = _in_transaction(server)
    mine = (reader.live_count("default"), reader.vector("default", space, query, 5))
    return got[0], mine, sessions


def test_the_sibling_runs_on_a_second_connection_when_one_is_spare(
    pg_server: TemporaryServer,
) -> None:
    url = pg_server.url(pool_min="3", **ON)  # idle connections from the start
    with rankseam.open_memory(url, reranker=None) as memory:
        memory.ingest(RECORDS)
        with memory.store.read() as reader:
            assert isinstance(reader, ConcurrentReader)
            theirs, mine, sessions = _sibling_answers(reader, memory, pg_server)
        assert theirs == mine
        assert sessions == 2  # the search's transaction and the sibling's


def test_without_a_spare_connection_the_sibling_shares_the_searchs(
    pg_server: TemporaryServer,
) -> None:
    url = pg_server.url(pool_min="1", pool_max="1", **ON)
    with rankseam.open_memory(url, reranker=None) as memory:
        memory.ingest(RECORDS)
        with memory.store.read() as reader:
            theirs, mine, sessions = _sibling_answers(reader, memory, pg_server)
        assert theirs == mine
        assert sessions == 1  # one connection: nothing waited for a second one
        # a whole search on a one-connection pool: no wait, the same answer
        assert memory.search(QUERIES[0], 5).hits


def test_every_way_ranks_alike(pg_server: TemporaryServer) -> None:
    schema = "channels_alike"
    with rankseam.open_memory(pg_server.url(schema), reranker=None) as memory:
        memory.ingest(RECORDS)
    answers = {}
    for name, params in {
        "side by side": {"pool_min": "3", **ON},
        "shared connection": {"pool_max": "1", **ON},
        "one after another (the default)": {},
    }.items():
        with rankseam.open_memory(pg_server.url(schema, **params), reranker=None) as memory:
            with memory.store.read() as reader:
                assert isinstance(reader, ConcurrentReader) == bool(params)
            answers[name] = [
                [(h.ref, h.score, h.matched_by) for h in memory.search(q, 8).hits] for q in QUERIES
            ]
            assert all(answers[name])
    first, *others = answers.values()
    assert all(other == first for other in others), answers


def test_the_option_is_checked(pg_server: TemporaryServer) -> None:
    with pytest.raises(ConfigurationError, match="concurrent_channels='maybe'.*true or false"):
        rankseam.open_memory(pg_server.url(concurrent_channels="maybe"))
    config = {"stores": {"postgres": {"concurrent_channels": True}}}
    with rankseam.open_memory(pg_server.url(), config=config) as memory:
        with memory.store.read() as reader:
            assert isinstance(reader, ConcurrentReader)
    # the option wins over the URL
    config = {"stores": {"postgres": {"concurrent_channels": False}}}
    with rankseam.open_memory(pg_server.url(**ON), config=config) as memory:
        with memory.store.read() as reader:
            assert not isinstance(reader, ConcurrentReader)


class _Kit(StoreContract):
    """The kit's standard tests, called directly (the conformance class runs the default)."""


def test_the_kits_siblings_test_passes_side_by_side(pg_server: TemporaryServer) -> None:
    _Kit().test_siblings_read_the_readers_snapshot(pg_server.url(pool_min="3", **ON))
