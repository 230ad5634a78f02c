"""The loopback server itself: a standard library ``http.server`` in a background thread that
answers each request with the next scripted :class:`~rankseam_openai.testing.Reply`."""

from __future__ import annotations

import json
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rankseam_openai.testing.replies import FAULTS, RecordedRequest, Reply, Responder

__all__ = ["FakeOpenAIServer"]


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
            self.send_response(reply.status, reply.reason)
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
    - ``api_key``: when set, a request without ``Authorization: Bearer <api_key>`` gets 401,
      which echoes the ``Authorization`` header it got in its body, its reason phrase and its
      ``WWW-Authenticate`` header.
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
        """Backend options pointing at this server, with short backoffs. The timeouts are
        far above what a healthy answer takes on any machine, however loaded (a test's verdict
        never hangs on how fast a healthy answer comes); a test *of* a timeout or a deadline
        sets its own ``timeout_s`` / ``deadline_s``."""
        out: dict[str, Any] = {
            "base_url": self.base_url,
            "model": "fake-model",
            "timeout_s": 30.0,
            "deadline_s": 60.0,
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
                    # Echo the credential back, as some servers do -- in the body, the reason
                    # phrase and a header: clients must scrub it wherever it goes.
                    echo = {}
                    if sent.isascii() and sent.isprintable():
                        echo["WWW-Authenticate"] = f'Bearer error="invalid_token", got="{sent}"'
                    return Reply.error(
                        401,
                        f"invalid api key: {sent!r}",
                        headers=echo,
                        reason=f"Unauthorized {sent}" if echo else None,
                    )
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
