"""Retries, timeouts and the deadline, over real loopback sockets (no mocks of httpx)."""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import time

import pytest

from rankseam.errors import BackendTimeoutError, BackendUnavailableError, InvalidOutputError
from rankseam.plugin import rerank_request
from rankseam.types import Usage
from rankseam_openai import make_decision_backend
from rankseam_openai.client import parse_retry_after
from rankseam_openai.testing import FakeOpenAIServer, Reply, decision_responder

GOOD = Reply.json({"answer": "yes"}, usage=(21, 5))


def evaluate(backend, subject: str = "a subject"):  # type: ignore[no-untyped-def]
    return asyncio.run(backend.evaluate(rerank_request("the query", subject)))


def test_429_with_retry_after_1_is_retried_after_about_a_second(server: FakeOpenAIServer) -> None:
    server.script(Reply.rate_limited(retry_after="1"), GOOD)
    backend = make_decision_backend(server.options())
    result = evaluate(backend)
    assert result.outcome.value == "yes"
    first, second = server.chat_requests
    gap = second.received_at - first.received_at
    assert 0.95 <= gap < 2.5, gap
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
    server.script(Reply.rate_limited(retry_after="30"), GOOD)
    backend = make_decision_backend(server.options(deadline_s=2.0))
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError, match="deadline_s") as info:
        evaluate(backend)
    assert time.monotonic() - started < 1.0
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
        GOOD.delayed(5.0),
    ],
    ids=["500", "502", "503", "504", "429-no-header", "reset", "hanging-body", "delay"],
)
def test_transient_fault_then_success(server: FakeOpenAIServer, first: Reply) -> None:
    server.script(first, GOOD)
    backend = make_decision_backend(server.options(timeout_s=0.4))
    result = evaluate(backend)
    assert result.outcome.value == "yes"
    assert len(server.chat_requests) == 2
    assert result.usage.calls == 2


def test_hanging_body_is_cut_by_the_timeout(server: FakeOpenAIServer) -> None:
    server.script(Reply.hanging_body())
    backend = make_decision_backend(server.options(timeout_s=0.3, max_attempts=1))
    started = time.monotonic()
    with pytest.raises(BackendTimeoutError, match="0.3 s") as info:
        evaluate(backend)
    elapsed = time.monotonic() - started
    assert 0.25 <= elapsed < 1.5, elapsed
    assert info.value.usage == Usage(1, None, None)  # type: ignore[attr-defined]


def test_deadline_bounds_total_time_across_retries(server: FakeOpenAIServer) -> None:
    server.responder = lambda body: GOOD
    server.inject("delay")
    backend = make_decision_backend(
        server.options(timeout_s=0.4, deadline_s=1.0, max_attempts=20, backoff_s=0.05)
    )
    started = time.monotonic()
    with pytest.raises(BackendTimeoutError) as info:
        evaluate(backend)
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 1.6, elapsed
    assert 2 <= len(server.chat_requests) <= 4
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


def test_backoff_waits_stay_within_the_full_jitter_cap(server: FakeOpenAIServer) -> None:
    server.responder = lambda body: GOOD
    server.inject("http_503")
    backend = make_decision_backend(
        server.options(max_attempts=4, backoff_s=0.1, backoff_max_s=0.15)
    )
    with pytest.raises(BackendUnavailableError):
        evaluate(backend)
    times = [r.received_at for r in server.chat_requests]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    caps = [0.1, 0.15, 0.15]
    assert len(gaps) == 3
    for gap, cap in zip(gaps, caps, strict=True):
        assert gap < cap + 0.3, (gaps, caps)


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
    server.responder = lambda body: GOOD.delayed(5.0)
    backend = make_decision_backend(server.options(timeout_s=10))

    async def main() -> None:
        task = asyncio.create_task(backend.evaluate(rerank_request("q", "s")))
        for _ in range(200):  # until the server holds the request
            await asyncio.sleep(0.01)
            if server.chat_requests:
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 2.0
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
