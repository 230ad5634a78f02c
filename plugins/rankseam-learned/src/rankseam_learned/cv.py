"""Cross-validation that cannot leak, and the paired comparison of two orders over queries.

**Groups.** Two queries whose answers a model could learn from each other must sit in the same
fold, or the cross-validated figures flatter the model. :func:`leak_groups` joins them
(union-find) when they

- belong to the same *thread* (LoCoMo: the same conversation, so that its folds are
  leave-one-conversation-out; a judgements line's ``thread``);
- share a relevant memory in the same store (SciFact: claims citing one abstract), or
- are the same question asked of the same store (a duplicated judgement).

**Folds.** :func:`assign_folds` deals the groups out to at most ``folds`` folds, largest group
first, each to the fold holding the fewest queries so far (ties: the lower fold). Where there
are no more groups than folds, each group is a fold of its own (leave-one-group-out).

**Comparison.** :func:`compare` pairs two per-query scores (the default's and the model's):
the means, wins / losses / ties, the two-sided sign test over the queries that differ, and a
paired bootstrap over queries (the 95 % interval of the mean difference and its two-sided
p-value). docs/plugins/learned.md shows how the training command reports them.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import attrs
import numpy as np

from rankseam_learned.benchdata import sign_test

__all__ = [
    "Comparison",
    "LeakKey",
    "assign_folds",
    "compare",
    "leak_groups",
]


def _keys(values: Iterable[str]) -> frozenset[str]:
    return frozenset(values)


@attrs.frozen
class LeakKey:
    """What the leakage guard reads of one query: the store it is asked of (``collection``),
    its thread (``None``: none), its text and the keys of its relevant memories (their duplicate
    groups)."""

    collection: str
    text: str
    relevant: frozenset[str] = attrs.field(converter=_keys)
    thread: str | None = None


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:  # path compression
            self.parent[i], i = root, self.parent[i]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def leak_groups(keys: Sequence[LeakKey]) -> tuple[int, ...]:
    """The leak group of each query (``0, 1, ...`` in order of first appearance): queries that
    share a thread, a relevant memory of the same store or their text (same store, case and
    spacing ignored) are in one group, and so, transitively, is everything joined to them."""
    found = _UnionFind(len(keys))
    first: dict[Hashable, int] = {}

    def join(key: Hashable, index: int) -> None:
        seen = first.setdefault(key, index)
        if seen != index:
            found.union(seen, index)

    for i, key in enumerate(keys):
        if key.thread is not None:
            join(("thread", key.collection, key.thread), i)
        for relevant in key.relevant:
            join(("relevant", key.collection, relevant), i)
        join(("text", key.collection, " ".join(key.text.casefold().split())), i)
    numbered: dict[int, int] = {}
    return tuple(numbered.setdefault(found.find(i), len(numbered)) for i in range(len(keys)))


def assign_folds(groups: Sequence[int], folds: int = 5) -> tuple[int, ...]:
    """The fold (``0..`` at most ``folds - 1``) of each query, from its leak group: a group is
    never split. ``folds`` must be at least 2, and there must be at least two groups (else
    nothing can be held out)."""
    if folds < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, got {folds}")
    sizes: dict[int, int] = {}
    for group in groups:
        sizes[group] = sizes.get(group, 0) + 1
    if len(sizes) < 2:
        raise ValueError(
            f"cross-validation needs queries of at least two independent groups; these "
            f"{len(groups)} queries form {len(sizes)} (they share a thread or relevant "
            "memories): add judgements of other threads or memories"
        )
    n_folds = min(folds, len(sizes))
    load = [0] * n_folds
    fold_of: dict[int, int] = {}
    for group in sorted(sizes, key=lambda g: (-sizes[g], g)):
        target = min(range(n_folds), key=lambda f: (load[f], f))
        fold_of[group] = target
        load[target] += sizes[group]
    return tuple(fold_of[g] for g in groups)


@attrs.frozen
class Comparison:
    """One metric, the model against the default, paired over the same queries."""

    metric: str
    queries: int
    default: float
    model: float
    wins: int
    losses: int
    ties: int
    sign_p: float
    bootstrap_p: float
    ci_low: float
    ci_high: float

    @property
    def delta(self) -> float:
        return self.model - self.default

    def line(self) -> str:
        """One line a person reads: ``R@5  0.664 -> 0.671 (+0.007, 95% CI ...)``."""
        return (
            f"{self.metric:<8} default {self.default:.3f}  model {self.model:.3f}  "
            f"({self.delta:+.3f}, 95% CI {self.ci_low:+.3f}..{self.ci_high:+.3f}; "
            f"{self.wins} wins / {self.losses} losses, sign test p {self.sign_p:.2g}, "
            f"bootstrap p {self.bootstrap_p:.2g})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "queries": self.queries,
            "default": round(self.default, 6),
            "model": round(self.model, 6),
            "delta": round(self.delta, 6),
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "sign_test_p": float(f"{self.sign_p:.3g}"),
            "bootstrap_p": float(f"{self.bootstrap_p:.3g}"),
            "ci95": [round(self.ci_low, 6), round(self.ci_high, 6)],
        }


def compare(
    metric: str,
    default: Sequence[float],
    model: Sequence[float],
    *,
    resamples: int = 10_000,
    seed: int = 0,
) -> Comparison:
    """The paired comparison of per-query scores (same queries, same order). The bootstrap
    draws the queries with replacement ``resamples`` times (seeded: the same inputs give the
    same figures); its p-value is the share of centred resampled differences at least as far
    from zero as the observed one."""
    a = np.asarray(default, dtype=np.float64)
    b = np.asarray(model, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired scores need equal lengths, got {a.shape} and {b.shape}")
    n = int(a.shape[0])
    diff = b - a
    wins = int(np.sum(diff > 0))
    losses = int(np.sum(diff < 0))
    if n == 0:
        return Comparison(metric, 0, 0.0, 0.0, 0, 0, 0, 1.0, 1.0, 0.0, 0.0)
    observed = float(diff.mean())
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, 1000):  # bounded memory at any query count
        stop = min(start + 1000, resamples)
        draws = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = diff[draws].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    if not np.any(diff):
        p_boot = 1.0
    else:
        p_boot = float(np.mean(np.abs(means - observed) >= abs(observed) - 1e-12))
    return Comparison(
        metric=metric,
        queries=n,
        default=float(a.mean()),
        model=float(b.mean()),
        wins=wins,
        losses=losses,
        ties=n - wins - losses,
        sign_p=sign_test(wins, losses),
        bootstrap_p=p_boot,
        ci_low=float(low),
        ci_high=float(high),
    )
