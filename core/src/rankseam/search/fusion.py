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

A channel of the ``context`` stage answers over the fused pool (:func:`widen`): each key it
answers gets the larger of its fused score and the answered one, and the pool is ordered and
cut again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import attrs
import numpy as np

from rankseam.checks import is_real
from rankseam.embedding import FUSION_SCALES, EmbedderDescriptor
from rankseam.store.readers import ScoredKeys
from rankseam.types import MemoryRef, to_float

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
    "widen",
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
    weight: float = attrs.field(default=1.0, converter=to_float, validator=_weight)


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


def _items(
    items: Iterable[tuple[int, float]],
) -> tuple[tuple[int, float], ...] | ScoredKeys:
    return items if isinstance(items, ScoredKeys) else tuple(items)


@attrs.frozen
class ChannelList:
    """One channel's ranked list: ``(row_key, score)`` best first (a tuple of pairs, or the
    :class:`ScoredKeys` a reader answered, kept as it is); ``admits`` as the source's;
    ``spec`` as the source declared it."""

    name: str
    admits: bool
    items: tuple[tuple[int, float], ...] | ScoredKeys = attrs.field(converter=_items)
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
    ``scales`` (the configuration's) override what the channels declared.

    Lists whose keys are distinct and whose scores are finite (every built-in source's) are
    fused over numpy arrays; any other list takes the per-key path. Both compute every score
    with the same float operations in the same order, so they give the same floats."""
    if method not in FUSION_METHODS:
        raise ValueError(f"unknown fusion {method!r}; use one of {', '.join(FUSION_METHODS)}")
    rule = _Rule(method, weights or {}, scales or {}, limit)
    arrays = _as_arrays(channels)
    fused = None if arrays is None else _fuse_arrays(channels, arrays, ref_of, rule)
    return _fuse_items(channels, ref_of, rule) if fused is None else fused


class _Rule(NamedTuple):
    """How one fusion runs: the method, the configured weights and scales (over what the
    channels declared) and the cut."""

    method: str
    weights: Mapping[str, float]
    scales: Mapping[str, str]
    limit: int | None

    def weight(self, channel: ChannelList) -> float:
        """``channel``'s weight: the configured one, else (``convex``) the declared one or
        (``rrf``) 1."""
        default = 1.0 if self.method == "rrf" else channel.spec.weight
        return float(self.weights.get(channel.name, default))

    def scale(self, channel: ChannelList) -> str:
        """``channel``'s scale in the ``convex`` fusion: the configured one, else the
        declared one."""
        return self.scales.get(channel.name, channel.spec.scale)


#: A channel's list for the array path: its keys and scores as arrays, and ``key -> raw
#: score`` for a list of pairs (None for a reader's arrays, whose raw scores are the array's).
_Arrays = tuple[np.ndarray, np.ndarray, dict[int, float] | None]


def _as_arrays(channels: Sequence[ChannelList]) -> list[_Arrays] | None:
    """Each channel's list for the array path, or None when a list repeats a key, holds a
    key that is not an integer or a score that is not a finite number, or two channels share
    a name (the per-key path's cases)."""
    if len({ch.name for ch in channels}) != len(channels):
        return None
    out: list[_Arrays] = []
    for ch in channels:
        if isinstance(ch.items, ScoredKeys):  # a reader's arrays: no pair to convert
            keys, scores = ch.items.row_keys, ch.items.scores
            if not np.isfinite(scores).all():
                return None
            out.append((keys, scores, None))
            continue
        by_key = dict(ch.items)
        n = len(by_key)
        if n != len(ch.items):
            return None
        try:
            keys = np.fromiter(by_key, dtype=np.int64, count=n)
            scores = np.fromiter(by_key.values(), dtype=np.float64, count=n)
        except (TypeError, ValueError, OverflowError):
            return None
        if not np.isfinite(scores).all() or keys.tolist() != list(by_key):
            return None
        out.append((keys, scores, by_key))
    return out


def _normalised(scale: str, s: np.ndarray) -> np.ndarray:
    """:func:`normalise` over an array of finite scores (the same float operations)."""
    if scale == "unit":
        return np.minimum(np.maximum(s, 0.0), 1.0)
    if scale == "max":
        best = float(s.max())
        if best <= 0:
            return np.zeros_like(s)
        return np.maximum(s, 0.0) / best
    low, high = float(s.min()), float(s.max())
    if high == low:
        return np.ones_like(s)
    return (s - low) / (high - low)


def _fuse_arrays(
    channels: Sequence[ChannelList],
    arrays: list[_Arrays],
    ref_of: Callable[[int], MemoryRef],
    rule: _Rule,
) -> list[Fused] | None:
    """The array path of :func:`fuse`; None when a list repeats a key (the per-key path's
    case)."""
    listed = [keys for ch, (keys, _s, _r) in zip(channels, arrays, strict=True) if ch.admits]
    if not listed or not sum(keys.size for keys in listed):
        return []
    # the admitted keys (sorted), and where each was first listed by an admitting channel
    # (np.unique's steps, without its overhead: a stable sort, then the first of each run)
    every = np.concatenate(listed)
    sorter = every.argsort(kind="stable")
    ordered_keys = every[sorter]
    head = np.empty(ordered_keys.size, dtype=bool)
    head[0] = True
    np.not_equal(ordered_keys[1:], ordered_keys[:-1], out=head[1:])
    admitted, first = ordered_keys[head], sorter[head]
    n = admitted.size
    fused = np.zeros(n, dtype=np.float64)
    raw = np.full((len(channels), n), np.nan)  # each channel's raw score of each key
    total = 0.0
    for c, (ch, (keys, s, _by_key)) in enumerate(zip(channels, arrays, strict=True)):
        pos = np.searchsorted(admitted, keys)
        if not ch.admits and pos.size:  # a prior: the admitted keys of its list only
            pos = np.minimum(pos, n - 1)
            keep = admitted[pos] == keys
            if not keep.all():
                pos, s = pos[keep], s[keep]
        raw[c, pos] = s
        weight = rule.weight(ch)
        if rule.method == "rrf":
            if pos.size:
                # competition rank: 1 + the number of the list's scores strictly above
                ranks = s.size - np.searchsorted(np.sort(s), s, side="right") + 1
                fused[pos] += weight / (RRF_K + ranks)
        else:
            total += weight
            if weight and pos.size:
                fused[pos] += weight * _normalised(rule.scale(ch), s)
    # a list that names each key once has as many raw scores as it is long (they are finite)
    if np.count_nonzero(raw == raw) != sum(keys.size for keys, _s, _r in arrays) and any(
        np.unique(keys).size < keys.size for keys, _s, _r in arrays
    ):
        return None
    if rule.method == "convex" and total > 0:
        fused = fused / total
    # best first; equal scores in the order the admitting channels first listed them
    ranked = np.lexsort((first, -fused))
    ordered, scores = _best(admitted[ranked], fused[ranked], ref_of, rule.limit)
    # each hit's raw scores, channel by channel (NaN: the channel did not list it)
    raws: list[dict[str, float]] = [{} for _ in ordered]
    at = np.searchsorted(admitted, ordered)
    for ch, (_k, _s, by_key), column in zip(channels, arrays, raw[:, at].tolist(), strict=True):
        if by_key is not None:  # a list of pairs: its scores as given
            column = [by_key[k] if v == v else v for k, v in zip(ordered, column, strict=True)]
        name = ch.name
        for listed_by, v in zip(raws, column, strict=True):
            if v == v:
                listed_by[name] = v
    # matched_by: the admitting channels among those that listed the key, in their order
    admitting = {ch.name for ch in channels if ch.admits}
    matched: dict[tuple[str, ...], tuple[str, ...]] = {}
    out = []
    for k, score, listed_by in zip(ordered, scores, raws, strict=True):
        names = tuple(listed_by)
        by = matched.get(names)
        if by is None:
            by = matched[names] = tuple(name for name in names if name in admitting)
        out.append(tuple.__new__(Fused, (k, score, by, listed_by)))
    return out


def _best(
    keys: np.ndarray, values: np.ndarray, ref_of: Callable[[int], MemoryRef], limit: int | None
) -> tuple[list[int], list[float]]:
    """The best ``limit`` of ``keys`` (ordered by score, ``values`` their scores), ties by
    identity (:func:`_break_ties`), with their scores. Only the cut and the rest of a tied
    run that crosses it are read out of the arrays (equal scores stand side by side)."""
    end = keys.size
    if limit is not None and 0 < limit < end:
        end = limit + int(np.count_nonzero(values[limit:] == values[limit - 1]))
    order = _break_ties(keys[:end].tolist(), scores := values[:end].tolist(), ref_of, limit)
    # a tie-break moves keys only within runs of equal scores: the scores stay in place
    return order, scores[: len(order)]


def _break_ties(
    order: list[int], values: list[float], ref_of: Callable[[int], MemoryRef], limit: int | None
) -> list[int]:
    """``order`` (by score, ``values`` its scores) with each run of equal scores that starts
    within the cut sorted by identity bytes, cut to ``limit`` (only tied runs pay for sort
    keys, and only those that start within the cut: the order past it is dropped)."""
    end = len(order) if limit is None else min(limit, len(order))
    i = 0
    while i < end:
        j = i + 1
        while j < len(order) and values[j] == values[i]:
            j += 1
        if j - i > 1:
            order[i:j] = sorted(order[i:j], key=lambda k: ref_of(k).sort_key())
        i = j
    return order if limit is None else order[:limit]


def _fuse_items(
    channels: Sequence[ChannelList], ref_of: Callable[[int], MemoryRef], rule: _Rule
) -> list[Fused]:
    """:func:`fuse` key by key, for lists that repeat a key (its first score is its raw score,
    the last its normalised one) or hold a score that is not a finite number, and channels
    that share a name (the first one's score is the raw score)."""
    admitted: dict[int, list[str]] = {}
    for ch in channels:
        if ch.admits:
            for key, _score in ch.items:
                names = admitted.setdefault(key, [])
                if ch.name not in names:
                    names.append(ch.name)
    fused: dict[int, float] = dict.fromkeys(admitted, 0.0)
    raw: dict[int, dict[str, float]] = {k: {} for k in admitted}
    total = 0.0
    for ch in channels:
        items = [(k, s) for k, s in ch.items if k in admitted]
        for k, s in items:
            raw[k].setdefault(ch.name, s)
        weight = rule.weight(ch)
        if rule.method == "rrf":
            for k, rank in competition_ranks(items).items():
                fused[k] += weight / (RRF_K + rank)
        else:
            total += weight
            if weight:
                for k, s in normalise(rule.scale(ch), items).items():
                    fused[k] += weight * s
    if rule.method == "convex" and total > 0:
        fused = {k: v / total for k, v in fused.items()}
    order = sorted(fused, key=lambda k: -fused[k])
    order = _break_ties(order, [fused[k] for k in order], ref_of, rule.limit)
    return [Fused(k, fused[k], tuple(admitted[k]), raw[k]) for k in order]


def widen(
    pool: Sequence[Fused],
    name: str,
    answered: Iterable[tuple[int, float]],
    ref_of: Callable[[int], MemoryRef | None],
    limit: int,
) -> list[Fused]:
    """``pool`` (fused, best first) with the answer of the context-stage channel ``name``:
    each answered key's score becomes ``max(fused score, answered score)`` (a key outside the
    pool enters with the answered score; a key ``ref_of`` knows no live revision for is
    dropped), ``name`` joins its ``matched_by`` and its raw score its ``channel_scores``; the
    pool is ordered again (best first; equal scores by identity bytes) and cut to ``limit``.
    A key answered twice counts with its best score; an answer that is not a finite number is
    ignored."""
    found: dict[int, float] = {}
    for key, score in answered:
        score = float(score)
        if math.isfinite(score) and score > found.get(key, -math.inf):
            found[key] = score
    if not found:
        return list(pool)
    out: list[Fused] = []
    for f in pool:
        c = found.pop(f.key, None)
        if c is None:
            out.append(f)
        else:
            out.append(
                Fused(f.key, max(f.score, c), (*f.matched_by, name), {**f.channel_scores, name: c})
            )
    refs: dict[int, MemoryRef] = {}
    for key, c in found.items():
        ref = ref_of(key)
        if ref is not None:
            refs[key] = ref
            out.append(Fused(key, c, (name,), {name: c}))
    if not refs and all(f.score == g.score for f, g in zip(pool, out, strict=False)):
        return out[:limit]  # nothing moved: the pool keeps its order
    order = sorted(range(len(out)), key=lambda i: -out[i].score)
    keys = _break_ties(
        [out[i].key for i in order],
        [out[i].score for i in order],
        lambda k: refs[k] if k in refs else _ref(ref_of, k),
        limit,
    )
    by_key = {f.key: f for f in out}
    return [by_key[k] for k in keys]


def _ref(ref_of: Callable[[int], MemoryRef | None], key: int) -> MemoryRef:
    ref = ref_of(key)
    assert ref is not None  # every key of a fused pool has an identity
    return ref
