"""No secret reaches a log record, at any level, from any logger -- the HTTP library's included.

httpx logs each response's status line at INFO (``HTTP Request: POST ... "HTTP/1.1 401
<reason>"``) and httpcore, at DEBUG, the status line and headers the server sent. The loopback
server echoes the key (and a secret header value) in its reason phrase, its headers and its
body, on a refused request, on errors that are retried and on a healthy answer. With the root,
``httpx`` and ``httpcore`` loggers at DEBUG, every record is captured twice (a handler on the
root logger that formats it, and pytest's ``caplog``), and no run of a secret may appear in any
formatted record, message, argument or attribute, in any decoding of it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import attrs
import httpcore  # noqa: F401  # its loggers exist once it is imported
import httpx
import pytest

from rankseam.errors import BackendError
from rankseam.plugin.decision import rerank_request
from rankseam_openai import make_decision_backend
from rankseam_openai.http_logs import http_loggers
from rankseam_openai.testing import (
    FakeOpenAIServer,
    Reply,
    echo_shapes,
    exception_texts,
    leaked_fragment,
)

KEY = "sk-proj-L0g5Zt7LmN2vB8kR4wY6pH1sD5fG0jCe"
HEADER_VALUE = "hv-L0g3kL0pQ7rT2wX5yZ9aB4cE6"
SECRETS = (KEY, HEADER_VALUE)


def _fits_a_status_line(text: str) -> bool:
    return "\r" not in text and "\n" not in text and len(text) < 4000


#: The shapes a header or a reason phrase can carry (one line, not too long), sampled.
LINE_SHAPES = [t for _n, t in echo_shapes(KEY) if _fits_a_status_line(t)][::4] + [
    t for _n, t in echo_shapes(HEADER_VALUE) if _fits_a_status_line(t)
][::8]


class Every(logging.Handler):
    """Keeps every record it is handed, with the record as a handler formats it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.seen: list[tuple[logging.LogRecord, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append((record, self.format(record)))

    def names(self) -> set[str]:
        return {record.name for record, _text in self.seen}

    def messages(self, name: str) -> list[str]:
        return [r.getMessage() for r, _text in self.seen if r.name == name]


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[Every]:
    """The root, httpx and httpcore loggers (and every logger below those) at DEBUG, and a
    handler on the root logger that keeps every record."""
    for logger in [logging.getLogger(), *http_loggers()]:
        caplog.set_level(logging.DEBUG, logger=logger.name if logger.name != "root" else None)
    every = Every()
    root = logging.getLogger()
    root.addHandler(every)
    try:
        yield every
    finally:
        root.removeHandler(every)


def _arguments(args: Any) -> list[Any]:
    if isinstance(args, dict):
        return list(args.values())
    return list(args) if isinstance(args, tuple) else ([] if args is None else [args])


#: Attributes that differ between otherwise equal records (left out, so that equal records
#: are checked once).
_VOLATILE = {"created", "msecs", "relativeCreated", "thread", "threadName", "taskName"}


def _texts(record: logging.LogRecord, formatted: str) -> Iterator[str]:
    yield formatted
    yield record.getMessage()
    yield str(record.msg)
    for arg in _arguments(record.args):
        yield str(arg)
        yield repr(arg)
    yield json.dumps({k: repr(v) for k, v in vars(record).items() if k not in _VOLATILE})


def assert_no_secret_logged(
    logs: Every, caplog: pytest.LogCaptureFixture, secrets: tuple[str, ...] = SECRETS
) -> None:
    captured = [*logs.seen, *((r, caplog.handler.format(r)) for r in caplog.records)]
    assert len(captured) == 2 * len(logs.seen) and logs.seen
    texts: dict[str, logging.LogRecord] = {}  # each distinct text once
    for record, formatted in captured:
        # the HTTP library's exceptions hold the request: only their scrubbed text goes on
        assert record.exc_info is None or not record.name.startswith(("httpx", "httpcore"))
        texts.update(dict.fromkeys(_texts(record, formatted), record))
    for text, record in texts.items():
        found = leaked_fragment(text, secrets)
        assert found is None, (
            f"secret fragment {found!r} in a {record.levelname} record of "
            f"{record.name!r}: {text[:400]!r}"
        )
    found = leaked_fragment(caplog.text, secrets)
    assert found is None, f"secret fragment {found!r} in caplog.text"


def _options(server: FakeOpenAIServer, **extra: Any) -> dict[str, Any]:
    return server.options(api_key=KEY, headers={"X-Org": HEADER_VALUE}, **extra)


def _evaluate(backend: Any) -> Any:
    return asyncio.run(backend.evaluate(rerank_request("q", "s")))


def test_a_401_echoing_the_key_in_reason_header_and_body(
    logs: Every, caplog: pytest.LogCaptureFixture
) -> None:
    """The loopback server's own 401 echoes the Authorization header it got in its reason
    phrase, its WWW-Authenticate header and its body (``HTTP/1.1 401 Unauthorized Bearer
    <KEY>``)."""
    with FakeOpenAIServer(api_key="sk-the-right-key-000") as server:
        backend = make_decision_backend(_options(server, max_attempts=1))
        with pytest.raises(BackendError) as info:
            _evaluate(backend)
        echoed = server.settle().chat_requests[0].headers["Authorization"]
    assert echoed == f"Bearer {KEY}"  # the server got (and echoed) the key
    assert "HTTP 401" in str(info.value)
    for text in exception_texts(info.value):
        assert leaked_fragment(text, SECRETS) is None, text
    assert {"httpx", "httpcore.connection", "httpcore.http11"} <= logs.names()
    # the echo reached the HTTP library's records, and was scrubbed there
    assert any('"HTTP/1.1 401 Unauthorized Bearer ***"' in m for m in logs.messages("httpx"))
    headers = [m for m in logs.messages("httpcore.http11") if "WWW-Authenticate" in m]
    assert headers and all('got="Bearer ***"' in m for m in headers), headers
    assert_no_secret_logged(logs, caplog)


def test_headers_and_reason_phrases_echoing_secrets(
    logs: Every, caplog: pytest.LogCaptureFixture
) -> None:
    """Every one-line shape of each secret (split, escaped, cut) in the reason phrase and in a
    header, on an error and on a healthy answer."""
    with FakeOpenAIServer() as server:
        backend = make_decision_backend(_options(server, max_attempts=1))
        for text in LINE_SHAPES:
            server.script(
                Reply.error(400, "bad", headers={"X-Echo": text}).with_reason(text),
                attrs.evolve(
                    Reply.json({"answer": "yes"}),
                    headers=(("Content-Type", "application/json"), ("X-Echo", text)),
                    reason=text,
                ),
            )
            with pytest.raises(BackendError, match="HTTP 400"):
                _evaluate(backend)
            assert _evaluate(backend).outcome.value == "yes"
    assert len(logs.messages("httpx")) == 2 * len(LINE_SHAPES)
    assert sum("***" in m for m in logs.messages("httpcore.http11")) >= 2 * len(LINE_SHAPES)
    assert_no_secret_logged(logs, caplog)


def test_bodies_echoing_secrets(logs: Every, caplog: pytest.LogCaptureFixture) -> None:
    """Error bodies (JSON and plain text) and a model's reply echoing every shape."""
    shapes = [t for _n, t in echo_shapes(KEY)][::5] + [t for _n, t in echo_shapes(HEADER_VALUE)][
        ::10
    ]
    with FakeOpenAIServer() as server:
        backend = make_decision_backend(_options(server, max_attempts=1))
        for text in shapes:
            server.script(
                Reply.error(400, text),
                Reply.raw(text.encode(), status=401, content_type="text/plain"),
                Reply.json({"answer": "yes", "rationale": text}),
            )
            for _ in range(2):
                with pytest.raises(BackendError) as info:
                    _evaluate(backend)
                for exposed in exception_texts(info.value):
                    assert leaked_fragment(exposed, SECRETS) is None, exposed
            assert leaked_fragment(repr(_evaluate(backend)), SECRETS) is None
    assert len(logs.messages("httpx")) == 3 * len(shapes)
    assert_no_secret_logged(logs, caplog)


def test_a_retried_call_echoing_the_key_at_every_attempt(
    logs: Every, caplog: pytest.LogCaptureFixture
) -> None:
    """503, 429 and a reset connection, each retried, then a healthy answer: every attempt's
    status line and headers echo the key."""
    echo = {"X-Echo": KEY, "X-Echo-Header": HEADER_VALUE}
    with FakeOpenAIServer() as server:
        server.script(
            Reply.error(503, KEY, headers=echo, reason=f"Service Unavailable {KEY}"),
            Reply.error(429, KEY, headers={"Retry-After": "0", **echo}, reason=KEY),
            Reply.reset(),
            attrs.evolve(
                Reply.json({"answer": "yes"}),
                headers=(("Content-Type", "application/json"), *echo.items()),
                reason=KEY,
            ),
        )
        backend = make_decision_backend(_options(server, max_attempts=5))
        result = _evaluate(backend)
        assert len(server.settle().chat_requests) == 4
    assert result.outcome.value == "yes" and result.usage.calls == 4
    retries = [r for r, _t in logs.seen if getattr(r, "event", None) == "openai.retry"]
    assert [r.attempt for r in retries] == [1, 2, 3]  # type: ignore[attr-defined]
    assert len(logs.messages("httpx")) == 3  # the reset connection has no status line
    assert all(m.endswith(' ***"') for m in logs.messages("httpx"))
    assert_no_secret_logged(logs, caplog)


def test_a_logger_below_httpcore_and_a_traceback_are_scrubbed(
    logs: Every, caplog: pytest.LogCaptureFixture
) -> None:
    """A filter on a logger does not see its children's records: the filter is on every logger
    below httpx and httpcore, one created later included (it gets it when the next connection
    pool is built). An exception logged there -- which holds the request, and so the
    Authorization header -- reaches handlers as scrubbed text only."""
    late = logging.getLogger("httpcore.h7_created_later")
    with FakeOpenAIServer() as server:
        server.script(Reply.json({"answer": "yes"}))
        backend = make_decision_backend(_options(server))  # the filter holds it weakly: kept
        _evaluate(backend)  # a new connection pool: the filter is placed
    request = httpx.Request("POST", "http://x/v1", headers={"Authorization": f"Bearer {KEY}"})
    try:
        raise httpx.ConnectError(f"refused {KEY}", request=request)
    except httpx.ConnectError:
        late.debug("failed %s with %r", KEY, {"header": HEADER_VALUE}, exc_info=True)
    record, formatted = logs.seen[-1]
    assert record.name == late.name
    assert record.getMessage() == "failed *** with {'header': '***'}" and record.args == ()
    assert record.exc_info is None and "ConnectError: refused ***" in formatted
    assert_no_secret_logged(logs, caplog)
    del backend


def test_the_capture_sees_a_secret_no_client_was_given(
    logs: Every, caplog: pytest.LogCaptureFixture
) -> None:
    """The checks can fail: a key no rankseam client was configured with, sent by a bare httpx
    client, is echoed into the HTTP library's records, and the capture finds it there."""
    other = "sk-unconfigured-Zq81Lm4Px0Wc7Rb2"
    with FakeOpenAIServer(api_key="sk-the-right-key-000") as server:

        async def call() -> int:
            async with httpx.AsyncClient() as client:
                response = await client.post(
                    f"{server.base_url}/chat/completions",
                    headers={"Authorization": f"Bearer {other}"},
                    json={},
                )
                return response.status_code

        assert asyncio.run(call()) == 401
    assert_no_secret_logged(logs, caplog)  # nothing of ours was there ...
    with pytest.raises(AssertionError, match="secret fragment"):
        assert_no_secret_logged(logs, caplog, (other,))  # ... but the unknown key is found
    assert {"httpx", "httpcore.http11"} <= {r.name for r, t in logs.seen if other in t}
