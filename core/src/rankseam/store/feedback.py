"""The store contract's feedback capability: a table of its own beside the memories that
keeps what applications said about search results (``Memory.feedback``; docs/store.md,
"Feedback").

Feedback is never memory state: no memory, revision, history entry or search reads it, and
a snapshot carries it only when asked (``export_snapshot(..., include_feedback=True)``). It
is bounded: each namespace keeps its newest ``cap`` records, and a write past the bound drops
the oldest (by ``created_at``, then write order) in the same transaction.

A store that keeps feedback implements :class:`FeedbackStore` beside
:class:`~rankseam.store.contract.Store` (an optional capability, as the reader capabilities
are); :func:`feedback_store` is how the host asks for it, with a clear error naming a store
that does not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from rankseam.errors import ConfigurationError
from rankseam.types import FeedbackRecord, frozen_mapping

__all__ = [
    "DEFAULT_FEEDBACK_CAP",
    "FeedbackQuery",
    "FeedbackStore",
    "FeedbackWritten",
    "feedback_store",
]

#: Feedback records each namespace keeps by default (``[feedback] max_records``).
DEFAULT_FEEDBACK_CAP = 10_000


@attrs.frozen
class FeedbackWritten:
    """What :meth:`FeedbackStore.write_feedback` did: ``written`` records stored (a record
    whose id the store already held is left alone and not counted), and ``dropped``, per
    namespace, the oldest records removed to keep it within the cap."""

    written: int = attrs.field(validator=attrs.validators.ge(0))
    dropped: Mapping[str, int] = attrs.field(factory=dict, converter=frozen_mapping)

    def to_dict(self) -> dict[str, Any]:
        return {"written": self.written, "dropped": dict(self.dropped)}


def _optional_ids(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class FeedbackQuery:
    """Which feedback records a read or a delete means: those of ``namespace`` (None: every
    namespace), created at or after ``since`` (POSIX seconds), whose id is one of
    ``feedback_ids`` (None: any id), the oldest ``limit`` of them (None: all), oldest by
    ``created_at``, then write order. ``FeedbackQuery()`` is every record."""

    namespace: str | None = None
    since: float | None = None
    feedback_ids: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_ids)
    limit: int | None = None

    def conditions(
        self, placeholder: str, id_in: str, ids: Callable[[tuple[str, ...]], Any] = list
    ) -> tuple[str, list[Any]]:
        """The query's conditions (``limit`` aside) as one boolean SQL expression over the
        columns ``namespace``, ``created_at`` and ``feedback_id``, and its bound values, in
        a store's dialect: ``placeholder`` is its driver's parameter (``"?"``, ``"%s"``),
        ``id_in`` its test that ``feedback_id`` is in one bound list (``{}`` where the
        placeholder goes) and ``ids`` how that list is bound."""
        parts: list[str] = ["1 = 1"]
        args: list[Any] = []
        if self.namespace is not None:
            parts.append(f"namespace = {placeholder}")
            args.append(self.namespace)
        if self.since is not None:
            parts.append(f"created_at >= {placeholder}")
            args.append(self.since)
        if self.feedback_ids is not None:
            parts.append(id_in.format(placeholder))
            args.append(ids(self.feedback_ids))
        return " AND ".join(parts), args


@runtime_checkable
class FeedbackStore(Protocol):
    """A store that keeps feedback records in a table of its own (see the module
    docstring). Every method is one transaction."""

    def write_feedback(self, records: Sequence[FeedbackRecord], /, *, cap: int) -> FeedbackWritten:
        """Store ``records`` (one whose ``feedback_id`` the store holds is left alone), then
        keep each namespace written to within its newest ``cap`` records (by ``created_at``,
        then write order), in ONE write transaction."""
        ...

    def feedback_records(self, query: FeedbackQuery, /) -> list[FeedbackRecord]:
        """The records ``query`` selects, oldest first (``created_at``, then write order)."""
        ...

    def delete_feedback(self, query: FeedbackQuery, /) -> int:
        """Delete the records ``query`` selects, in one write transaction; how many went."""
        ...


def feedback_store(store: object) -> FeedbackStore:
    """``store`` as a :class:`FeedbackStore`, or a :class:`ConfigurationError` naming it."""
    if isinstance(store, FeedbackStore):
        return store
    kind = getattr(store, "kind", type(store).__name__)
    location = getattr(store, "location", "?")
    raise ConfigurationError(
        f"the {kind!r} store at {location} keeps no feedback (it does not implement "
        "rankseam.plugin.stores.FeedbackStore); record feedback in a store that does (the "
        "embedded SQLite store and rankseam-postgres do), or ask the store's plugin for it"
    )
