"""Retrieval metrics over *groups* (docs/benchmarks.md). Pure functions, no I/O.

A ranked list is a sequence of group keys, best first: for LoCoMo the group of a memory is its
source ``dia_id`` (a turn and the observations restating it share one group); for BEIR every
document is its own group. ``relevance`` maps the relevant groups to their gain (``1`` for
LoCoMo evidence, the qrels grade for BEIR); groups with gain ``<= 0`` are not relevant.

Conventions (chosen once, here):

- A group counts once: a later slot holding an already-seen group earns no gain, so duplicates
  never inflate recall, nDCG or MRR. Such a slot is a *duplicate slot*.
- ``k`` larger than the list looks at the whole list; ``k < 1`` is a caller error.
- Empty relevance: recall, nDCG and MRR are ``0.0`` (the benchmark skips such queries; the
  functions still answer, and never divide by zero).
- ``dup_slot_at_k`` divides by the number of slots actually present in the top ``k`` (an empty
  list has no duplicate slots: ``0.0``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from rankseam.checks import is_int

__all__ = [
    "dup_slot_at_k",
    "mean",
    "mrr",
    "ndcg_at_k",
    "percentile",
    "recall_at_k",
]


#: A group key (a ``dia_id``, a document id...).
G = TypeVar("G", bound=Hashable)


def _check_k(k: int) -> None:
    if not is_int(k) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")


def _relevant(relevance: Mapping[G, float]) -> set[G]:
    return {g for g, gain in relevance.items() if gain > 0}


def _first_occurrences(ranked: Sequence[G], k: int) -> list[tuple[int, G]]:
    """(0-based position, group) of each group's first slot within the top ``k``."""
    seen: set[G] = set()
    out = []
    for i, group in enumerate(ranked[:k]):
        if group in seen:
            continue
        seen.add(group)
        out.append((i, group))
    return out


def recall_at_k(ranked: Sequence[G], relevance: Mapping[G, float], k: int) -> float:
    """Share of the relevant groups present in the top ``k``."""
    _check_k(k)
    relevant = _relevant(relevance)
    if not relevant:
        return 0.0
    found = relevant.intersection(ranked[:k])
    return len(found) / len(relevant)


def ndcg_at_k(ranked: Sequence[G], relevance: Mapping[G, float], k: int) -> float:
    """nDCG with linear gains and ``log2(position + 1)`` discount (as trec_eval / BEIR).

    Each group earns its gain at its first slot only. The ideal list holds the relevant groups
    sorted by gain, cut to ``k``.
    """
    _check_k(k)
    gains = sorted((g for g in relevance.values() if g > 0), reverse=True)[:k]
    if not gains:
        return 0.0
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    dcg = 0.0
    for i, group in _first_occurrences(ranked, k):
        gain = relevance.get(group, 0.0)
        if gain > 0:
            dcg += gain / math.log2(i + 2)
    return dcg / ideal


def mrr(ranked: Sequence[G], relevance: Mapping[G, float], k: int | None = None) -> float:
    """Reciprocal of the 1-based position of the first relevant slot (``0.0`` if none).

    ``k`` cuts the list first (``None``: the whole list).
    """
    if k is not None:
        _check_k(k)
        ranked = ranked[:k]
    relevant = _relevant(relevance)
    for i, group in enumerate(ranked):
        if group in relevant:
            return 1.0 / (i + 1)
    return 0.0


def dup_slot_at_k(ranked: Sequence[G], k: int) -> float:
    """Share of the top-``k`` slots whose group already appeared in an earlier slot."""
    _check_k(k)
    top = ranked[:k]
    if not top:
        return 0.0
    unique = len(_first_occurrences(top, k))
    return (len(top) - unique) / len(top)


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; ``0.0`` for no values (a policy with no queries reports zeros)."""
    return math.fsum(values) / len(values) if values else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation, as ``numpy.percentile``."""
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in 0..100, got {q!r}")
    if not values:
        raise ValueError("percentile of no values; time at least one repetition")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return float(ordered[lo])
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))
