"""A server that echoes the API key back, in every shape it can, never gets it into our text.

The loopback server echoes the key (and a secret header value) split by whitespace at every
position, across every cut point of the error excerpt, percent-, JSON- and HTML-escaped, in
JSON error bodies, plain-text bodies, response headers, the model's reply, its rationale and its
refusal. No run of a secret of ``MIN_FRAGMENT`` (6) characters or more may appear in any error
message, exception chain, log record or returned value -- in any decoding of that text.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankseam.errors import BackendError
from rankseam.plugin.decision import rerank_request
from rankseam.plugin.generation import GenerationRequest
from rankseam_openai import make_decision_backend, make_generation_backend
from rankseam_openai.scrub import MIN_FRAGMENT, Scrubber
from rankseam_openai.testing import (
    FakeOpenAIServer,
    Reply,
    echo_shapes,
    exception_texts,
    leaked_fragment,
)

#: A key shaped like a real one (a public prefix, then random characters), and a header value.
KEY = "sk-proj-Q3x9Zt7LmN2vB8kR4wY6pH1sD5fG0jCe"
HEADER_VALUE = "hv-8dJ3kL0pQ7rT2wX5yZ9aB4cE6"


def leaks(text: str) -> str | None:
    return leaked_fragment(text, (KEY, HEADER_VALUE))


def assert_clean(texts: Iterable[str] | str, where: str = "") -> None:
    for text in {texts} if isinstance(texts, str) else set(texts):
        found = leaks(text)
        assert found is None, f"secret fragment {found!r} leaked {where}: {text[:400]!r}"


SHAPES = list(echo_shapes(KEY)) + [(f"header-{n}", t) for n, t in echo_shapes(HEADER_VALUE)][:60]


#: Attributes that differ between otherwise equal records (left out, so that equal records
#: are checked once).
_VOLATILE = {"created", "msecs", "relativeCreated", "thread", "threadName", "taskName"}


def _record_text(record: logging.LogRecord) -> str:
    attributes = {k: repr(v) for k, v in vars(record).items() if k not in _VOLATILE}
    return json.dumps(attributes) + record.getMessage()


def _our_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Every record, httpx's INFO lines and httpcore's DEBUG trace (the raw response headers a
    server sent) included: both are scrubbed (``rankseam_openai.http_logs``)."""
    assert any(r.name.startswith("httpcore.") for r in caplog.records)  # DEBUG reached httpcore
    return list(caplog.records)


@pytest.fixture
def echo() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def _options(server: FakeOpenAIServer) -> dict[str, Any]:
    return server.options(api_key=KEY, headers={"X-Org": HEADER_VALUE}, max_attempts=1)


def _failures(backend: Any, server: FakeOpenAIServer, replies: list[Reply]) -> list[str]:
    """Every text the errors of ``replies`` expose (one call per reply)."""
    server.script(*replies)

    async def calls() -> list[str]:
        texts: list[str] = []
        for _ in replies:
            try:
                await backend.evaluate(rerank_request("q", "s"))
            except BackendError as exc:
                texts.extend(exception_texts(exc))
            else:
                raise AssertionError("the call should have failed")
        return texts

    return asyncio.run(calls())


def test_the_scrubber_removes_every_shape_of_the_key() -> None:
    scrub = Scrubber([KEY, HEADER_VALUE])
    for name, text in SHAPES:
        cleaned = scrub(text)
        assert_clean(cleaned, name)
        assert "***" in cleaned or name.startswith(("after-", "header-after-")), name


def test_the_scrubber_sees_through_an_escaped_backslash() -> None:
    """httpcore logs the headers a server sent as the ``repr`` of bytes, which escapes each
    backslash once more: ``\\u0073`` for a JSON-escaped character."""
    scrub = Scrubber([KEY, HEADER_VALUE])
    for name, text in SHAPES:
        shown = repr(text.encode("utf-8", "surrogatepass"))
        assert_clean(scrub(shown), f"repr of {name}")


def test_short_fragments_are_left_and_long_ones_scrubbed() -> None:
    """The documented minimum: a run of MIN_FRAGMENT characters is scrubbed, one fewer is
    not (a few characters of a random key give nothing away)."""
    scrub = Scrubber([KEY])
    assert MIN_FRAGMENT == 6
    assert scrub(f"..{KEY[10:16]}..") == "..***.."
    assert scrub(f"..{KEY[10:15]}..") == f"..{KEY[10:15]}.."
    assert scrub("nothing secret here") == "nothing secret here"
    assert Scrubber(["abcd"])("x abcd y ab cd") == "x *** y ***"  # a short secret: whole only


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=st.text(max_size=60),
    after=st.text(max_size=60),
    cuts=st.lists(st.integers(1, len(KEY) - 1), max_size=4, unique=True),
    seps=st.lists(st.sampled_from([" ", "\n", "\r\n", "\t", "\\n", "%0A", "+", "%20"]), min_size=4),
    encode=st.sampled_from(["plain", "pct", "unicode", "html"]),
)
def test_the_scrubber_on_random_surroundings(
    before: str, after: str, cuts: list[int], seps: list[str], encode: str
) -> None:
    pieces, last = [], 0
    for i, cut in enumerate(sorted(cuts)):
        pieces.append(KEY[last:cut])
        pieces.append(seps[i])
        last = cut
    pieces.append(KEY[last:])
    encoded = []
    for piece in pieces:
        if piece in seps:
            encoded.append(piece)
        elif encode == "pct":
            encoded.append("".join(f"%{b:02X}" for b in piece.encode()))
        elif encode == "unicode":
            encoded.append("".join(f"\\u{ord(c):04x}" for c in piece))
        elif encode == "html":
            encoded.append("".join(f"&#{ord(c)};" for c in piece))
        else:
            encoded.append(piece)
    text = before + "".join(encoded) + after
    assert leaks(Scrubber([KEY])(text)) is None


def test_error_bodies_never_leak_the_key(
    echo: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    backend = make_decision_backend(_options(echo))
    replies = []
    for _name, text in SHAPES:
        replies.append(Reply.error(400, text))  # JSON: line breaks escaped as \n
        replies.append(Reply.raw(text.encode(), status=401, content_type="text/plain"))
    assert_clean(_failures(backend, echo, replies))
    records = _our_records(caplog)
    assert records
    assert_clean({_record_text(record) for record in records}, "in a log record")


def test_headers_and_bodies_of_every_status_never_leak_the_key(
    echo: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    backend = make_decision_backend(_options(echo))
    header_safe = [t for n, t in SHAPES if "\n" not in t and "\r" not in t and len(t) < 4000]
    replies = []
    for text in header_safe[:80]:
        echoed = (("Content-Type", "text/html; charset=" + text), ("X-Echo", text))
        replies.append(Reply(200, text.encode(), echoed))  # wrong content type
        replies.append(Reply(429, text.encode(), (("Retry-After", text), ("X-Echo", text))))
        replies.append(Reply(302, b"", (("Location", "https://x.example/" + text),)))
    assert_clean(_failures(backend, echo, replies))
    records = _our_records(caplog)
    assert records
    assert_clean({_record_text(record) for record in records}, "in a log record")


def test_model_replies_never_leak_the_key(echo: FakeOpenAIServer) -> None:
    """The model's own text: a rationale, a refusal, unparseable output, generation output."""
    decision = make_decision_backend(_options(echo))
    generation = make_generation_backend(_options(echo))
    schema = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"]}
    request = GenerationRequest("echo", "answer", {"x": 1}, schema)

    async def run() -> list[str]:
        texts: list[str] = []
        for _name, text in SHAPES[::3]:
            echo.script(
                Reply.json({"answer": "yes", "rationale": text}),
                Reply.content(text),  # not JSON: InvalidOutputError
                Reply.raw(
                    json.dumps(
                        {"choices": [{"message": {"content": "", "refusal": text}}]}
                    ).encode()
                ),
                Reply.json({"echo": text}),
            )
            result = await decision.evaluate(rerank_request("q", "s"))
            texts.append(repr(result))
            for call in (
                decision.evaluate(rerank_request("q", "s")),
                decision.evaluate(rerank_request("q", "s")),
            ):
                try:
                    await call
                except BackendError as exc:
                    texts.extend(exception_texts(exc))
            generated = await generation.generate(request)
            texts.append(repr(generated) + json.dumps(generated.output))
        return texts

    assert_clean(asyncio.run(run()))


def test_a_key_the_server_refuses_is_echoed_back_and_scrubbed() -> None:
    """The loopback server's own 401 echoes the Authorization header it got."""
    with FakeOpenAIServer(api_key="sk-the-right-key-000") as server:
        backend = make_decision_backend(_options(server) | {"api_key": KEY})
        texts = _failures(backend, server, [Reply.json({"answer": "yes"})])
    assert any("401" in t for t in texts)
    assert_clean(texts)


def test_no_error_chains_to_the_http_request() -> None:
    """Errors are raised outside the handlers of the HTTP library's exceptions: nothing chains
    to an httpx exception, whose ``request`` holds the Authorization header."""
    with FakeOpenAIServer() as server:
        options = _options(server)
    backend = make_decision_backend(options)  # the server is gone: connection refused
    with pytest.raises(BackendError) as info:
        asyncio.run(backend.evaluate(rerank_request("q", "s")))
    assert info.value.__context__ is None and info.value.__cause__ is None
    assert_clean(exception_texts(info.value))


def test_the_leak_check_sees_through_chains_and_escapes() -> None:
    """The checks above can fail: a request's header behind ``__context__``, and an escaped
    or split key, are found."""
    import httpx

    request = httpx.Request("POST", "http://x/v1", headers={"Authorization": f"Bearer {KEY}"})
    try:
        try:
            raise httpx.ConnectError("refused", request=request)
        except httpx.ConnectError:
            raise BackendError("could not connect") from None
    except BackendError as exc:
        assert leaks("\n".join(exception_texts(exc))) == KEY[:MIN_FRAGMENT]
    for _name, text in SHAPES:
        if not _name.startswith(("after-", "header-")):
            assert leaks(text) is not None, _name
