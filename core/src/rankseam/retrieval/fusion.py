"""Fusion of per-channel ranked lists into one coarse order.

- ``rrf`` (default): Reciprocal Rank Fusion, ``score = sum over channels of 1 / (60 + rank)``.
  Ranks are *competition* ranks of the channel's scores (equal scores share a rank), so a
  channel that cannot tell two memories apart does not order them.
- ``weighted``: ``score = sum of weight[channel] * normalised channel score``; lexical BM25 is
  divided by the best BM25 of the query, vector cosine is clipped to ``[0, 1]``, importance is
  used as is. Default weights: :data:`DEFAULT_WEIGHTS`; a channel without a weight gets 1.

Only memories admitted by an admitting channel enter the result; prior channels only add
score. Ties on the fused score are broken by :meth:`MemoryRef.sort_key` (identity bytes), so
the coarse order is fully deterministic. ``matched_by`` lists the admitting channels that
found a memory, in configuration order; ``channel_scores`` holds every channel's raw score.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

import attrs

from rankseam.types import MemoryRef

__all__ = ["DEFAULT_WEIGHTS", "RRF_K", "ChannelList", "Fused", "competition_ranks", "fuse"]

RRF_K = 60
DEFAULT_WEIGHTS: Mapping[str, float] = {"lexical": 0.6, "vector": 0.3, "importance": 0.1}


def _items(items: Iterable[tuple[int, float]]) -> tuple[tuple[int, float], ...]:
    return tuple(items)


@attrs.frozen
class ChannelList:
    """One channel's ranked list: ``(row_key, score)`` best first; ``admits`` as the source's."""

    name: str
    admits: bool
    items: tuple[tuple[int, float], ...] = attrs.field(converter=_items)


class Fused(NamedTuple):
    key: int
    score: float
    matched_by: tuple[str, ...]
    channel_scores: Mapping[str, float]


def competition_ranks(items: Sequence[tuple[int, float]]) -> dict[int, int]:
    """Rank = 1 + the number of items with a strictly higher score."""
    ordered = sorted(items, key=lambda it: -it[1])
    ranks: dict[int, int] = {}
    prev: float | None = None
    rank = 0
    for i, (key, score) in enumerate(ordered):
        if prev is None or score != prev:
            rank = i + 1
            prev = score
        ranks.setdefault(key, rank)
    return ranks


def _normalise(name: str, items: Sequence[tuple[int, float]]) -> dict[int, float]:
    if name == "vector":
        return {k: min(max(s, 0.0), 1.0) for k, s in items}
    if name == "lexical":
        best = max((s for _k, s in items), default=0.0)
        return {k: (s / best if best > 0 else 0.0) for k, s in items}
    return {k: s for k, s in items}


def fuse(
    channels: Sequence[ChannelList],
    ref_of: Callable[[int], MemoryRef],
    *,
    method: str = "rrf",
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[Fused]:
    """Fuse channel lists into the coarse order (best first), cut to ``limit``. ``ref_of``
    gives the identity of a row key (for the deterministic tie-break)."""
    admitted: dict[int, list[str]] = {}
    for ch in channels:
        if ch.admits:
            for key, _score in ch.items:
                names = admitted.setdefault(key, [])
                if ch.name not in names:
                    names.append(ch.name)
    fused: dict[int, float] = dict.fromkeys(admitted, 0.0)
    raw: dict[int, dict[str, float]] = {k: {} for k in admitted}
    w = {**DEFAULT_WEIGHTS, **(weights or {})}
    for ch in channels:
        items = [(k, s) for k, s in ch.items if k in admitted]
        for k, s in items:
            raw[k].setdefault(ch.name, s)
        if method == "rrf":
            for k, rank in competition_ranks(items).items():
                fused[k] += 1.0 / (RRF_K + rank)
        else:
            weight = float(w.get(ch.name, 1.0))
            for k, s in _normalise(ch.name, items).items():
                fused[k] += weight * s
    order = sorted(fused, key=lambda k: -fused[k])
    # Break ties on the fused score by identity bytes (only tied runs pay for sort keys).
    i = 0
    while i < len(order):
        j = i + 1
        while j < len(order) and fused[order[j]] == fused[order[i]]:
            j += 1
        if j - i > 1:
            order[i:j] = sorted(order[i:j], key=lambda k: ref_of(k).sort_key())
        i = j
    if limit is not None:
        order = order[:limit]
    return [Fused(k, fused[k], tuple(admitted[k]), raw[k]) for k in order]
