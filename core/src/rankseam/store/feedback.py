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

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from rankseam.errors import ConfigurationError
from rankseam.types import FeedbackRecord, frozen_mapping

__all__ = [
    "DEFAULT_FEEDBACK_CAP",
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


@runtime_checkable
class FeedbackStore(Protocol):
    """A store that keeps feedback records in a table of its own (see the module
    docstring). Every method is one transaction."""

    def write_feedback(self, records: Sequence[FeedbackRecord], /, *, cap: int) -> FeedbackWritten:
        """Store ``records`` (one whose ``feedback_id`` the store holds is left alone), then
        keep each namespace written to within its newest ``cap`` records (by ``created_at``,
        then write order), in ONE write transaction."""
        ...

    def feedback_records(
        self,
        /,
        *,
        namespace: str | None = None,
        since: float | None = None,
        limit: int | None = None,
    ) -> list[FeedbackRecord]:
        """Records of ``namespace`` (None: every namespace) created at or after ``since``
        (POSIX seconds), oldest first (``created_at``, then write order), at most ``limit``
        (None: all)."""
        ...

    def delete_feedback(
        self, /, *, namespace: str | None = None, feedback_ids: Sequence[str] | None = None
    ) -> int:
        """Delete the records ``feedback_ids`` (ids the store does not hold are skipped),
        or every record of ``namespace``, or, both None, every record; how many went."""
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
