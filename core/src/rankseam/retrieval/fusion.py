"""Fusion of per-channel ranked lists into one coarse order.

Every channel (candidate source) declares what fusion needs to know about its scores in a
:class:`ScoreSpec`: how to bring its raw scores onto ``[0, 1]`` (``scale``) and how much its
vote counts (``weight``). The host names no particular source here; see
:func:`score_spec_of`.

- ``convex`` (default): a convex combination of normalised scores,
  ``score = sum_c w_c * norm_c(s) / sum_c w_c`` over the configured channels, so a hit's
  score lies in ``[0, 1]``: 1 means "the best of its query in every channel". A channel that
  did not return a memory contributes 0 for it. Scales:

  - ``max``: non-negative scores without an upper bound (BM25): divided by the best score of
    the query (theoretical minimum 0), so the channel's best hit gets 1;
  - ``unit``: scores already on ``[0, 1]`` or ``[-1, 1]`` (cosine, importance): clipped to
    ``[0, 1]`` and used as they are, so a weak best match stays weak;
  - ``minmax``: ``(s - min) / (max - min)`` over the channel's list; a list whose scores are
    all equal gets 1 everywhere.

- ``rrf``: Reciprocal Rank Fusion, ``score = sum_c w_c / (60 + rank_c)`` with competition
  ranks (equal scores share a rank, so a channel that cannot tell two memories apart does not
  order them). Its weights are the configured ones only (default 1 each): it ignores the
  sources' declarations, which makes it the equal-vote RRF of earlier versions.

Only memories admitted by an admitting channel enter the result; prior channels only add
score. Ties on the fused score are broken by :meth:`MemoryRef.sort_key` (identity bytes), so
the coarse order is fully deterministic. ``matched_by`` lists the admitting channels that
found a memory, in configuration order; ``channel_scores`` holds every channel's raw score.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import attrs

from rankseam.checks import is_real
from rankseam.embedding import FUSION_SCALES, EmbedderDescriptor
from rankseam.types import MemoryRef

__all__ = [
    "DEFAULT_FUSION",
    "FUSION_METHODS",
    "RRF_K",
    "SCALES",
    "ChannelList",
    "Fused",
    "ScoreSpec",
    "competition_ranks",
    "fuse",
    "score_spec_of",
]

RRF_K = 60
#: Fusion methods a configuration may name (``[search] fusion``).
FUSION_METHODS = ("convex", "rrf")
DEFAULT_FUSION = "convex"
#: How a channel's raw scores map onto [0, 1] (see the module docstring).
SCALES = FUSION_SCALES


def _weight(_inst: object, attr: attrs.Attribute[float], value: float) -> None:
    if not is_real(value) or value < 0:  # no NaN, no infinity
        raise ValueError(f"ScoreSpec.{attr.name} must be a finite number >= 0, got {value!r}")


@attrs.frozen
class ScoreSpec:
    """What fusion needs to know about one channel's scores.

    ``scale`` is ``"max"`` (non-negative, unbounded, e.g. BM25), ``"unit"`` (already on
    [0, 1] or [-1, 1], e.g. cosine) or ``"minmax"`` (anything else); ``weight`` is the
    channel's default weight in the ``convex`` fusion (the lexical channel's is 1; a
    configuration's ``[search] weights`` overrides it).
    """

    scale: str = attrs.field(default="minmax", validator=attrs.validators.in_(SCALES))
    weight: float = attrs.field(default=1.0, converter=float, validator=_weight)


#: The declaration assumed for a source that makes none.
UNDECLARED = ScoreSpec()


def score_spec_of(source: Any, embedder: EmbedderDescriptor | None) -> ScoreSpec:
    """The :class:`ScoreSpec` a candidate source declares for the active embedder.

    A source declares it with a method ``score_spec(embedder) -> ScoreSpec`` (the vector
    channel's weight follows the embedder: see ``EmbedderDescriptor.fusion_weight``); a
    source without one gets ``ScoreSpec()`` (min-max scaled, weight 1).
    """
    declare = getattr(source, "score_spec", None)
    if declare is None:
        return UNDECLARED
    spec = declare(embedder)
    if not isinstance(spec, ScoreSpec):
        raise TypeError(
            f"{type(source).__name__}.score_spec() must return a rankseam ScoreSpec, got {spec!r}"
        )
    return spec


def _items(items: Iterable[tuple[int, float]]) -> tuple[tuple[int, float], ...]:
    return tuple(items)


@attrs.frozen
class ChannelList:
    """One channel's ranked list: ``(row_key, score)`` best first; ``admits`` as the source's;
    ``spec`` as the source declared it."""

    name: str
    admits: bool
    items: tuple[tuple[int, float], ...] = attrs.field(converter=_items)
    spec: ScoreSpec = UNDECLARED


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


def normalise(scale: str, items: Sequence[tuple[int, float]]) -> dict[int, float]:
    """Map one channel's raw scores onto [0, 1] (see :data:`SCALES`)."""
    if not items:
        return {}
    if scale == "unit":
        return {k: min(max(s, 0.0), 1.0) for k, s in items}
    if scale == "max":
        best = max(s for _k, s in items)
        if best <= 0:
            return dict.fromkeys((k for k, _s in items), 0.0)
        return {k: max(s, 0.0) / best for k, s in items}
    low = min(s for _k, s in items)
    high = max(s for _k, s in items)
    if high == low:
        return dict.fromkeys((k for k, _s in items), 1.0)
    return {k: (s - low) / (high - low) for k, s in items}


def fuse(
    channels: Sequence[ChannelList],
    ref_of: Callable[[int], MemoryRef],
    *,
    method: str = DEFAULT_FUSION,
    weights: Mapping[str, float] | None = None,
    scales: Mapping[str, str] | None = None,
    limit: int | None = None,
) -> list[Fused]:
    """Fuse channel lists into the coarse order (best first), cut to ``limit``. ``ref_of``
    gives the identity of a row key (for the deterministic tie-break); ``weights`` and
    ``scales`` (the configuration's) override what the channels declared."""
    if method not in FUSION_METHODS:
        raise ValueError(f"unknown fusion {method!r}; use one of {', '.join(FUSION_METHODS)}")
    admitted: dict[int, list[str]] = {}
    for ch in channels:
        if ch.admits:
            for key, _score in ch.items:
                names = admitted.setdefault(key, [])
                if ch.name not in names:
                    names.append(ch.name)
    fused: dict[int, float] = dict.fromkeys(admitted, 0.0)
    raw: dict[int, dict[str, float]] = {k: {} for k in admitted}
    given = weights or {}
    given_scales = scales or {}
    total = 0.0
    for ch in channels:
        items = [(k, s) for k, s in ch.items if k in admitted]
        for k, s in items:
            raw[k].setdefault(ch.name, s)
        if method == "rrf":
            weight = float(given.get(ch.name, 1.0))
            for k, rank in competition_ranks(items).items():
                fused[k] += weight / (RRF_K + rank)
        else:
            weight = float(given.get(ch.name, ch.spec.weight))
            total += weight
            if weight:
                for k, s in normalise(given_scales.get(ch.name, ch.spec.scale), items).items():
                    fused[k] += weight * s
    if method == "convex" and total > 0:
        fused = {k: v / total for k, v in fused.items()}
    order = sorted(fused, key=lambda k: -fused[k])
    # Break ties on the fused score by identity bytes (only tied runs pay for sort keys, and
    # only those that start within the cut: the order past it is dropped).
    end = len(order) if limit is None else min(limit, len(order))
    i = 0
    while i < end:
        j = i + 1
        while j < len(order) and fused[order[j]] == fused[order[i]]:
            j += 1
        if j - i > 1:
            order[i:j] = sorted(order[i:j], key=lambda k: ref_of(k).sort_key())
        i = j
    if limit is not None:
        order = order[:limit]
    return [Fused(k, fused[k], tuple(admitted[k]), raw[k]) for k in order]
