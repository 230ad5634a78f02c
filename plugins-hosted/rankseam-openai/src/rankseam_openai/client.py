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
  contain the API key or header values, nor do the log records of httpx and httpcore
  (:mod:`rankseam_openai.http_logs`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import random
import re
import ssl
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import certifi
import httpx
import tenacity

from rankseam.errors import BackendError, BackendTimeoutError, BackendUnavailableError
from rankseam.types import Usage
from rankseam_openai.config import OpenAISettings, public_url
from rankseam_openai.failures import (
    NO_RETRY_STATUSES,
    RETRY_STATUSES,
    ResponseTooLargeError,
    SchemaUnsupported,
    attach,
    fail,
    parse_retry_after,
)
from rankseam_openai.http_logs import guard
from rankseam_openai.reading import Attempt, Completion, read_completion
from rankseam_openai.scrub import Scrubber

# Completion, the failures and their helpers are defined in rankseam_openai.reading and
# rankseam_openai.failures; their names here are kept for code that imported them from here.
__all__ = [
    "NO_RETRY_STATUSES",
    "RETRY_STATUSES",
    "ChatClient",
    "Completion",
    "ResponseTooLargeError",
    "attach",
    "parse_retry_after",
]

log = logging.getLogger("rankseam_openai")

_AUTO_ORDER = ("schema", "json_object", "none")
_EXCERPT = 200
#: How much server text is scrubbed for an excerpt: far more than the excerpt, so the cut made
#: after scrubbing always falls inside scrubbed text.
_EXCERPT_WINDOW = 16 * 1024
_VERSION = "0.1.0"


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
            # After the client is built: httpx imports httpcore (and so creates its loggers)
            # when it builds a transport.
            guard(self, self.settings.secrets())  # the HTTP library's records are scrubbed too
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
        attempt = Attempt()
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
                    return await read_completion(
                        response,
                        attempt,
                        ledger,
                        mode,
                        settings=self.settings,
                        excerpt=self._excerpt,
                        scrub=self.scrub,
                    )
                finally:
                    await response.aclose()
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            failure = fail(
                BackendUnavailableError,
                f"could not connect to {where} ({type(exc).__name__}: "
                f"{self._excerpt(str(exc)) or 'no detail'}); is the server running and base_url "
                "right?",
                retryable=True,
            )
        except (TimeoutError, httpx.TimeoutException):
            failure = fail(
                BackendTimeoutError,
                f"no complete answer from {where} within {timeout:.3g} s; raise timeout_s if the "
                "model is slow",
                retryable=True,
            )
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            failure = fail(
                BackendUnavailableError,
                f"the connection to {where} failed ({type(exc).__name__}: "
                f"{self._excerpt(str(exc)) or 'no detail'})",
                retryable=True,
            )
        except httpx.HTTPError as exc:
            failure = fail(
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
                raise fail(
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
            except SchemaUnsupported:
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


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
