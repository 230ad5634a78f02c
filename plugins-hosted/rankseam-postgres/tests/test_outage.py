"""The server goes away and comes back: a real server (the spare one) stopped as a crash does
(``pg_ctl stop -m immediate``) under a search and under writes, then started on the same data.

Timing: a search while the server is down must fail within the connect timeout. The bound each
check uses is the timeout plus :data:`MARGIN`, which covers the search's own work (the query's
embedding, Python) on a loaded two-core machine; the behaviour it rules out blocked for 60 s.
Every other wait is a bounded poll for a state, never a verdict on speed."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

import rankseam
from rankseam.errors import ConfigurationError, StoreError, StoreUnavailableError
from rankseam_postgres.testing import TemporaryServer

#: Seconds allowed past the connect timeout (see the module docstring).
MARGIN = 10.0

RECORDS = [
    {"id": f"n{i}", "text": f"note {i}: the {c} kettle sits on shelf {i % 7}"}
    for i, c in enumerate(["red", "blue", "green", "grey"] * 10)
]


def _wait_for(condition, what: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting {limit:.0f} s for {what}")
        time.sleep(0.05)


def test_a_search_while_the_server_is_down_fails_fast_and_recovers(
    spare_server: TemporaryServer,
) -> None:
    url = spare_server.url("outage_search")  # the default connect timeout
    with rankseam.open_memory(url) as memory:
        memory.ingest(RECORDS)
        before = [h.ref for h in memory.search("blue kettle", 5, reranker=None).hits]
        assert before
        timeout = memory.stats()["connect_timeout"]
        assert timeout <= 5  # the default

        # in flight: the server dies while a search's read transaction is open
        try:
            with pytest.raises(StoreUnavailableError) as err:
                with memory.store.read() as reader:
                    assert reader.identities([1]) is not None
                    spare_server.stop_server("immediate")
                    reader.identities([1, 2, 3])
            assert err.value.reason == "unavailable"
            assert not err.value.maybe_committed

            # while it is down: every search fails with the typed error, within the timeout
            for _ in range(3):
                started = time.monotonic()
                with pytest.raises(StoreUnavailableError) as err:
                    memory.search("blue kettle", 5, reranker=None)
                assert time.monotonic() - started < timeout + MARGIN
                assert not isinstance(err.value, ConfigurationError)
                assert "cannot be reached" in str(err.value)
                assert "check the URL" not in str(err.value)
            with pytest.raises(StoreUnavailableError):
                memory.get("n1")
            with pytest.raises(StoreUnavailableError) as err:
                memory.add("written while the server is down")
            assert not err.value.maybe_committed  # it never reached the server
        finally:
            spare_server.start_server()

        # after the restart, the same Memory answers at once, as before
        assert [h.ref for h in memory.search("blue kettle", 5, reranker=None).hits] == before
        assert memory.get("n1").text.startswith("note 1:")
        assert memory.add("written after the restart").ref is not None


def test_writes_when_the_server_dies_are_committed_or_reported_failed(
    spare_server: TemporaryServer,
) -> None:
    """A writer ingests batches of 10 while the server is killed and restarted: every batch
    it reported written is stored after the restart, no batch is stored in part, and every
    failure is the typed error."""
    url = spare_server.url("outage_write")
    reported: list[int] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def batch(n: int) -> list[dict[str, str]]:
        return [{"id": f"b{n}-{j}", "text": f"batch {n} record {j} about tea"} for j in range(10)]

    with rankseam.open_memory(url) as memory:

        def writer() -> None:
            n = 0
            while not stop.is_set():
                try:
                    memory.ingest(batch(n))
                    reported.append(n)
                except Exception as exc:  # judged below: each must be the typed error
                    failures.append(exc)
                    time.sleep(0.05)
                n += 1

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        try:
            _wait_for(lambda: len(reported) >= 5, "5 batches before the outage")
            spare_server.stop_server("immediate")
            _wait_for(lambda: len(failures) >= 3, "writes to fail during the outage")
            written_before_restart = len(reported)
        finally:
            spare_server.start_server()
        _wait_for(lambda: len(reported) > written_before_restart + 2, "writes after the restart")
        stop.set()
        thread.join(timeout=120)
        assert not thread.is_alive()

        assert failures and all(isinstance(f, StoreUnavailableError) for f in failures), [
            repr(f) for f in failures if not isinstance(f, StoreUnavailableError)
        ]
        stored: dict[int, int] = {}
        for m in memory.list():
            n = int(m.ref.memory_id[1:].split("-")[0])
            stored[n] = stored.get(n, 0) + 1
        missing = [n for n in reported if stored.get(n) != 10]
        assert not missing, f"batches reported written but not stored whole: {missing}"
        assert all(count == 10 for count in stored.values()), stored  # all or nothing


def test_a_search_is_bounded_by_search_timeout(pg_server: TemporaryServer) -> None:
    """A search that the server cannot answer in time (here: another session holds an
    exclusive lock on the revisions) is cancelled by the server at ``search_timeout``."""
    url = pg_server.url("slow_search", search_timeout="0.5")
    with rankseam.open_memory(url) as memory:
        memory.add("the red kettle is on the stove", memory_id="k")
        with psycopg.connect(pg_server.base_url) as locker:  # its transaction holds the lock
            locker.execute("LOCK TABLE slow_search.revisions IN ACCESS EXCLUSIVE MODE")
            started = time.monotonic()
            with pytest.raises(StoreError) as err:
                memory.search("kettle", 5, reranker=None)
            assert time.monotonic() - started < 0.5 + MARGIN
        assert err.value.reason == "timeout" and "search_timeout=0.5" in str(err.value)
        assert [h.ref.memory_id for h in memory.search("kettle", 5, reranker=None).hits] == ["k"]
