"""A scriptable OpenAI-compatible server on loopback, with fault injection, for tests.

It speaks HTTP for real (standard library ``http.server`` in a background thread), so the client
under test goes through its whole network stack: sockets, timeouts, resets. Use it in your own
tests too::

    from rankseam_openai.testing import FakeOpenAIServer, Reply

    with FakeOpenAIServer() as server:
        server.script(Reply.rate_limited(retry_after="1"), Reply.json({"answer": "yes"}))
        options = {"base_url": server.base_url, "model": "test"}
        ...
        assert len(server.requests) == 2

Replies are taken from the script queue in order; when it is empty the *responder* (a function
of the request body) answers; without one the server answers HTTP 400 "no reply scripted".

Faults (:class:`Reply` constructors): ``delayed(s)``, ``rate_limited(retry_after)``,
``error(status)`` (500/503/...), ``reset()`` (TCP RST, no answer), ``malformed_body()``,
``json(...)`` with a schema-violating object, ``prose_around_json(...)``, ``hanging_body()``
(headers and part of the body, then nothing), ``wrong_content_type()``, ``endless_body()`` (a
200 whose body never ends, sent as fast as the client reads). :data:`FAULTS` names each;
``server.inject(name, times=None)`` applies one to the next ``times`` requests (all when None),
whatever the responder would have answered.

``server.settle()`` waits until every connection the server has accepted (or has waiting) has
been read and recorded, so that ``len(server.chat_requests)`` can be compared with what a
client counted even when the client gave up on a request the moment it was sent.
"""

from __future__ import annotations

import html
import json
import re
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, unquote_plus

import attrs

from rankseam_openai.scrub import MIN_FRAGMENT

__all__ = [
    "FAULTS",
    "FakeOpenAIServer",
    "RecordedRequest",
    "Reply",
    "Responder",
    "decision_responder",
    "echo_shapes",
    "exception_texts",
    "generation_responder",
    "leaked_fragment",
    "user_payload",
]

DEFAULT_USAGE = (21, 5)


@attrs.frozen
class Reply:
    """One scripted answer. ``action``: ``respond``, ``reset`` or ``hang``."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    action: str = "respond"

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def content(
        cls,
        text: str,
        *,
        usage: tuple[int, int] | None = DEFAULT_USAGE,
        finish_reason: str = "stop",
        model: str = "fake-model",
    ) -> Reply:
        """A chat completion whose assistant message is ``text``."""
        body: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish_reason,
                }
            ],
        }
        if usage is not None:
            body["usage"] = {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": usage[0] + usage[1],
            }
        return cls.raw(json.dumps(body).encode())

    @classmethod
    def json(cls, value: Any, *, usage: tuple[int, int] | None = DEFAULT_USAGE) -> Reply:
        """A chat completion whose assistant message is ``value`` as JSON."""
        return cls.content(json.dumps(value), usage=usage)

    @classmethod
    def prose_around_json(cls, value: Any, **kwargs: Any) -> Reply:
        return cls.content(
            f"Sure! Here is my answer:\n{json.dumps(value)}\nHope it helps.", **kwargs
        )

    @classmethod
    def raw(
        cls, body: bytes, *, status: int = 200, content_type: str = "application/json"
    ) -> Reply:
        return cls(status, body, (("Content-Type", content_type),))

    @classmethod
    def error(
        cls, status: int, message: str = "", *, headers: Mapping[str, str] | None = None
    ) -> Reply:
        """An OpenAI-style error body with ``status``."""
        body = json.dumps(
            {
                "error": {
                    "message": message or f"fake error {status}",
                    "type": "fake",
                    "code": status,
                }
            }
        ).encode()
        extra = tuple((headers or {}).items())
        return cls(status, body, (("Content-Type", "application/json"), *extra))

    @classmethod
    def rate_limited(cls, retry_after: str | None = "1") -> Reply:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        return cls.error(429, "rate limit reached", headers=headers)

    @classmethod
    def reset(cls) -> Reply:
        """Close the connection with a TCP reset, without answering."""
        return cls(action="reset")

    @classmethod
    def hanging_body(cls) -> Reply:
        """Status and headers (Content-Length 4096), a few body bytes, then silence."""
        return cls(
            200,
            b'{"id": "chatcmpl-hang", "choices": [',
            (("Content-Type", "application/json"), ("Content-Length", "4096")),
            action="hang",
        )

    @classmethod
    def endless_body(cls, chunk: bytes = b" " * 65536) -> Reply:
        """HTTP 200, JSON content type, no Content-Length, and ``chunk`` repeated until the
        client hangs up (a server gone wrong; the client must cap what it reads)."""
        return cls(200, chunk, (("Content-Type", "application/json"),), action="endless")

    @classmethod
    def malformed_body(cls) -> Reply:
        return cls.raw(b'{"id": "chatcmpl-bad", "choices": [{"message": {"content": "ye')

    @classmethod
    def wrong_content_type(cls) -> Reply:
        return cls.raw(b"<html><body>Sign in to continue</body></html>", content_type="text/html")

    def delayed(self, seconds: float) -> Reply:
        return attrs.evolve(self, delay_s=seconds)


@attrs.frozen
class RecordedRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    received_at: float


Responder = Callable[[Any], Reply]


def user_payload(body: Any) -> Any:
    """The JSON the backend put in the last user message of a chat request (or None)."""
    try:
        messages = body["messages"]
        text = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
        return json.loads(text)
    except (KeyError, TypeError, StopIteration, ValueError):
        return None


def decision_responder(decide: Callable[[str, tuple[str, ...]], str]) -> Responder:
    """A responder for the decision backend: ``decide(subject, evidence)`` returns the answer
    (``"yes"``, ``"no"`` or ``"abstain"``)."""

    def respond(body: Any) -> Reply:
        payload = user_payload(body) or {}
        answer = decide(str(payload.get("subject", "")), tuple(payload.get("evidence", ())))
        return Reply.json({"answer": answer})

    return respond


def generation_responder(make: Callable[[Any, Any], Any]) -> Responder:
    """A responder for the generation backend: ``make(input, schema) -> output value``."""

    def respond(body: Any) -> Reply:
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema")
        return Reply.json(make(user_payload(body), schema))

    return respond


def _readable(socks: list[socket.socket], timeout: float) -> int:
    """How many of ``socks`` have bytes (or a hang-up) to read, waiting up to ``timeout`` s
    (a selector: ``select.select`` refuses file descriptors above 1023)."""
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        return len(selector.select(timeout))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: FakeOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:  # quiet: faults are normal
        pass

    def get_request(self) -> Any:
        # Counted *before* accept() takes the connection off the listen queue, so that
        # settle() never sees a connection in neither place.
        self.owner.connection_opened()
        try:
            return super().get_request()
        except BaseException:
            self.owner.connection_read()
            raise


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    _read_done = False

    def _mark_read(self) -> None:
        if not self._read_done:
            self._read_done = True
            self.server.owner.connection_read()

    def handle(self) -> None:
        try:
            if self.server.owner.first_byte(self.connection):
                super().handle()
        finally:
            self._mark_read()  # a connection closed before sending a whole request

    def _handle(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = RecordedRequest(
            self.command, self.path, dict(self.headers.items()), body, time.monotonic()
        )
        reply = owner.next_reply(request)
        self._mark_read()
        if reply.delay_s and owner.stopping.wait(reply.delay_s):
            return
        self.close_connection = True
        if reply.action == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return
        try:
            self.send_response(reply.status)
            names = {k.lower() for k, _ in reply.headers}
            for name, value in reply.headers:
                self.send_header(name, value)
            if "content-length" not in names and reply.action != "endless":
                self.send_header("Content-Length", str(len(reply.body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()
            if reply.action == "hang":
                owner.stopping.wait(owner.hang_s)
            while reply.action == "endless" and not owner.stopping.is_set():
                self.wfile.write(reply.body)  # until the client hangs up (OSError)
        except OSError:
            pass  # the client gave up (timeout) — expected in fault tests


class FakeOpenAIServer:
    """A loopback OpenAI-compatible ``/v1/chat/completions`` server, scripted per test.

    - ``script(*replies)`` queues replies, used in order.
    - ``responder``: answers when the queue is empty (a function of the parsed request body).
    - ``api_key``: when set, a request without ``Authorization: Bearer <api_key>`` gets 401.
    - ``schema_support=False``: a request with a ``json_schema`` response_format gets the 400
      that servers without structured output send (to exercise the JSON-mode fallback).
    - ``requests``: every request received, in order (method, path, headers, body, time).
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        api_key: str | None = None,
        schema_support: bool = True,
        hang_s: float = 30.0,
    ) -> None:
        self.responder = responder
        self.api_key = api_key
        self.schema_support = schema_support
        self.hang_s = hang_s
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._fault: str | None = None
        self._fault_left: int | None = None
        self._lock = threading.Lock()
        self._unread = 0  # connections accepted (or being accepted) and not yet read
        self._idle: set[socket.socket] = set()  # of those, the ones no byte has come on yet
        self.stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAIServer is not started; use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def options(self, **overrides: Any) -> dict[str, Any]:
        """Backend options pointing at this server (fast timeouts suited to tests)."""
        out: dict[str, Any] = {
            "base_url": self.base_url,
            "model": "fake-model",
            "timeout_s": 2.0,
            "deadline_s": 5.0,
            "max_attempts": 3,
            "backoff_s": 0.01,
            "backoff_max_s": 0.05,
        }
        if self.api_key is not None:
            out["api_key"] = self.api_key
        out.update(overrides)
        return out

    # -- scripting ---------------------------------------------------------------------------
    def script(self, *replies: Reply | Iterable[Reply]) -> FakeOpenAIServer:
        with self._lock:
            for reply in replies:
                if isinstance(reply, Reply):
                    self._queue.append(reply)
                else:
                    self._queue.extend(reply)
        return self

    def inject(self, fault: str | None, *, times: int | None = None) -> FakeOpenAIServer:
        """Answer the next ``times`` chat requests (all, when None) with fault ``fault`` (a
        :data:`FAULTS` name) applied to the reply they would otherwise get; None clears it."""
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known faults: {sorted(FAULTS)}")
        with self._lock:
            self._fault = fault
            self._fault_left = times
        return self

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self._fault = None
            self._fault_left = None

    def connection_opened(self) -> None:
        with self._lock:
            self._unread += 1

    def first_byte(self, conn: socket.socket) -> bool:
        """Wait (in the connection's handler) until the client sends its first byte or hangs
        up; False when the server stops first. Meanwhile the connection is *idle*: it holds no
        request yet, so :meth:`settle` does not wait for it unless bytes are pending. A client
        cancelled between connecting and sending can leave such a connection open for as long
        as its socket lives."""
        with self._lock:
            self._idle.add(conn)
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(conn, selectors.EVENT_READ)
                while not selector.select(0.05):
                    if self.stopping.is_set():
                        return False
            return True
        except (OSError, ValueError):  # closed under us
            return False
        finally:
            with self._lock:
                self._idle.discard(conn)

    def connection_read(self) -> None:
        with self._lock:
            self._unread -= 1

    def settle(self, timeout: float = 30.0) -> FakeOpenAIServer:
        """Wait until no connection is waiting to be accepted and every accepted one has been
        read (its request recorded, or the client hung up first). Call it after the client
        returned and before counting ``requests``: a client may give up on a request it has
        just sent, and the server thread records it a moment later. A connection on which the
        client has sent nothing yet (and not hung up) is not waited for: it holds no request."""
        if self._server is None:
            raise RuntimeError("FakeOpenAIServer is not started; use it as a context manager")
        sock = self._server.socket
        deadline = time.monotonic() + timeout
        while True:
            # The order matters: first the listen queue, then the count (see get_request).
            waiting = bool(_readable([sock], 0))
            with self._lock:
                unread, idle = self._unread, list(self._idle)
            if idle:  # idle connections with bytes pending are about to be read: count them
                try:
                    pending = _readable(idle, 0)
                except (OSError, ValueError):  # one was closed meanwhile: look again
                    pending = len(idle)
                unread -= len(idle) - pending
            if not waiting and unread == 0:
                return self
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"FakeOpenAIServer did not settle within {timeout} s "
                    f"({unread} connection(s) unread, listen queue {'not ' * (not waiting)}empty)"
                )
            time.sleep(0.005)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if _is_chat(r.path)]

    def next_reply(self, request: RecordedRequest) -> Reply:
        """Record ``request`` and choose its reply (called by the request handler)."""
        with self._lock:
            self.requests.append(request)
            if not _is_chat(request.path):
                return Reply.error(404, f"unknown path {request.path}")
            if self.api_key is not None:
                if request.headers.get("Authorization") != f"Bearer {self.api_key}":
                    sent = request.headers.get("Authorization", "")
                    # Echo the credential back, as some servers do: clients must scrub it.
                    return Reply.error(401, f"invalid api key: {sent!r}")
            fmt = (
                (request.body or {}).get("response_format")
                if isinstance(request.body, dict)
                else None
            )
            if (
                not self.schema_support
                and isinstance(fmt, dict)
                and fmt.get("type") == "json_schema"
            ):
                return Reply.error(400, "response_format type 'json_schema' is not supported")
            if self._queue:
                return self._queue.popleft()
            fault = self._fault
            if fault is not None and self._fault_left is not None:
                self._fault_left -= 1
                if self._fault_left <= 0:
                    self._fault, self._fault_left = None, None
        if self.responder is not None:
            good = self.responder(request.body)
        else:
            good = Reply.error(400, "FakeOpenAIServer: no reply scripted for this request")
        return FAULTS[fault](good) if fault is not None else good


def _is_chat(path: str) -> bool:
    return path.split("?", 1)[0].endswith("/chat/completions")


def _prose(good: Reply) -> Reply:
    try:
        text = json.loads(good.body)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        text = '{"answer": "yes"}'
    return Reply.content(f"Here you go:\n```json\n{text}\n```\nAnything else?")


#: Fault name -> the reply that replaces a good reply when the fault is injected.
FAULTS: dict[str, Callable[[Reply], Reply]] = {
    "delay": lambda good: good.delayed(30.0),
    "rate_limit": lambda good: Reply.rate_limited("0"),
    "http_500": lambda good: Reply.error(500),
    "http_503": lambda good: Reply.error(503),
    "connection_reset": lambda good: Reply.reset(),
    "malformed_json": lambda good: Reply.malformed_body(),
    "schema_violation": lambda good: Reply.json({"verdict": "maybe", "ranks": "one"}),
    "prose_around_json": _prose,
    "hanging_body": lambda good: Reply.hanging_body(),
    "wrong_content_type": lambda good: Reply.wrong_content_type(),
    "endless_body": lambda good: Reply.endless_body(),
}


# -- secret-leak tests ------------------------------------------------------------------------


#: Where rankseam-openai cuts an excerpt of server text for a message (characters).
EXCERPT = 200


def _pct(text: str, lower: bool = False) -> str:
    out = "".join(f"%{b:02X}" for b in text.encode())
    return out.lower() if lower else out


def echo_shapes(secret: str) -> Iterator[tuple[str, str]]:
    """(name, text) pairs, each holding ``secret`` in one shape a server may echo it in: split
    by whitespace at every position, across every cut point of an excerpt, percent-, JSON-,
    ``\\x``- and HTML-escaped, after a long run of whitespace."""
    yield "verbatim", f"invalid api key: {secret}"
    yield "quoted", f"invalid api key: 'Bearer {secret}'"
    for i in range(1, len(secret)):  # a line break at every position; other breaks at some
        yield f"split-newline-{i}", f"key {secret[:i]}\n{secret[i:]} refused"
        if i % 3 == 0:
            yield f"split-space-{i}", f"key {secret[:i]} {secret[i:]} refused"
            yield f"split-crlf-tab-{i}", f"key {secret[:i]}\r\n\t{secret[i:]} refused"
    yield "wrapped-every-4", "\n".join(secret[i : i + 4] for i in range(0, len(secret), 4))
    yield "spaced-out", " ".join(secret)
    yield "percent", f"key={_pct(secret)}"
    yield "percent-lower", f"key={_pct(secret, lower=True)}"
    yield "percent-split", f"key={_pct(secret[:10])}%0A{_pct(secret[10:])}"
    yield "json-unicode", "key=" + "".join(f"\\u{ord(c):04x}" for c in secret)
    yield "json-unicode-upper", "key=" + "".join(f"\\u{ord(c):04X}" for c in secret)
    yield "hex-escape", "key=" + "".join(f"\\x{ord(c):02x}" for c in secret)
    yield "html-decimal", "key=" + "".join(f"&#{ord(c)};" for c in secret)
    yield "html-hex", "key=" + "".join(f"&#x{ord(c):x};" for c in secret)
    yield "escaped-slashes", "key=" + "".join("\\" + c if c in "-/" else c for c in secret)
    yield "json-newline-escape", f"key {secret[:12]}\\n{secret[12:]}"
    # the key across every cut point of the excerpt (200 characters), whether the body is the
    # text itself or a JSON error object around it (which puts the text 23 characters in)
    for pad in range(EXCERPT - len(secret) - 30, EXCERPT + 5):
        yield f"cut-{pad}", "x" * pad + secret + " trailing text"
    # the key at the end of a long run of whitespace (the excerpt is cut after normalising)
    yield "after-whitespace", " " * 20_000 + secret
    yield "after-newlines", "\n" * 16_380 + secret


def _variants(text: str) -> Iterator[str]:
    """``text`` and every decoding of it a reader could apply."""
    yield text
    squeezed = re.sub(r"\s+", "", text)
    yield squeezed
    for candidate in (text, squeezed):
        yield unquote(candidate)
        yield unquote_plus(candidate)
        yield html.unescape(candidate)
        yield re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), candidate)
        yield re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), candidate)
        yield re.sub(r"\\(.)", r"\1", candidate)
        yield re.sub(r"\\[nrt]", "", candidate)
        yield re.sub(r"%0[aAdD9]|%20", "", candidate)


def leaked_fragment(text: str, secrets: Iterable[str]) -> str | None:
    """The first run of a secret (``MIN_FRAGMENT`` characters or more) found in ``text`` or in
    any decoding of it (whitespace removed, percent-, JSON-, HTML-unescaped), or None."""
    secrets = tuple(secrets)
    for variant in _variants(text):
        for secret in secrets:
            for i in range(len(secret) - MIN_FRAGMENT + 1):
                fragment = secret[i : i + MIN_FRAGMENT]
                if fragment in variant:
                    return fragment
    return None


def exception_texts(exc: BaseException) -> Iterator[str]:
    """Everything an exception exposes: message, repr, attributes, and the same for every
    exception it chains to (``__cause__``, ``__context__``), including an HTTP library
    exception's request and its headers (for secret-leak tests)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield str(current)
        yield repr(current)
        yield from _headers_of(current)
        for name, value in vars(current).items():
            yield f"{name}={value!r}"
            yield from _headers_of(value)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)


def _headers_of(obj: object) -> Iterator[str]:
    """The headers of ``obj`` (a request) or of the request it holds (an HTTP error)."""
    for holder in (obj, _attribute(obj, "_request"), _attribute(obj, "request")):
        headers = _attribute(holder, "headers")
        if isinstance(headers, Mapping):
            yield json.dumps({str(k): str(v) for k, v in headers.items()})


def _attribute(obj: object, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # httpx's HTTPError.request raises when no request is attached
        return None
