"""What every store's reads outside a search do the same way, written once: streaming rows page
by page by their row key, turning them into typed rows, and the shape of ``Store.stats()``. A
store passes its own dialect's SQL in as a callback (public through :mod:`rankseam.plugin.stores`;
docs/writing-plugins.md, "Writing a store")."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from rankseam.store.records import StoredMemory
from rankseam.store.rows import PendingText

__all__ = ["PageFetch", "memory_pages", "pending_pages", "store_stats"]

#: ``fetch(after)``: the next page of rows whose row key (their first column) is greater than
#: ``after``, in key order; an empty page when there is none. Each call is its own statement:
#: nothing is held open between pages.
PageFetch = Callable[[int], Sequence[Sequence[Any]]]


def _pages(fetch: PageFetch) -> Iterator[Sequence[Sequence[Any]]]:
    after = 0
    while True:
        rows = fetch(after)
        if not rows:
            return
        yield rows
        after = int(rows[-1][0])


def memory_pages(fetch: PageFetch) -> Iterator[StoredMemory]:
    """``Store.iter_memories`` over a store's page query: each row is
    :attr:`StoredMemory.COLUMNS <rankseam.plugin.stores.StoredMemory.COLUMNS>` and the
    memory's ``deleted`` flag
    (:meth:`StoredMemory.from_row <rankseam.plugin.stores.StoredMemory.from_row>`)."""
    for rows in _pages(fetch):
        for row in rows:
            yield StoredMemory.from_row(row)


def pending_pages(fetch: PageFetch) -> Iterator[list[PendingText]]:
    """``Store.iter_missing_vectors`` over a store's page query: each row is a revision's row
    key, namespace and text; one list of :class:`~rankseam.plugin.stores.PendingText` per page."""
    for rows in _pages(fetch):
        yield [PendingText(int(key), namespace, text) for key, namespace, text in rows]


def store_stats(
    details: Mapping[str, Any],
    *,
    memories: Iterable[Sequence[Any]],
    revisions: Iterable[Sequence[Any]],
    vectors: Iterable[Sequence[Any]],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``Store.stats()`` answers, from the counts a store reads in one snapshot:
    ``memories`` rows of (namespace, live memories, deleted memories), ``revisions`` rows of
    (namespace, revisions) and ``vectors`` rows of (space key, vectors of live revisions).

    The result is ``details`` (what the store shows first: its path, schema version,
    tokenizer, size ...), then ``namespaces`` (``{name: {"memories", "deleted",
    "revisions"}}``), ``memories`` (live memories in all namespaces) and ``vectors_by_space``,
    then ``extra``."""
    per_ns: dict[str, dict[str, int]] = {}
    for ns, live, deleted in memories:
        per_ns[ns] = {"memories": int(live), "deleted": int(deleted), "revisions": 0}
    for ns, count in revisions:
        per_ns.setdefault(ns, {"memories": 0, "deleted": 0, "revisions": 0})
        per_ns[ns]["revisions"] = int(count)
    return {
        **details,
        "namespaces": per_ns,
        "memories": sum(v["memories"] for v in per_ns.values()),
        "vectors_by_space": {key: int(n) for key, n in vectors},
        **(extra or {}),
    }
