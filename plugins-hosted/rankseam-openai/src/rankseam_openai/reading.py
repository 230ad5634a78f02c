"""Reading one chat-completion response: the body (streamed, capped at
``max_response_bytes``, gzip/deflate decoded), the status, the JSON, the assistant message and
the ``usage`` block, each failure as a typed error (see :mod:`rankseam_openai.failures`).

A request counts in the call's ledger once (:class:`Attempt`): a refused request (an HTTP
error status) costs one call and zero tokens, an answer without a readable ``usage`` block one
call and unknown (``None``) tokens.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import httpx

from rankseam.errors import BackendError, BackendUnavailableError, InvalidOutputError
from rankseam.plugin import is_int
from rankseam.types import Usage
from rankseam_openai.config import OpenAISettings, public_url
from rankseam_openai.failures import (
    RETRY_STATUSES,
    ResponseTooLargeError,
    SchemaUnsupported,
    fail,
    hint,
    parse_retry_after,
)

__all__ = ["Attempt", "Completion", "read_body", "read_completion"]

_SCHEMA_HINTS = ("response_format", "response format", "json_schema", "json_object")
#: An error response's body is read up to this much (only an excerpt of it is shown).
_ERROR_BODY_BYTES = 64 * 1024


@attrs.frozen
class Completion:
    """The assistant message of a successful call, and what the call cost."""

    content: str
    usage: Usage
    attempts: int
    json_mode: str
    finish_reason: str | None = None


class Attempt:
    """One request's bookkeeping: whether its headers were sent (httpcore's trace extension
    says so), and whether it has been counted in the ledger."""

    __slots__ = ("counted", "sent")

    def __init__(self) -> None:
        self.sent = False
        self.counted = False

    async def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event.endswith("send_request_headers.complete"):
            self.sent = True
        elif event.endswith("send_request_headers.failed") and isinstance(
            info.get("exception"), asyncio.CancelledError
        ):
            # cancelled while the headers were being written: they may have reached the server
            # (the write finished, the cancellation came at the await after it), so the request
            # counts; a cost is never left out because a cancellation raced the socket
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
        raise fail(
            InvalidOutputError,
            f"the response body could not be decompressed ({exc})",
            retryable=False,
        ) from None
    return out


async def read_body(response: httpx.Response, limit: int, *, error: bool, where: str) -> bytes:
    """The response body, read as it streams in and never more than ``limit`` bytes
    (after decompression). Past the limit, an error response's body is cut there; any
    other raises :class:`ResponseTooLargeError` at once."""
    setting = "max_response_bytes"
    declared = response.headers.get("content-length", "").strip()
    if not error and declared.isdigit() and int(declared) > limit:
        raise fail(
            ResponseTooLargeError,
            f"{where} announced a {int(declared)}-byte response (Content-Length), over "
            f"{setting}={limit}; nothing was read. Raise {setting} if replies really are "
            "that large, else check the server",
            retryable=False,
            status_code=response.status_code,
        )
    decoder = _decoder(response.headers.get("content-encoding", ""))
    if isinstance(decoder, str):
        raise fail(
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
            raise fail(
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
            raise fail(
                ResponseTooLargeError,
                f"{where} sent a response body over {setting}={limit} bytes",
                retryable=False,
                status_code=response.status_code,
            )
    return b"".join(parts)


async def read_completion(
    response: httpx.Response,
    attempt: Attempt,
    ledger: list[Usage],
    mode: str,
    *,
    settings: OpenAISettings,
    excerpt: Callable[[str], str],
    scrub: Callable[[str], str],
) -> Completion:
    """The completion in ``response``, counted in ``ledger`` through ``attempt``; ``excerpt``
    makes a scrubbed one-line excerpt of server text, ``scrub`` scrubs the reply's text."""
    where = public_url(settings.base_url)
    status = response.status_code
    limit = settings.max_response_bytes
    if status >= 300:
        attempt.count(ledger, Usage(1, 0, 0))
        raw = await read_body(response, min(limit, _ERROR_BODY_BYTES), error=True, where=where)
        detail = excerpt(raw.decode("utf-8", "replace"))
        if (
            status in (400, 422)
            and settings.json_mode == "auto"
            and mode != "none"
            and any(h in detail.lower() for h in _SCHEMA_HINTS)
        ):
            raise SchemaUnsupported(detail)
        if status == 429:
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            wait = "" if retry_after is None else f", Retry-After {retry_after:g} s"
            raise fail(
                BackendUnavailableError,
                f"{where} is rate limiting requests (HTTP 429{wait}): {detail}",
                retryable=True,
                retry_after=retry_after,
                status_code=status,
            )
        if status in RETRY_STATUSES:
            raise fail(
                BackendUnavailableError,
                f"{where} failed with HTTP {status}: {detail}",
                retryable=True,
                status_code=status,
            )
        raise fail(
            BackendUnavailableError,
            f"{where} refused the request with HTTP {status}: {detail}; {hint(status)}",
            retryable=False,
            status_code=status,
        )
    content_type = response.headers.get("content-type", "")
    if "json" not in content_type.lower():
        attempt.count(ledger, Usage(1, None, None))
        raise fail(
            InvalidOutputError,
            f"{where} answered with content type {excerpt(content_type) or 'none'!r}, "
            "not JSON; is base_url the API root of an OpenAI-compatible server (usually "
            "ending in /v1)?",
            retryable=False,
            status_code=status,
        )
    try:
        content = await read_body(response, limit, error=False, where=where)
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
        raise fail(
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
        raise fail(
            InvalidOutputError,
            f"{where} answered without choices[0].message; is it an OpenAI-compatible "
            "chat/completions endpoint?",
            retryable=False,
            status_code=status,
        )
    text = message.get("content")
    if not isinstance(text, str) or not text.strip():
        refusal = message.get("refusal")
        why = f"the model refused: {excerpt(str(refusal))}" if refusal else "it was empty"
        raise fail(
            InvalidOutputError,
            f"the model's reply holds no text ({why})",
            retryable=False,
            status_code=status,
        )
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    # The reply reaches rationales, traces and error messages: a secret the server echoed
    # into it is scrubbed here, once.
    return Completion(scrub(text), usage, 1, mode, finish if isinstance(finish, str) else None)


def _usage_of(data: Any) -> Usage:
    """One call, with the tokens of the response's ``usage`` block (``None`` where unreadable)."""
    block = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(block, dict):
        return Usage(1, None, None)

    def count(key: str) -> int | None:
        value = block.get(key)
        ok = is_int(value) and value >= 0
        return value if ok else None

    return Usage(1, count("prompt_tokens"), count("completion_tokens"))
