"""The neighbours of memories in their thread, read from a search's own snapshot and held to
the search's filter: one reading for the context channel (neighbours brought into the coarse
pool: :mod:`rankseam.search.channels.context`) and for the rerank stage (the neighbours a
reranker asks for with ``needs_neighbours``: docs/seam.md, "Neighbours").

A neighbour the search's ``where`` rejects is answered by neither: the filter scopes everything
a search shows, its hits and what a reranker reads beside them. A neighbour keeps its place in
the thread when another one is left out (``offset`` counts the live memories of the thread,
whether they pass or not), so a reranker never takes a memory two turns away for the next one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import attrs

from rankseam.checks import is_int
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.store.contract import Store
from rankseam.store.filters import Filter, matches
from rankseam.store.readers import NeighbourReader, StoreReader
from rankseam.store.records import StoredMemory
from rankseam.types import Neighbour

__all__ = [
    "MAX_NEIGHBOURS",
    "ThreadNeighbours",
    "memory_fields",
    "neighbour_window",
    "read_neighbours",
    "thread_neighbours",
]

#: Most neighbours a reranker may ask for on each side of a candidate.
MAX_NEIGHBOURS = 20


@attrs.frozen
class ThreadNeighbours:
    """The neighbours of some memories (:func:`thread_neighbours`): ``placed`` maps the row key
    of each one that belongs to a thread to its neighbours' ``(offset, row key)`` in thread
    order (``-1`` just before it, ``1`` just after); ``rows``, the neighbours' rows, when they
    were read (asked for, or needed to test the filter)."""

    placed: Mapping[int, tuple[tuple[int, int], ...]]
    rows: Mapping[int, StoredMemory]


def memory_fields(memory: StoredMemory) -> dict[str, Any]:
    """A stored memory's fields, as a filter names them (``rankseam.store.filters.FIELDS``)."""
    return {
        "thread": memory.thread,
        "position": memory.position,
        "derived_from": memory.derived_from,
        "created_at": memory.created_at,
        "importance": memory.importance,
        "memory_id": memory.ref.memory_id,
    }


def thread_neighbours(
    reader: StoreReader,
    keys: Sequence[int],
    before: int,
    after: int,
    *,
    where: Filter | None = None,
    rows: bool = False,
) -> ThreadNeighbours:
    """Up to ``before`` and ``after`` neighbours of each live revision among ``keys`` that
    belongs to a thread, in the snapshot of ``reader`` (a
    :class:`~rankseam.store.readers.NeighbourReader`), less those ``where`` rejects (tested
    on their rows, read in the same snapshot, by the filter's reference meaning). With
    ``rows``, the neighbours' rows are answered too."""
    found = cast(NeighbourReader, reader).neighbours(keys, before, after)
    placed: dict[int, tuple[tuple[int, int], ...]] = {}
    for key, around in found.items():
        earlier = [(-i, k) for i, k in enumerate(reversed(around.before), start=1)][::-1]
        placed[key] = (*earlier, *((i, k) for i, k in enumerate(around.after, start=1)))
    read: Mapping[int, StoredMemory] = {}
    if rows or where is not None:
        wanted = sorted({k for near in placed.values() for _offset, k in near})
        read = reader.memories(wanted) if wanted else {}
        keep = {
            k
            for k, row in read.items()
            if where is None or matches(where, row.metadata, memory_fields(row))
        }
        placed = {key: tuple(p for p in near if p[1] in keep) for key, near in placed.items()}
    return ThreadNeighbours(placed, read)


def _window(value: object, owner: object) -> tuple[int, int]:
    """A reranker's ``needs_neighbours`` as ``(before, after)``: an int ``n`` is ``(n, n)``."""
    pair = (value, value) if is_int(value) else value
    if (
        not isinstance(pair, tuple)
        or len(pair) != 2
        or not all(is_int(n) and 0 <= n <= MAX_NEIGHBOURS for n in pair)
    ):
        raise ValidationError(
            f"reranker {getattr(owner, 'policy_id', type(owner).__name__)!r} declares "
            f"needs_neighbours = {value!r}; declare an integer N (N before and N after each "
            f"candidate) or a pair (BEFORE, AFTER), each 0..{MAX_NEIGHBOURS}"
        )
    return (int(pair[0]), int(pair[1]))  # type: ignore[arg-type]


def neighbour_window(reranker: Any) -> tuple[tuple[int, int] | None, bool]:
    """How many neighbours the reranker (or chain) of a search asks for on each side of a
    candidate (the most any stage asks; None: no stage asks), and whether any stage asks for
    metadata (``needs_metadata``), which the neighbours then carry too."""
    links = getattr(reranker, "links", None)
    components = (
        [reranker.component] if links is None else [link.reranker.component for link in links]
    )
    window: tuple[int, int] | None = None
    metadata = False
    for component in components:
        metadata = metadata or bool(getattr(component, "needs_metadata", False))
        wanted = getattr(component, "needs_neighbours", None)
        if wanted is None or wanted is False:
            continue
        before, after = _window(wanted, component)
        if window is not None:
            before, after = max(before, window[0]), max(after, window[1])
        window = (before, after)
    return window, metadata


def read_neighbours(
    reader: StoreReader,
    store: Store,
    keys: Sequence[int],
    window: tuple[int, int],
    *,
    max_chars: int,
    metadata: bool,
    where: Filter | None = None,
) -> dict[int, tuple[Neighbour, ...]]:
    """The neighbours a reranker asked for, of the revisions ``keys`` (live ones with a
    thread), read in the snapshot of ``reader`` and held to the search's ``where``
    (:func:`thread_neighbours`): row key -> :class:`Neighbour` s in thread order, each text
    cut to ``max_chars``."""
    if not isinstance(reader, NeighbourReader):
        raise ConfigurationError(
            f"the search's reranker asks for neighbours (needs_neighbours) but the "
            f"{store.kind!r} store's reader offers no NeighbourReader; use a store that knows "
            "threads, or a reranker that does not ask for them"
        )
    near = thread_neighbours(reader, keys, *window, where=where, rows=True)
    rows = near.rows
    out: dict[int, tuple[Neighbour, ...]] = {}
    for key in keys:
        out[key] = tuple(
            Neighbour(
                offset=offset,
                ref=rows[k].ref,
                text=rows[k].text[:max_chars],
                thread=rows[k].thread,
                position=rows[k].position,
                derived_from=rows[k].derived_from,
                importance=rows[k].importance,
                created_at=rows[k].created_at,
                metadata=rows[k].metadata if metadata else None,
            )
            for offset, k in near.placed.get(key, ())
            if k in rows
        )
    return out
