"""Retries, timeouts and the deadline, over real loopback sockets (no mocks of httpx).

No verdict depends on how fast the machine is: a healthy answer never races a short timeout
(``server.options()`` gives 30 s; a test of a timeout holds its faulty request 30 s and gives
the healthy one after it seconds), a wait the client chose is read from its ``openai.retry``
log record, and a measured time is only compared with a bound far from what it measures.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import logging
import time

import pytest

from rankseam.errors import BackendTimeoutError, BackendUnavailableError, InvalidOutputError
from rankseam.plugin.decision import rerank_request
from rankseam.types import Usage
from rankseam_openai import make_decision_backend
from rankseam_openai.client import parse_retry_after
from rankseam_openai.testing import FakeOpenAIServer, Reply, decision_responder

GOOD = Reply.json({"answer": "yes"}, usage=(21, 5))


def evaluate(backend, subject: str = "a subject"):  # type: ignore[no-untyped-def]
    return asyncio.run(backend.evaluate(rerank_request("the query", subject)))


def _retry_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "openai.retry"]


def test_429_with_retry_after_1_is_retried_after_about_a_second(
    server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rankseam_openai")
    server.script(Reply.rate_limited(retry_after="1"), GOOD)
    backend = make_decision_backend(server.options())
    result = evaluate(backend)
    assert result.outcome.value == "yes"
    first, second = server.chat_requests
    # the client chose to wait exactly what the server asked, and did wait that long
    [retry] = _retry_records(caplog)
    assert retry.sleep_s == 1.0 and retry.status_code == 429  # type: ignore[attr-defined]
    assert second.received_at - first.received_at >= 0.95
    # the refused request is a call with zero tokens; the answer carries its tokens
    assert result.usage == Usage(2, 21, 5)


def test_retry_after_as_http_date() -> None:
    now = time.time()
    header = email.utils.formatdate(now + 3, usegmt=True)
    assert 1.5 <= (parse_retry_after(header, now=now) or 0) <= 3.5
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_retry_after_past_the_deadline_gives_up_without_waiting(server: FakeOpenAIServer) -> None:
    server.script(Reply.rate_limited(retry_after="300"), GOOD)
    backend = make_decision_backend(server.options(deadline_s=60.0))
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError, match="deadline_s") as info:
        evaluate(backend)
    # waiting (for Retry-After, or until the deadline) would take 60 s or more
    assert time.monotonic() - started < 30.0
    assert len(server.chat_requests) == 1
    assert info.value.usage == Usage(1, 0, 0)  # type: ignore[attr-defined]


def test_401_is_not_retried() -> None:
    with FakeOpenAIServer(api_key="sk-right-key") as server:
        backend = make_decision_backend(server.options(api_key="sk-wrong-key", max_attempts=5))
        with pytest.raises(BackendUnavailableError, match="API key") as info:
            evaluate(backend)
        assert len(server.chat_requests) == 1
        assert info.value.status_code == 401  # type: ignore[attr-defined]
        assert info.value.usage == Usage(1, 0, 0)  # type: ignore[attr-defined]


@pytest.mark.parametrize("status", [400, 403, 404, 422])
def test_client_errors_are_not_retried(server: FakeOpenAIServer, status: int) -> None:
    server.script(Reply.error(status, "nope"), GOOD)
    backend = make_decision_backend(server.options(max_attempts=5))
    with pytest.raises(BackendUnavailableError, match=f"HTTP {status}"):
        evaluate(backend)
    assert len(server.chat_requests) == 1


@pytest.mark.parametrize("fault", ["malformed_json", "schema_violation", "wrong_content_type"])
def test_invalid_output_is_not_retried(server: FakeOpenAIServer, fault: str) -> None:
    server.responder = lambda body: GOOD
    server.inject(fault)
    backend = make_decision_backend(server.options(max_attempts=5))
    with pytest.raises(InvalidOutputError) as info:
        evaluate(backend)
    assert len(server.chat_requests) == 1
    assert info.value.usage.calls == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "first",
    [
        Reply.error(500),
        Reply.error(502),
        Reply.error(503),
        Reply.error(504),
        Reply.rate_limited(retry_after=None),
        Reply.reset(),
        Reply.hanging_body(),
        GOOD.delayed(30.0),
    ],
    ids=["500", "502", "503", "504", "429-no-header", "reset", "hanging-body", "delay"],
)
def test_transient_fault_then_success(server: FakeOpenAIServer, first: Reply) -> None:
    server.script(first, GOOD)
    # A request the server holds (30 s) times out; the healthy retry gets the same timeout,
    # seconds, which no healthy answer on a loaded machine reaches. The others never time out.
    timeout = 2.0 if first.action == "hang" or first.delay_s else 30.0
    backend = make_decision_backend(server.options(timeout_s=timeout))
    result = evaluate(backend)
    assert result.outcome.value == "yes"
    assert len(server.chat_requests) == 2
    assert result.usage.calls == 2


def test_hanging_body_is_cut_by_the_timeout(server: FakeOpenAIServer) -> None:
    server.script(Reply.hanging_body())  # the server holds the body 30 s
    backend = make_decision_backend(server.options(timeout_s=0.3, max_attempts=1))
    started = time.monotonic()
    with pytest.raises(BackendTimeoutError, match="0.3 s") as info:
        evaluate(backend)
    elapsed = time.monotonic() - started
    assert 0.25 <= elapsed < 15.0, elapsed  # cut at the timeout, not when the server lets go
    assert info.value.usage == Usage(1, None, None)  # type: ignore[attr-defined]


def test_deadline_bounds_total_time_across_retries(server: FakeOpenAIServer) -> None:
    """Every request is held 30 s; 20 attempts of 1 s would take 20 s. The 3 s deadline ends
    the call after a few attempts, the last one cut to the time left."""
    server.responder = lambda body: GOOD
    server.inject("delay")
    backend = make_decision_backend(
        server.options(timeout_s=1.0, deadline_s=3.0, max_attempts=20, backoff_s=0.05)
    )
    started = time.monotonic()
    with pytest.raises(BackendTimeoutError) as info:
        evaluate(backend)
    elapsed = time.monotonic() - started
    assert 2.9 <= elapsed < 15.0, elapsed
    assert 2 <= len(server.settle().chat_requests) <= 4
    assert info.value.usage.calls == len(server.chat_requests)  # type: ignore[attr-defined]


def test_max_attempts_bounds_retries_and_every_attempt_is_counted(
    server: FakeOpenAIServer,
) -> None:
    server.responder = lambda body: GOOD
    server.inject("http_503")
    backend = make_decision_backend(server.options(max_attempts=3))
    with pytest.raises(BackendUnavailableError, match="max_attempts=3") as info:
        evaluate(backend)
    assert len(server.chat_requests) == 3
    assert info.value.usage == Usage(3, 0, 0)  # type: ignore[attr-defined]
    assert info.value.attempts == 3  # type: ignore[attr-defined]


def test_backoff_waits_stay_within_the_full_jitter_cap(
    server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The waits the client chose (its ``openai.retry`` records) stay within each attempt's
    cap, ``min(backoff_max_s, backoff_s * 2**(n-1))``, and the client did wait them."""
    caplog.set_level(logging.INFO, logger="rankseam_openai")
    server.responder = lambda body: GOOD
    server.inject("http_503")
    backend = make_decision_backend(
        server.options(max_attempts=4, backoff_s=0.1, backoff_max_s=0.15)
    )
    with pytest.raises(BackendUnavailableError):
        evaluate(backend)
    sleeps = [r.sleep_s for r in _retry_records(caplog)]  # type: ignore[attr-defined]
    assert [r.attempt for r in _retry_records(caplog)] == [1, 2, 3]  # type: ignore[attr-defined]
    caps = [0.1, 0.15, 0.15]
    assert all(0.0 <= s <= cap for s, cap in zip(sleeps, caps, strict=True)), (sleeps, caps)
    times = [r.received_at for r in server.chat_requests]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(gap >= s - 0.002 for gap, s in zip(gaps, sleeps, strict=True)), (gaps, sleeps)


def test_connection_refused_is_unavailable_and_costs_nothing() -> None:
    with FakeOpenAIServer() as server:
        options = server.options(max_attempts=2)
    # the server is stopped: nothing listens on that port any more
    backend = make_decision_backend(options)
    with pytest.raises(BackendUnavailableError, match="could not connect") as info:
        evaluate(backend)
    # no request reached a server: zero calls (a call is a request the server received)
    assert info.value.usage == Usage(0, 0, 0)  # type: ignore[attr-defined]


def test_json_schema_fallback_to_json_object(server: FakeOpenAIServer) -> None:
    server.schema_support = False
    server.responder = lambda body: GOOD
    backend = make_decision_backend(server.options())
    first = evaluate(backend)
    assert first.outcome.value == "yes"
    kinds = [r.body.get("response_format", {}).get("type") for r in server.chat_requests]
    assert kinds == ["json_schema", "json_object"]
    assert first.usage == Usage(2, 21, 5)
    evaluate(backend)  # remembered: the next request goes straight to JSON mode
    assert len(server.chat_requests) == 3
    assert server.chat_requests[-1].body["response_format"] == {"type": "json_object"}


def test_explicit_schema_mode_does_not_fall_back(server: FakeOpenAIServer) -> None:
    server.schema_support = False
    server.responder = lambda body: GOOD
    backend = make_decision_backend(server.options(json_mode="schema"))
    with pytest.raises(BackendUnavailableError, match="HTTP 400"):
        evaluate(backend)
    assert len(server.chat_requests) == 1


def test_json_mode_none_sends_no_response_format(server: FakeOpenAIServer) -> None:
    server.responder = lambda body: Reply.json({"answer": "no"})
    backend = make_decision_backend(server.options(json_mode="none"))
    assert evaluate(backend).outcome.value == "no"
    assert "response_format" not in server.chat_requests[0].body


def test_cancellation_propagates(server: FakeOpenAIServer) -> None:
    """Cancelling the caller ends the call at once, though the server holds the answer 30 s
    (the client's timeout is longer still)."""
    server.responder = lambda body: GOOD.delayed(30.0)
    backend = make_decision_backend(server.options(timeout_s=60.0, deadline_s=120.0))

    async def main() -> float:
        task = asyncio.create_task(backend.evaluate(rerank_request("q", "s")))
        while not server.chat_requests:  # until the server holds the request
            await asyncio.sleep(0.01)
        cancelled = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - cancelled

    assert asyncio.run(main()) < 15.0  # not the 30 s the server holds the answer
    assert len(server.chat_requests) == 1


def test_concurrent_requests_and_several_event_loops(server: FakeOpenAIServer) -> None:
    server.responder = decision_responder(
        lambda subject, evidence: "yes" if "7" in subject else "no"
    )
    backend = make_decision_backend(server.options(max_connections=4))

    async def many() -> list[str]:
        results = await asyncio.gather(
            *(backend.evaluate(rerank_request("q", f"item {i}")) for i in range(12))
        )
        await backend.aclose()
        return [r.outcome.value for r in results]

    for _ in range(2):  # one backend instance, two event loops
        answers = asyncio.run(many())
        assert answers == ["yes" if i == 7 else "no" for i in range(12)]
    assert len(server.chat_requests) == 24
