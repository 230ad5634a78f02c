"""Typed errors of rankseam. Every message says what went wrong and how to fix it."""

from __future__ import annotations

from typing import Any

__all__ = [
    "BackendError",
    "BackendTimeoutError",
    "BackendUnavailableError",
    "ConfigurationError",
    "InvalidOutputError",
    "PluginError",
    "RankseamError",
    "RerankError",
    "StoreError",
    "StoreUnavailableError",
    "ValidationError",
    "WriteGateError",
]


class RankseamError(Exception):
    """Base class of every error rankseam raises on purpose."""


class ConfigurationError(RankseamError):
    """The assembly (configuration, plugins, backends) cannot work; raised at start-up."""


class ValidationError(RankseamError, ValueError):
    """A caller passed a value rankseam refuses (empty query, bad limit, NUL bytes, ...)."""


class StoreError(RankseamError):
    """The store cannot be written (or read) for a reason outside the data: the disk is full,
    an I/O error, a server that cannot be reached. ``reason`` is a short machine-readable cause
    (``full``, ``io``, ``unavailable``, ``timeout``). Nothing of the failed write was stored
    (except where :class:`StoreUnavailableError` says ``maybe_committed``)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class StoreUnavailableError(StoreError):
    """The store's server cannot be reached: it is down, restarting, or the network to it is
    gone (``reason="unavailable"``). Raised within the store's connect timeout instead of
    blocking; the same ``Memory`` recovers by itself once the server is back (retry the call,
    nothing needs reopening).

    ``maybe_committed`` is True only for a write whose connection was lost while it committed:
    the server may have stored it or not (read it back, or repeat it: an ingest of the same
    records is idempotent). Otherwise nothing of the failed write was stored."""

    def __init__(self, message: str, *, maybe_committed: bool = False) -> None:
        super().__init__(message, reason="unavailable")
        self.maybe_committed = maybe_committed


class PluginError(RankseamError):
    """A plugin failed to import or to register its components."""


class BackendError(RankseamError):
    """A model backend (decision or generation) failed. Subclasses say how."""

    kind = "backend"

    def __init__(self, message: str, *, usage: Any = None) -> None:
        super().__init__(message)
        #: The cost spent before the failure (a :class:`rankseam.types.Usage`), when known;
        #: the seam counts it in the trace of a degraded search.
        self.usage = usage


class BackendTimeoutError(BackendError):
    """The backend did not answer within its timeout or deadline."""

    kind = "timeout"


class BackendUnavailableError(BackendError):
    """The backend could not be reached or refused the request."""

    kind = "unavailable"


class InvalidOutputError(BackendError):
    """The backend answered, but its output is unparseable or violates the schema."""

    kind = "invalid_output"


class RerankError(RankseamError):
    """The rerank stage failed and the deployment chose to fail closed
    (``on_error="fail_closed"``, also spelt ``"raise"``).

    ``policy_id`` names the reranker, ``reason`` is a short machine-readable cause
    (``timeout``, ``unavailable``, ``invalid_output``, ``degraded_decision``, ``exception``),
    and ``__cause__`` holds the original exception when there is one.
    """

    def __init__(
        self,
        message: str,
        *,
        policy_id: str | None = None,
        reason: str = "exception",
        usage: Any = None,
        stage: int | None = None,
    ) -> None:
        super().__init__(message)
        self.policy_id = policy_id
        self.reason = reason
        #: What the failed rerank spent (a :class:`rankseam.types.Usage`), when known: every
        #: model request the backend made, failed and cancelled ones included (in a reranker
        #: chain, every stage that ran).
        self.usage = usage
        #: The failed stage of a reranker chain (1-based); ``None`` for a single reranker.
        self.stage = stage


class WriteGateError(RankseamError):
    """A fail-closed write gate got no verdict (its backend failed or passed the gate's
    ``timeout_s``), so the memory was **not** stored.

    ``reason`` is the backend error kind (``timeout``, ``unavailable``, ``invalid_output``,
    ``exception``), ``usage`` what the attempt spent, and ``__cause__`` the original error.
    """

    def __init__(self, message: str, *, reason: str = "exception", usage: Any = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.usage = usage
