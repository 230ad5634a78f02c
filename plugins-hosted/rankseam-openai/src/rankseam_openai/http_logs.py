"""The HTTP library's own log records, scrubbed of the secrets the client sends.

httpx logs every response at ``INFO`` (``HTTP Request: POST <url> "HTTP/1.1 401 <reason>"``),
and httpcore, at ``DEBUG``, every step of a request, with the status line and the headers the
server sent. A server that echoes the key in its reason phrase or in a header would put the key
in those records. :func:`guard` installs one :class:`logging.Filter` on the ``httpx`` and
``httpcore`` loggers *and on every logger below them*: a logger's filters see only the records
logged through that very logger, not those its children pass up (httpcore logs from
``httpcore.http11``, ``httpcore.connection``, ``httpcore.http2``, ``httpcore.proxy`` ...).

The filter runs before any handler sees a record. With one scrubber
(:class:`~rankseam_openai.scrub.Scrubber`) for the secrets of every live client, it scrubs:

- the message: when the formatted message, or any argument, holds a run of a secret, the
  record's ``msg`` becomes the scrubbed, formatted message and ``args`` becomes empty;
- the traceback: an exception of the HTTP library holds the request, whose ``Authorization``
  header is the key, so a record's ``exc_info`` is replaced by its scrubbed text
  (``exc_text``), as is ``stack_info``.

Clients are held weakly: a closed and dropped client's secrets are not kept alive here.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping

from rankseam_openai.scrub import Scrubber

__all__ = ["HTTP_LOGGERS", "guard", "http_loggers", "scrub_record"]

#: The loggers (with every logger below them) of the HTTP stack the client drives.
HTTP_LOGGERS = ("httpx", "httpcore")


class _SecretFilter(logging.Filter):
    """Scrubs each record of the secrets of every live client (see the module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self._owners: weakref.WeakKeyDictionary[object, tuple[str, ...]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self._scrubber = Scrubber(())

    def add(self, owner: object, secrets: tuple[str, ...]) -> None:
        with self._lock:
            self._owners[owner] = secrets

    def _current(self) -> Scrubber:
        """One scrubber for the secrets of every live owner: every secret's runs are found in
        the same text and masked at once (a mask of one secret never cuts a run of another
        short of being found). Rebuilt when the set of secrets changes."""
        with self._lock:
            secrets = tuple(sorted({s for values in self._owners.values() for s in values}))
            if secrets != self._scrubber.secrets:
                self._scrubber = Scrubber(secrets)
            return self._scrubber

    def filter(self, record: logging.LogRecord) -> bool:
        scrubber = self._current()
        if scrubber.secrets:
            scrub_record(record, scrubber)
        return True  # a record is never dropped, only cleaned


_FILTER = _SecretFilter()


def _arguments(args: object) -> Iterator[object]:
    if isinstance(args, Mapping):
        yield from args.values()
    elif isinstance(args, tuple):
        yield from args
    elif args is not None:
        yield args


def _holds_secret(value: object, scrub: Callable[[str], str]) -> bool:
    try:
        texts = {str(value), repr(value)}
    except Exception:  # cannot be shown: not kept either
        return True
    return any(scrub(text) != text for text in texts)


def scrub_record(record: logging.LogRecord, scrub: Callable[[str], str]) -> None:
    """Remove every run of a secret from ``record``, in place (see the module doc)."""
    try:
        message = record.getMessage()
    except Exception:  # a broken format string: logging reports it; keep its parts apart
        message = f"{record.msg!s} {record.args!r}"
    clean = scrub(message)
    if clean != message or any(_holds_secret(a, scrub) for a in _arguments(record.args)):
        record.msg, record.args = clean, ()
    if record.exc_info and record.exc_info[0] is not None:
        text = logging.Formatter().formatException(record.exc_info)
        record.exc_text = scrub(text)
        record.exc_info = None  # the exception object itself (its request) goes no further
    elif record.exc_text:
        record.exc_text = scrub(record.exc_text)
    if record.stack_info:
        record.stack_info = scrub(record.stack_info)


def http_loggers() -> list[logging.Logger]:
    """The loggers of :data:`HTTP_LOGGERS` and every logger that exists below them."""
    prefixes = tuple(f"{name}." for name in HTTP_LOGGERS)
    names = set(HTTP_LOGGERS)
    names.update(n for n in logging.Logger.manager.loggerDict.copy() if n.startswith(prefixes))
    return [logging.getLogger(name) for name in sorted(names)]


def guard(owner: object, secrets: Iterable[str]) -> None:
    """Scrub ``secrets`` from every record of the HTTP library's loggers for as long as
    ``owner`` (a client, held weakly) lives. Call it whenever a connection pool has been
    built: a logger created since the last call gets the filter too (httpcore creates its
    loggers when it is imported, which httpx does when it builds its first transport)."""
    secrets = tuple(s for s in secrets if s)
    if not secrets:
        return
    _FILTER.add(owner, secrets)
    for logger in http_loggers():
        logger.addFilter(_FILTER)  # once: addFilter ignores a filter it already has
