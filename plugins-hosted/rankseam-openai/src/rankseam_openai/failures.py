"""The errors of one chat-completion call: how a failure is raised, what it cost, and whether it
is retried (see docs/plugins/openai.md).

A failure is one of the host's typed backend errors with ``retryable``, ``retry_after`` and
``status_code`` attached (:func:`fail`); the cost of the failed work is attached by
:func:`attach`. Statuses in :data:`RETRY_STATUSES` are retried, those in
:data:`NO_RETRY_STATUSES` (and any other) are not.
"""

from __future__ import annotations

import email.utils
import time

from rankseam.errors import BackendError, InvalidOutputError
from rankseam.types import Usage

__all__ = [
    "NO_RETRY_STATUSES",
    "RETRY_STATUSES",
    "ResponseTooLargeError",
    "SchemaUnsupported",
    "attach",
    "fail",
    "hint",
    "parse_retry_after",
]

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
NO_RETRY_STATUSES = frozenset({400, 401, 403, 404, 422})


def fail(
    cls: type[BackendError],
    message: str,
    *,
    retryable: bool,
    retry_after: float | None = None,
    status_code: int | None = None,
) -> BackendError:
    """``cls(message)`` with ``retryable``, ``retry_after`` and ``status_code`` attached."""
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


class SchemaUnsupported(Exception):
    """The server refused the ``response_format`` mode asked for (``json_mode = "auto"`` then
    falls back to the next mode)."""


def hint(status: int) -> str:
    """What to check after HTTP ``status`` refused a request."""
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
