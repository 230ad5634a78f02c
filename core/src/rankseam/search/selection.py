"""Source-aware order of the coarse pool (docs/store.md, "Source-aware selection").

A memory's **source group** is the memory it was derived from (``derived_from``), or itself:
a turn and the facts extracted from it share one group, and so do two facts of one turn. With
``distinct_sources`` (``[search] distinct_sources``, default on; ``search(...,
distinct_sources=False)`` turns it off for one search) a memory goes below the others when a
memory of its group already sits higher: the pool keeps its order among the first memory of
each group, and the repeats follow, in their order. Scores are not changed. It runs on the
pool, before the rerank seam: without a reranker the hits are the first ``limit`` of this
order; a reranker sees the pool in this order (and may order it as it likes).

A store without sources (documents) has one memory per group: the order does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from rankseam.types import Hit

__all__ = ["source_group", "spread_sources"]

T = TypeVar("T")


def source_group(hit: Hit) -> str:
    """The source group of ``hit``: the memory it was derived from, or itself."""
    return hit.derived_from if hit.derived_from is not None else hit.ref.memory_id


def spread_sources(items: Sequence[T], hits: Sequence[Hit]) -> list[T]:
    """``items`` (one per hit of ``hits``, the pool in order) with each memory whose source
    group already appeared higher moved below the first memory of every group, in order."""
    if all(hit.derived_from is None for hit in hits):  # each memory is its own group
        return list(items)
    seen: set[str] = set()
    first: list[T] = []
    repeats: list[T] = []
    for item, hit in zip(items, hits, strict=True):
        group = hit.derived_from if hit.derived_from is not None else hit.ref.memory_id
        if group in seen:
            repeats.append(item)
        else:
            seen.add(group)
            first.append(item)
    return first + repeats if repeats else list(items)
