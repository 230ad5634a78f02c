"""One chat-completion call over HTTP, with timeouts, a deadline and retries for transient faults.

Rules (see docs/plugins/openai.md):

- Every HTTP request is one *call* in :class:`~rankseam.types.Usage`, failed ones included.
  Tokens come from the response's ``usage`` block. An answer without one (a server that does not
  report usage, a timeout, a reset connection, an unreadable body) makes the token counts unknown
  (``None``); a refused request (an HTTP error status, or a connection that never opened) counts
  zero tokens.
- Transient faults are retried with ``tenacity``: connect errors, timeouts, a reset or dropped
  connection, 429 (after ``Retry-After`` when the server sends it) and 500/502/503/504. Waits are
  exponential with full jitter, ``uniform(0, min(backoff_max_s, backoff_s * 2**(n-1)))``. Retries
  stop at ``max_attempts`` or when the next wait would cross ``deadline_s``; each request's
  timeout is ``min(timeout_s, time left before the deadline)``.
- Nothing else is retried: 400/401/403/404/422 and other statuses, and unparseable or
  schema-violating output.
- Errors are the host's typed errors (:class:`~rankseam.errors.BackendTimeoutError`,
  :class:`~rankseam.errors.BackendUnavailableError`, :class:`~rankseam.errors.InvalidOutputError`)
  with ``usage`` (every attempt), ``attempts`` and ``status_code`` attached. Messages never
  contain the API key or header values.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import logging
import os
import random
import re
import ssl
import time
import weakref
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import certifi
import httpx
import tenacity

from rankseam.errors import (
    BackendError,
    BackendTimeoutError,
    BackendUnavailableError,
    InvalidOutputError,
)
from rankseam.plugin import is_int
from rankseam.types import Usage
from rankseam_openai.config import OpenAISettings, public_url
from rankseam_openai.scrub import Scrubber

__all__ = [
    "NO_RETRY_STATUSES",
    "RETRY_STATUSES",
    "ChatClient",
    "Completion",
    "ResponseTooLargeError",
]

log = logging.getLogger("rankseam_openai")

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
NO_RETRY_STATUSES = frozenset({400, 401, 403, 404, 422})
_AUTO_ORDER = ("schema", "json_object", "none")
_SCHEMA_HINTS = ("response_format", "response format", "json_schema", "json_object")
_EXCERPT = 200
#: How much server text is scrubbed for an excerpt: far more than the excerpt, so the cut made
#: after scrubbing always falls inside scrubbed text.
_EXCERPT_WINDOW = 16 * 1024
#: An error response's body is read up to this much (only an excerpt of it is shown).
_ERROR_BODY_BYTES = 64 * 1024
_VERSION = "0.1.0"


@attrs.frozen
class Completion:
    """The assistant message of a successful call, and what the call cost."""

    content: str
    usage: Usage
    attempts: int
    json_mode: str
    finish_reason: str | None = None


def _fail(
    cls: type[BackendError],
    message: str,
    *,
    retryable: bool,
    retry_after: float | None = None,
    status_code: int | None = None,
) -> BackendError:
    exc = cls(message)
    exc.retryable = retryable  # type: ignore[attr-defined]
    exc.retry_after = retry_after  # type: ignore[attr-defined]
    exc.status_code = status_code  # type: ignore[attr-defined]
    return exc


def attach(exc: BaseException, usage: Usage, attempts: int | None = None) -> BaseException:
    """Attach the cost of the failed work to ``exc`` (the seam reads ``exc.usage``)."""
    exc.usage = usage  # type: ignore[attr-defined]
    if attempts is not None:
        exc.attempts = attempts  # type: ignore[attr-defined]
    return exc


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent
    or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


class ResponseTooLargeError(InvalidOutputError):
    """The server sent (or announced) a response body over ``max_response_bytes``. Reading
    stopped at the cap, so an endless or huge body costs at most that much memory. Not
    retried; its kind is ``invalid_output``."""


class _SchemaUnsupported(Exception):
    pass


class _Attempt:
    """One request's bookkeeping: whether its headers were sent (httpcore's trace extension
    says so), and whether it has been counted in the ledger."""

    __slots__ = ("counted", "sent")

    def __init__(self) -> None:
        self.sent = False
        self.counted = False

    async def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event.endswith("send_request_headers.complete"):
            self.sent = True

    def count(self, ledger: list[Usage], usage: Usage) -> None:
        if not self.counted:
            self.counted = True
            ledger.append(usage)


_Decoder = Any  # a zlib decompress object


def _decoder(encoding: str) -> _Decoder | str | None:
    """None for an identity body, a zlib decompressor for gzip/deflate, else the encoding's
    name (which the caller refuses)."""
    names = [e.strip().lower() for e in encoding.split(",") if e.strip()]
    names = [e for e in names if e != "identity"]
    if not names:
        return None
    if names in (["gzip"], ["x-gzip"], ["deflate"]):
        return zlib.decompressobj(32 + zlib.MAX_WBITS)  # gzip or zlib header, detected
    return ", ".join(names)


def _decoded(decoder: _Decoder | None, raw: bytes, room: int) -> list[bytes]:
    """``raw`` decoded, stopping once more than ``room`` bytes came out (a small compressed
    chunk may inflate a thousandfold: it is never inflated past the cap)."""
    if decoder is None:
        return [raw]
    out: list[bytes] = []
    data = raw
    try:
        while data and room > 0:
            chunk = decoder.decompress(data, room)
            out.append(chunk)
            room -= len(chunk)
            data = decoder.unconsumed_tail
    except zlib.error as exc:
        raise _fail(
            InvalidOutputError,
            f"the response body could not be decompressed ({exc})",
            retryable=False,
        ) from None
    return out


class ChatClient:
    """Calls ``POST {base_url}/chat/completions``. One instance may serve many event loops
    (one connection pool per loop) and many concurrent requests."""

    def __init__(self, settings: OpenAISettings, *, what: str, policy_id: str) -> None:
        self.settings = settings
        self.what = what
        self.policy_id = policy_id
        self._auto_mode = 0
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._random = random.Random()
        self._scrubber = Scrubber(settings.secrets())

    def __repr__(self) -> str:
        return f"ChatClient({public_url(self.settings.base_url)!r}, model={self.settings.model!r})"

    # -- plumbing ------------------------------------------------------------------------------
    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None or client.is_closed:
            s = self.settings
            client = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(
                    retries=0,
                    verify=_tls_context() if s.base_url.startswith("https:") else False,
                    limits=httpx.Limits(
                        max_connections=s.max_connections,
                        max_keepalive_connections=s.max_connections,
                    ),
                    trust_env=not s.loopback,
                ),
                timeout=httpx.Timeout(s.timeout_s),
                follow_redirects=False,
                trust_env=not s.loopback,  # no proxy between us and a loopback server
            )
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the connection pool of the running event loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()

    def _headers(self) -> dict[str, str]:
        s = self.settings
        headers = {
            "Accept": "application/json",
            # Plain bytes, so that max_response_bytes bounds what is read off the wire too.
            "Accept-Encoding": "identity",
            "Content-Type": "application/json",
            "User-Agent": f"rankseam-openai/{_VERSION}",
        }
        if s.api_key is not None:
            headers["Authorization"] = f"Bearer {s.api_key.reveal()}"
        headers.update({name: value.reveal() for name, value in s.headers.items()})
        return headers

    def scrub(self, text: str) -> str:
        """``text`` with every run of a secret value replaced by ``***``, however the server
        wrote it (see :mod:`rankseam_openai.scrub`)."""
        return self._scrubber(text)

    def _excerpt(self, text: str) -> str:
        """A short, one-line excerpt of server text for a message: scrubbed *first* (a secret
        split by a line break, or cut by the excerpt, would escape a later scrub), then
        normalised and cut."""
        text = self.scrub(text[:_EXCERPT_WINDOW])
        text = " ".join(text.split())
        if len(text) > _EXCERPT:
            text = text[:_EXCERPT] + "..."
        return text

    def _mode(self) -> str:
        mode = self.settings.json_mode
        return _AUTO_ORDER[self._auto_mode] if mode == "auto" else mode

    def _body(
        self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any], name: str, mode: str
    ) -> dict[str, Any]:
        s = self.settings
        body: dict[str, Any] = {
            "model": s.model,
            "messages": [dict(m) for m in messages],
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
            "stream": False,
        }
        if mode == "schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "answer",
                    "schema": _plain(schema),
                    "strict": False,
                },
            }
        elif mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    # -- one HTTP request ----------------------------------------------------------------------
    async def _send(
        self, body: dict[str, Any], timeout: float, ledger: list[Usage], mode: str
    ) -> Completion:
        """One request. It counts in ``ledger`` once its headers were sent (then the server has
        it, whatever happens next: a timeout, a cancellation, an unreadable answer); a request
        that never left (no connection) counts zero calls.

        Errors are raised outside the ``except`` blocks that caught the HTTP library's
        exceptions, so none chains to them (``__context__``): those hold the request and its
        ``Authorization`` header."""
        where = public_url(self.settings.base_url)
        payload = json.dumps(body, ensure_ascii=False).encode()
        client = self._client()  # built outside the timeout: building it is not waiting
        attempt = _Attempt()
        failure: BackendError | None = None
        try:
            async with asyncio.timeout(timeout):
                # The request (its Authorization header) is never held in a local variable.
                response = await client.send(
                    client.build_request(
                        "POST",
                        self.settings.url,
                        content=payload,
                        headers=self._headers(),
                        timeout=httpx.Timeout(timeout),
                        extensions={"trace": attempt.trace},
                    ),
                    stream=True,
                )
                try:
                    return await self._read(response, attempt, ledger, mode)
                finally:
                    await response.aclose()
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            failure = _fail(
                BackendUnavailableError,
                f"could not connect to {where} ({type(exc).__name__}: "
                f"{self._excerpt(str(exc)) or 'no detail'}); is the server running and base_url "
                "right?",
                retryable=True,
            )
        except (TimeoutError, httpx.TimeoutException):
            failure = _fail(
                BackendTimeoutError,
                f"no complete answer from {where} within {timeout:.3g} s; raise timeout_s if the "
                "model is slow",
                retryable=True,
            )
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            failure = _fail(
                BackendUnavailableError,
                f"the connection to {where} failed ({type(exc).__name__}: "
                f"{self._excerpt(str(exc)) or 'no detail'})",
                retryable=True,
            )
        except httpx.HTTPError as exc:
            failure = _fail(
                BackendUnavailableError,
                f"the request to {where} could not be made ({type(exc).__name__}: "
                f"{self._excerpt(str(exc))}); check base_url",
                retryable=False,
            )
        finally:
            if not attempt.counted:  # failed, timed out or cancelled before an answer was read
                ledger.append(Usage(1, None, None) if attempt.sent else Usage(0, 0, 0))
        assert failure is not None  # every other path returned or raised
        raise failure

    async def _read_body(self, response: httpx.Response, limit: int, *, error: bool) -> bytes:
        """The response body, read as it streams in and never more than ``limit`` bytes
        (after decompression). Past the limit, an error response's body is cut there; any
        other raises :class:`ResponseTooLargeError` at once."""
        where = public_url(self.settings.base_url)
        setting = "max_response_bytes"
        declared = response.headers.get("content-length", "").strip()
        if not error and declared.isdigit() and int(declared) > limit:
            raise _fail(
                ResponseTooLargeError,
                f"{where} announced a {int(declared)}-byte response (Content-Length), over "
                f"{setting}={limit}; nothing was read. Raise {setting} if replies really are "
                "that large, else check the server",
                retryable=False,
                status_code=response.status_code,
            )
        decoder = _decoder(response.headers.get("content-encoding", ""))
        if isinstance(decoder, str):
            raise _fail(
                InvalidOutputError,
                f"{where} answered with Content-Encoding {decoder!r}, which this client does "
                "not read (it asks for identity and accepts gzip or deflate)",
                retryable=False,
                status_code=response.status_code,
            )
        parts: list[bytes] = []
        total = 0
        async for raw in response.aiter_raw():
            for chunk in _decoded(decoder, raw, limit - total + 1):
                parts.append(chunk)
                total += len(chunk)
            if total > limit:
                if error:
                    return b"".join(parts)[:limit]
                raise _fail(
                    ResponseTooLargeError,
                    f"{where} sent a response body over {setting}={limit} bytes; reading "
                    f"stopped there. Raise {setting} if replies really are that large (a long "
                    "max_tokens), else check the server",
                    retryable=False,
                    status_code=response.status_code,
                )
        if decoder is not None:
            tail = decoder.flush()
            total += len(tail)
            parts.append(tail)
            if total > limit and not error:
                raise _fail(
                    ResponseTooLargeError,
                    f"{where} sent a response body over {setting}={limit} bytes",
                    retryable=False,
                    status_code=response.status_code,
                )
        return b"".join(parts)

    async def _read(
        self, response: httpx.Response, attempt: _Attempt, ledger: list[Usage], mode: str
    ) -> Completion:
        where = public_url(self.settings.base_url)
        status = response.status_code
        limit = self.settings.max_response_bytes
        if status >= 300:
            attempt.count(ledger, Usage(1, 0, 0))
            raw = await self._read_body(response, min(limit, _ERROR_BODY_BYTES), error=True)
            detail = self._excerpt(raw.decode("utf-8", "replace"))
            if (
                status in (400, 422)
                and self.settings.json_mode == "auto"
                and mode != "none"
                and any(h in detail.lower() for h in _SCHEMA_HINTS)
            ):
                raise _SchemaUnsupported(detail)
            if status == 429:
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                wait = "" if retry_after is None else f", Retry-After {retry_after:g} s"
                raise _fail(
                    BackendUnavailableError,
                    f"{where} is rate limiting requests (HTTP 429{wait}): {detail}",
                    retryable=True,
                    retry_after=retry_after,
                    status_code=status,
                )
            if status in RETRY_STATUSES:
                raise _fail(
                    BackendUnavailableError,
                    f"{where} failed with HTTP {status}: {detail}",
                    retryable=True,
                    status_code=status,
                )
            raise _fail(
                BackendUnavailableError,
                f"{where} refused the request with HTTP {status}: {detail}; {_hint(status)}",
                retryable=False,
                status_code=status,
            )
        content_type = response.headers.get("content-type", "")
        if "json" not in content_type.lower():
            attempt.count(ledger, Usage(1, None, None))
            raise _fail(
                InvalidOutputError,
                f"{where} answered with content type {self._excerpt(content_type) or 'none'!r}, "
                "not JSON; is base_url the API root of an OpenAI-compatible server (usually "
                "ending in /v1)?",
                retryable=False,
                status_code=status,
            )
        try:
            content = await self._read_body(response, limit, error=False)
        except BackendError:
            attempt.count(ledger, Usage(1, None, None))
            raise
        unreadable = False
        try:
            data = json.loads(content)
        except (ValueError, RecursionError):
            unreadable = True  # raised below: never chained to the decoder's error (it holds
            # the whole body)
        if unreadable:
            attempt.count(ledger, Usage(1, None, None))
            raise _fail(
                InvalidOutputError,
                f"{where} answered with a body that is not valid JSON ({len(content)} "
                "bytes); is it an OpenAI-compatible chat/completions endpoint?",
                retryable=False,
                status_code=status,
            )
        usage = _usage_of(data)
        attempt.count(ledger, usage)
        choice = data.get("choices") if isinstance(data, dict) else None
        choice = choice[0] if isinstance(choice, list) and choice else None
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise _fail(
                InvalidOutputError,
                f"{where} answered without choices[0].message; is it an OpenAI-compatible "
                "chat/completions endpoint?",
                retryable=False,
                status_code=status,
            )
        text = message.get("content")
        if not isinstance(text, str) or not text.strip():
            refusal = message.get("refusal")
            why = f"the model refused: {self._excerpt(str(refusal))}" if refusal else "it was empty"
            raise _fail(
                InvalidOutputError,
                f"the model's reply holds no text ({why})",
                retryable=False,
                status_code=status,
            )
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        # The reply reaches rationales, traces and error messages: a secret the server echoed
        # into it is scrubbed here, once.
        return Completion(
            self.scrub(text), usage, 1, mode, finish if isinstance(finish, str) else None
        )

    async def _attempt(
        self,
        messages: Sequence[Mapping[str, str]],
        schema: Mapping[str, Any],
        name: str,
        ledger: list[Usage],
        started: float,
    ) -> Completion:
        s = self.settings
        while True:
            remaining = s.deadline_s - (time.monotonic() - started)
            if remaining <= 0:
                raise _fail(
                    BackendTimeoutError,
                    f"the deadline of {s.deadline_s:g} s (deadline_s) was used up",
                    retryable=False,
                )
            mode = self._mode()
            try:
                return await self._send(
                    self._body(messages, schema, name, mode),
                    min(s.timeout_s, remaining),
                    ledger,
                    mode,
                )
            except _SchemaUnsupported:
                index = _AUTO_ORDER.index(mode) + 1
                self._auto_mode = max(self._auto_mode, index)
                log.info(
                    "server lacks a response_format mode; falling back",
                    extra={
                        "event": "openai.json_mode_fallback",
                        "policy_id": self.policy_id,
                        "from_mode": mode,
                        "to_mode": _AUTO_ORDER[index],
                    },
                )

    # -- the call ------------------------------------------------------------------------------
    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return float(retry_after)
        s = self.settings
        cap = min(s.backoff_max_s, s.backoff_s * 2 ** (state.attempt_number - 1))
        return self._random.uniform(0.0, cap)

    def _before_sleep(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        log.info(
            "model request failed; retrying",
            extra={
                "event": "openai.retry",
                "policy_id": self.policy_id,
                "attempt": state.attempt_number,
                "error_type": type(exc).__name__,
                "status_code": getattr(exc, "status_code", None),
                "sleep_s": round(state.upcoming_sleep, 3),
            },
        )

    async def complete(
        self, messages: Sequence[Mapping[str, str]], *, schema: Mapping[str, Any], name: str
    ) -> Completion:
        """Send ``messages`` asking for JSON that follows ``schema``; retry transient faults.

        Raises a typed backend error with ``usage`` and ``attempts`` attached.
        """
        s = self.settings
        ledger: list[Usage] = []
        started = time.monotonic()
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(s.max_attempts)
            | tenacity.stop_before_delay(s.deadline_s),
            wait=self._wait,
            retry=tenacity.retry_if_exception(lambda e: getattr(e, "retryable", False)),
            before_sleep=self._before_sleep,
            reraise=True,
        )
        final: BackendError | None = None
        try:
            completion: Completion = await retrying(
                self._attempt, messages, schema, name, ledger, started
            )
        except BackendError as exc:
            final = self._final(exc, _requests(ledger), time.monotonic() - started)
        except BaseException as exc:  # cancellation and the unexpected: keep the cost visible
            attach(exc, Usage.total(ledger), _requests(ledger))
            raise
        if final is not None:  # raised here, outside the except block: nothing chains to it
            raise attach(final, Usage.total(ledger), _requests(ledger))
        return attrs.evolve(completion, usage=Usage.total(ledger), attempts=_requests(ledger))

    def _final(self, exc: BackendError, requests: int, elapsed: float) -> BackendError:
        s = self.settings
        retry_after = getattr(exc, "retry_after", None)
        if not getattr(exc, "retryable", False):
            why = "not retried" if requests <= 1 else "not retryable"
        elif retry_after is not None and elapsed + retry_after >= s.deadline_s:
            why = (
                f"the server asked to wait {retry_after:g} s, past deadline_s={s.deadline_s:g}; "
                "raise deadline_s or lower the request rate"
            )
        elif requests >= s.max_attempts:
            why = f"max_attempts={s.max_attempts} reached; raise it if faults are brief"
        else:
            why = f"deadline_s={s.deadline_s:g} reached; raise it if the server is slow"
        message = (
            f"{self.what} (model {s.model!r}): {exc}; gave up after {requests} request(s) in "
            f"{elapsed:.2f} s ({why})"
        )
        final = type(exc)(self.scrub(message))
        final.status_code = getattr(exc, "status_code", None)  # type: ignore[attr-defined]
        final.retryable = getattr(exc, "retryable", False)  # type: ignore[attr-defined]
        return final


def _requests(ledger: list[Usage]) -> int:
    """Requests the server received: the ledger's calls (a request that never left is 0)."""
    return sum(u.calls for u in ledger)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context per process (loading CA certificates is slow); honours
    ``SSL_CERT_FILE`` for private certificate authorities."""
    return ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE") or certifi.where())


def _hint(status: int) -> str:
    if status in (401, 403):
        return (
            "check the API key (OPENAI_API_KEY or api_key) and that it may use this model; "
            "not retried"
        )
    if status == 404:
        return "check base_url (usually ends in /v1) and the model name; not retried"
    if status in (400, 422):
        return "the server rejected the request as invalid (model, max_tokens?); not retried"
    if 300 <= status < 400:
        return "the server redirects; set base_url to the final URL"
    return "not retried"


def _usage_of(data: Any) -> Usage:
    block = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(block, dict):
        return Usage(1, None, None)

    def count(key: str) -> int | None:
        value = block.get(key)
        ok = is_int(value) and value >= 0
        return value if ok else None

    return Usage(1, count("prompt_tokens"), count("completion_tokens"))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
