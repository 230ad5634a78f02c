"""The failure matrix: every fault of the OpenAI-compatible backend x every consumer role.

Each cell runs over the real loopback server (``rankseam_openai.testing``) through the public
API (``open_memory``, ``Memory.search``, ``Memory.add``):

- roles: the decision reranker (fail-closed), the write gate (fail-open) and the listwise
  reranker with ``on_error="coarse"``;
- faults: :data:`rankseam_openai.testing.FAULTS`, either *persistent* (every request) or
  *once* (the first request only, so retries can recover).

The expected outcome of every cell is :func:`expected`; ``docs/failure-matrix.md`` shows the
same table, and :func:`test_docs_table_matches` keeps the two in agreement. No cell may end in a
silent coarse result: a failure either raises, or is marked (``degraded`` status / degraded
gate verdict) with its reason.

No verdict depends on how fast the machine is (:func:`_backend`): a healthy answer never races
a short timeout, and the tests of a deadline make the backend retry at once (an immediate 503)
before the deadline cuts it, instead of counting on a short timeout to expire before it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

openai_testing = pytest.importorskip(
    "rankseam_openai.testing", reason="rankseam-openai is not installed (nox -s integration)"
)
pytest.importorskip("rankseam_decision", reason="rankseam-decision is not installed")
pytest.importorskip("rankseam_listwise", reason="rankseam-listwise is not installed")

from rankseam import RerankError, RerankStatus, open_memory  # noqa: E402
from rankseam_openai.backends import DECISION_INSTRUCTIONS  # noqa: E402

FAULTS = openai_testing.FAULTS
FakeOpenAIServer = openai_testing.FakeOpenAIServer
Reply = openai_testing.Reply
user_payload = openai_testing.user_payload

DOCS = Path(__file__).resolve().parent.parent / "docs" / "failure-matrix.md"

MEMORIES = (
    ("m1", "Alice booked a flight to Lisbon for the conference in May."),
    ("m2", "Bob adopted a grey cat named Pixel."),
    ("m3", "The conference hotel in Lisbon is near the river."),
    ("m4", "The team moved the standup to nine thirty."),
    ("m5", "Carol runs a marathon every October."),
    ("m6", "Dinner with Dana is on Friday at the Thai place."),
)
QUERY = "when is the conference in Lisbon"
LIMIT = 3

#: What the backend raises for each fault once retries (if any) are exhausted.
KIND = {
    "delay": "timeout",
    "rate_limit": "unavailable",
    "http_500": "unavailable",
    "http_503": "unavailable",
    "connection_reset": "unavailable",
    "malformed_json": "invalid_output",
    "schema_violation": "invalid_output",
    "prose_around_json": "invalid_output",
    "hanging_body": "timeout",
    "wrong_content_type": "invalid_output",
    "endless_body": "invalid_output",
}
RETRIED = frozenset(
    {"delay", "rate_limit", "http_500", "http_503", "connection_reset", "hanging_body"}
)
ROLES = ("decision", "write_gate", "listwise_coarse")
PERSISTENCE = ("persistent", "once")


def expected(fault: str, persistence: str, role: str) -> str:
    """The outcome of one cell, as written in docs/failure-matrix.md."""
    if persistence == "once" and fault in RETRIED:
        return {
            "decision": "ok (retried)",
            "write_gate": "healthy verdict (retried)",
            "listwise_coarse": "ok (retried)",
        }[role]
    kind = KIND[fault]
    return {
        "decision": f"RerankError({kind})",
        "write_gate": "stored, degraded",
        "listwise_coarse": f"coarse, degraded ({kind})",
    }[role]


def _respond(body: Any) -> Any:
    """Healthy answers: decision -> yes only for Lisbon entries; write gate -> no (so a stored
    memory proves fail-open); listwise -> the candidates in reverse order."""
    system = body["messages"][0]["content"]
    payload = user_payload(body)
    if system == DECISION_INSTRUCTIONS:
        if not payload["evidence"]:
            return Reply.json({"answer": "no"})
        return Reply.json({"answer": "yes" if "Lisbon" in payload["subject"] else "no"})
    ranks = [c["rank"] for c in payload["candidates"]]
    return Reply.json({"selected_ranks": ranks[::-1][: payload["max_results"]]})


BACKEND = {
    "model": "fake-model",
    "timeout_s": 30.0,
    "deadline_s": 120.0,
    "max_attempts": 2,
    "backoff_s": 0.01,
    "backoff_max_s": 0.05,
}
#: The faults that end in a timeout: the server holds the request 30 s.
TIMED_OUT = frozenset(f for f, kind in KIND.items() if kind == "timeout")


def _backend(server: Any, fault: str | None, persistence: str) -> dict[str, Any]:
    """The backend's options for a cell. A fault that answers gets a timeout (30 s) no
    healthy answer reaches. A held request must time out well before the server's 30 s: when
    every request is held nothing healthy follows, so the timeout is short (0.3 s); when only
    the first is held, the healthy retry gets the same timeout, 2 s, which no healthy answer
    on a loaded machine reaches (a cell that recovers costs 2 s)."""
    backend = {**BACKEND, "base_url": server.base_url}
    if fault in TIMED_OUT:
        backend["timeout_s"] = 0.3 if persistence == "persistent" else 2.0
    return backend


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with FakeOpenAIServer(_respond) as srv:
        yield srv


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("matrix") / "memory.sqlite3")
    with open_memory(path) as memory:
        for memory_id, text in MEMORIES:
            memory.add(text, memory_id=memory_id)
    return path


@pytest.fixture(scope="module")
def coarse(db: str) -> list[str]:
    with open_memory(db, config={"search": {"pool": len(MEMORIES)}}) as memory:
        return [h.ref.memory_id for h in memory.search(QUERY, len(MEMORIES), reranker=None)]


def _config(
    server: Any, role: str, fault: str | None = None, persistence: str = "persistent"
) -> dict[str, Any]:
    backend = _backend(server, fault, persistence)
    search: dict[str, Any] = {"pool": len(MEMORIES)}
    config: dict[str, Any] = {"search": search}
    if role == "decision":
        config["decision_backends"] = {"openai": backend}
        config["rerankers"] = {"decision": {"backend": "openai"}}
        search.update(reranker="decision", on_error="raise")
    elif role == "write_gate":
        config["decision_backends"] = {"openai": backend}
        config["write_gate"] = {"backend": "openai", "enabled": False}
    else:
        config["generation_backends"] = {"openai": backend}
        config["rerankers"] = {"listwise": {"backend": "openai"}}
        search.update(reranker="listwise", on_error="coarse")
    return config


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("persistence", PERSISTENCE)
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_cell(
    server: Any,
    db: str,
    coarse: list[str],
    fault: str,
    persistence: str,
    role: str,
    tmp_path: Path,
) -> None:
    server.clear()
    server.inject(fault, times=None if persistence == "persistent" else 1)
    outcome = expected(fault, persistence, role)
    kind = KIND[fault]
    recovers = outcome.endswith("(retried)")
    # A write-gate cell may store its memory (fail-open): it gets a store of its own, so that
    # the search cells keep seeing exactly the memories their coarse order was taken from.
    target = str(tmp_path / "gate.sqlite3") if role == "write_gate" else db
    with open_memory(target, config=_config(server, role, fault, persistence)) as memory:
        if role == "write_gate":
            added = memory.add("ok, thanks!", gate=True)
            assert added.gate is not None
            if recovers:  # the healthy answer (no) came through after a retry
                assert not added.stored and not added.gate.degraded
            else:  # fail-open: stored anyway, and visibly degraded
                assert added.stored and added.gate.degraded
                assert added.gate.outcome.value == "abstain"
            # the verdict counts every request the server received, failed ones included
            assert added.gate.usage.calls == _received(server) >= 1
            return

        if role == "decision" and not recovers:
            with pytest.raises(RerankError) as info:
                memory.search(QUERY, LIMIT)
            assert info.value.reason == kind, info.value
            assert info.value.usage.calls == _received(server) >= 1
            return

        result = memory.search(QUERY, LIMIT)
    ids = [h.ref.memory_id for h in result]
    rerank = result.trace.rerank
    assert rerank is not None
    if recovers:
        assert result.status is RerankStatus.OK, rerank.reason
        if role == "decision":
            assert ids == [m for m in coarse if m in ("m1", "m3")]
            assert rerank.usage.calls == len(coarse) + 1  # the failed attempt is counted
        else:
            assert ids == coarse[::-1][:LIMIT]
            assert rerank.usage.calls == 2
        assert rerank.usage.calls == _received(server)
        return
    # listwise with on_error="coarse": the coarse order, never silently
    assert result.status is RerankStatus.DEGRADED
    assert rerank.reason is not None and rerank.reason.startswith(kind), rerank.reason
    assert ids == coarse[:LIMIT]
    # every attempt the server saw is counted, retries of the failed call included
    assert rerank.usage.calls == _received(server) >= 1


def _received(server: Any) -> int:
    """Chat requests the server received, once it has read every connection it accepted."""
    return len(server.settle().chat_requests)


def test_every_fault_is_in_the_matrix() -> None:
    assert set(KIND) == set(FAULTS)


def _docs_table() -> dict[tuple[str, str], list[str]]:
    rows: dict[tuple[str, str], list[str]] = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 + len(ROLES) and cells[0] in FAULTS:
            rows[(cells[0], cells[1])] = cells[2:]
    return rows


def test_docs_table_matches() -> None:
    if not DOCS.exists():
        pytest.fail(f"{DOCS} is missing; it must show the failure matrix")
    table = _docs_table()
    want = {
        (fault, persistence): [expected(fault, persistence, role) for role in ROLES]
        for fault in FAULTS
        for persistence in PERSISTENCE
    }
    assert table == want, "docs/failure-matrix.md and tests/test_failure_matrix.py disagree"
    header = re.search(r"\|\s*fault\s*\|\s*requests\s*\|(.+)\|", DOCS.read_text(encoding="utf-8"))
    assert header is not None
    assert [c.strip().strip("`") for c in header.group(1).split("|")] == list(ROLES)


# cancelled retries: a caller's deadline cuts a retrying backend call short ---------------------

#: A backend that retries a silent server for a long time: only the caller's deadline stops it.
PATIENT = {**BACKEND, "timeout_s": 0.2, "deadline_s": 3600.0, "max_attempts": 20}


@pytest.mark.parametrize("on_error", ["coarse", "raise"])
@pytest.mark.parametrize("window", [1, 4])
def test_decision_deadline_counts_every_request_of_cancelled_retries(
    server: Any, db: str, window: int, on_error: str
) -> None:
    """The decision reranker's ``deadline_s`` cancels calls that are retrying a silent server;
    the trace (or the error) counts every request the server received, not one per call."""
    server.clear()
    # each call's first request is refused at once (503), so it retries in milliseconds; every
    # later request waits 30 s: each call retries until the deadline cancels it
    server.script(*[Reply.error(503)] * window)
    server.inject("delay")
    config = _config(server, "decision")
    config["decision_backends"]["openai"] = {**PATIENT, "base_url": server.base_url}
    config["rerankers"]["decision"].update(window=window, deadline_s=2.5)
    config["search"]["on_error"] = on_error
    with open_memory(db, config=config) as memory:
        if on_error == "raise":
            with pytest.raises(RerankError) as info:
                memory.search(QUERY, LIMIT)
            assert info.value.reason == "timeout"
            usage = info.value.usage
        else:
            result = memory.search(QUERY, LIMIT)
            assert result.status is RerankStatus.DEGRADED
            assert result.trace.rerank is not None
            usage = result.trace.rerank.usage
    received = _received(server)
    assert received > window  # the calls did retry before the deadline cancelled them
    assert usage.calls == received


@pytest.mark.parametrize("policy", ["fail_open", "fail_closed"])
def test_write_gate_timeout_bounds_add_and_counts_every_request(
    server: Any, tmp_path: Path, policy: str
) -> None:
    """A backend that would wait for a silent server for an hour: the write gate's
    ``timeout_s`` ends ``add()``; fail-open stores with a degraded verdict, fail-closed refuses
    with a typed error; either way every request the server received is counted."""
    server.clear()
    server.script(Reply.error(503))  # refused at once: a retry follows in milliseconds ...
    server.inject("delay")  # ... and waits 30 s, until the gate's timeout ends add()
    config = _config(server, "write_gate")
    config["decision_backends"]["openai"] = {**PATIENT, "base_url": server.base_url}
    config["write_gate"].update(timeout_s=2.0, failure_policy=policy)
    with open_memory(str(tmp_path / "gate.sqlite3"), config=config) as memory:
        if policy == "fail_open":
            added = memory.add("ok, thanks!", gate=True)
            assert added.stored and added.gate is not None and added.gate.degraded
            usage = added.gate.usage
        else:
            from rankseam import WriteGateError

            with pytest.raises(WriteGateError) as info:
                memory.add("ok, thanks!", gate=True)
            assert info.value.reason == "timeout"
            usage = info.value.usage
            assert memory.search("thanks", 5, reranker=None).hits == ()  # nothing stored
    received = _received(server)
    assert received >= 2  # the backend retried before the gate gave up
    assert usage.calls == received


@pytest.mark.parametrize("reranker_name", ["decision", "listwise"])
def test_a_rerank_cancelled_from_outside_carries_every_request(
    server: Any, reranker_name: str
) -> None:
    """A deadline above the reranker (the seam's, a caller's) cancels it mid-retry: the
    ``CancelledError`` it ends with carries the usage of every request the server received,
    the calls made before included (listwise: three windows, the third one cancelled)."""
    import asyncio

    from rankseam.plugin.rerankers import make_candidates
    from rankseam.types import Hit, MemoryRef
    from rankseam_decision import DecisionReranker
    from rankseam_listwise import ListwiseOptions, ListwiseReranker
    from rankseam_openai import make_decision_backend, make_generation_backend

    server.clear()
    options = {**PATIENT, "base_url": server.base_url}
    hits = [Hit(MemoryRef("t", f"m{i}", 1), f"memory number {i}", 1.0) for i in range(8)]
    candidates = make_candidates(hits)
    reranker: Any
    if reranker_name == "decision":
        server.inject("delay")  # every call retries a silent server
        reranker = DecisionReranker(make_decision_backend(options), window=4, deadline_s=None)
    else:
        # two windows answer, the third one retries a silent server
        server.inject("delay")
        good = Reply.json({"selected_ranks": [1, 2]})
        server.script(good, good)
        reranker = ListwiseReranker(
            make_generation_backend(options),
            ListwiseOptions("openai", window=4, stride=2, max_calls=10),
        )

    async def scenario() -> BaseException:
        async def guarded() -> BaseException:
            try:
                await reranker.rerank(QUERY, candidates, 2)
            except BaseException as exc:  # the cancellation itself, with what it carries
                return exc
            raise AssertionError("the rerank should have been cancelled")

        task = asyncio.ensure_future(guarded())
        for _ in range(3000):  # cancel once it is retrying (at most 60 s)
            if len(server.chat_requests) >= 3:
                break
            await asyncio.sleep(0.02)
        task.cancel()
        return await task

    error = asyncio.run(scenario())
    assert isinstance(error, asyncio.CancelledError)
    usage = getattr(error, "usage", None)
    assert usage is not None, "the cancellation carries no usage"
    assert usage.calls == _received(server) >= 3


@pytest.mark.parametrize("role", ["decision", "listwise_coarse"])
def test_the_search_deadline_counts_every_request(server: Any, db: str, role: str) -> None:
    """The search's own rerank deadline (``[search] rerank_deadline_s``) cancels a reranker
    whose backend is retrying a silent server: the degraded trace counts every request."""
    server.clear()
    server.script(Reply.error(503))  # refused at once: a retry follows in milliseconds ...
    server.inject("delay")  # ... and waits 30 s, until the search's deadline cancels it
    config = _config(server, role)
    table = "decision_backends" if role == "decision" else "generation_backends"
    config[table]["openai"] = {**PATIENT, "base_url": server.base_url}
    if role == "decision":  # the reranker's own deadline is far away: the search's cuts it
        config["rerankers"]["decision"].update(window=4, deadline_s=3600)
    config["search"].update(on_error="coarse", rerank_deadline_s=2.5)
    with open_memory(db, config=config) as memory:
        result = memory.search(QUERY, LIMIT)
    assert result.status is RerankStatus.DEGRADED
    rerank = result.trace.rerank
    assert rerank is not None and rerank.reason is not None
    assert rerank.reason.startswith("timeout"), rerank.reason
    received = _received(server)
    assert received >= 2  # the backend retried before the deadline cancelled it
    assert rerank.usage.calls == received
