"""Training the learned reranker: pools from real searches, a fitted model, figures that cannot
leak (docs/plugins/learned.md, "Training").

:func:`train` is the whole of ``rankseam train``:

1. **Pools.** Every judged query is searched once through the real ``Memory.search`` (the
   store's configured search: its channels, the context stage, source-aware order) with a
   :class:`~rankseam_learned.pools.PoolRecorder`, which records the pool's feature rows as the
   ``learned`` reranker computes them and answers the coarse order, so the same search gives
   the default's hits too. A candidate's label is the gain of its source group.
2. **Cross-validation** (:mod:`rankseam_learned.cv`): folds that keep a thread's queries, and
   queries sharing a relevant memory, together; each fold's queries are ranked by a model
   fitted on the others, exported and scored exactly as the reranker scores them.
3. **The model's weight** against the coarse order (:func:`~rankseam_learned.reranker.
   blended_order`), chosen from :data:`WEIGHTS` by the mean of R@5 and nDCG@10 (ties: the
   lower weight, the nearer the default). Inside cross-validation each fold's weight is chosen
   by a second cross-validation over the other folds' queries alone (nested: the held-out fold
   decides nothing), so the figures count the choice too; the final model's weight is chosen
   on every query's held-out probability. Where the model helps (conversations) the weight
   comes out near 1; where it does not (documents), near 0, and the model then ranks as the
   default does instead of below it.
4. **The comparison**: R@5 and nDCG@10 of the model against the default's (the coarse order),
   paired over the same queries, with a sign test and a paired bootstrap.
5. **The model** fitted on every query, exported to the safe model file format
   (:mod:`rankseam_learned.model`) with its weight. :attr:`TrainingReport.loses` says whether
   it loses to the default and :attr:`TrainingReport.adds_nothing` whether its weight is 0;
   the command writes it only if neither (or when forced).

scikit-learn (the ``train`` extra) is imported here only, when a model is fitted. Fitting uses
one thread: scikit-learn's OpenMP threads busy-wait between rounds, which on a loaded machine
cost several times the CPU of the fit itself (the training figures are CPU time).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from rankseam.errors import ConfigurationError
from rankseam_learned import benchdata
from rankseam_learned import model as model_file
from rankseam_learned.cv import Comparison, LeakKey, assign_folds, compare, leak_groups
from rankseam_learned.features import FEATURE_SET, FEATURES, PAIR_INDEX
from rankseam_learned.judgements import JudgedStore, Judgement
from rankseam_learned.pools import PoolRecorder, RecordedPool
from rankseam_learned.reranker import blended_order, spread_sources

__all__ = [
    "DEFAULT_PARAMS",
    "WEIGHTS",
    "CrossValidation",
    "Example",
    "Progress",
    "TrainingReport",
    "choose_weight",
    "cross_validate",
    "fit",
    "model_order",
    "record_pools",
    "train",
]

#: ``(stage, done, total)``: how far a long step has come (the command draws a bar).
Progress = Callable[[str, int, int], None]

#: The gradient-boosted trees' settings (scikit-learn's ``HistGradientBoostingClassifier``).
DEFAULT_PARAMS: Mapping[str, Any] = {
    "max_iter": 200,
    "learning_rate": 0.05,
    "max_leaf_nodes": 15,
    "min_samples_leaf": 40,
    "l2_regularization": 1.0,
    "early_stopping": False,
    "random_state": 0,
}

#: The model weights training chooses from (0: the coarse order; 1: the model's order alone).
WEIGHTS: tuple[float, ...] = tuple(i / 10 for i in range(11))


@attrs.frozen(eq=False)
class Example:
    """One judged query's pool: its recorded rows, the source group of each candidate, each
    candidate's label (the gain of its group, 0 when not relevant) and the groups of the
    default search's hits."""

    store: str
    judgement: Judgement
    pool: RecordedPool
    groups: tuple[str, ...]
    labels: np.ndarray
    default_groups: tuple[str, ...]

    def leak_key(self) -> LeakKey:
        return LeakKey(
            self.store, self.judgement.query, self.judgement.relevance.keys(), self.judgement.thread
        )


def record_pools(
    stores: Sequence[JudgedStore],
    *,
    pool: int = 30,
    limit: int = 10,
    progress: Progress | None = None,
) -> list[Example]:
    """Search every judged query of ``stores`` once and record its pool (each query's pool
    is read once per training run: cross-validation and the final fit reuse it)."""
    total = sum(len(s.judgements) for s in stores)
    done = 0
    out: list[Example] = []
    for store in stores:
        recorder = PoolRecorder()
        for judgement in store.judgements:
            result = store.memory.search(
                judgement.query,
                limit=limit,
                pool=pool,
                namespace=store.namespace,
                reranker=recorder,
                on_error="fail_closed",
                where=judgement.where,
                min_score=judgement.min_score,
            )
            recorded = recorder.pools.pop() if recorder.pools else _empty(judgement.query)
            groups = _groups(store, recorded.memory_ids, recorded.groups)
            hit_groups = tuple(
                (store.group_of or {}).get(h.ref.memory_id)
                or (h.derived_from if h.derived_from is not None else h.ref.memory_id)
                for h in result.hits
            )
            out.append(
                Example(
                    store=store.name,
                    judgement=judgement,
                    pool=recorded,
                    groups=groups,
                    labels=np.array(
                        [judgement.relevance.get(g, 0.0) for g in groups], dtype=np.float64
                    ),
                    default_groups=hit_groups,
                )
            )
            done += 1
            if progress is not None:
                progress("pools", done, total)
    return out


def _empty(query: str) -> RecordedPool:
    return RecordedPool(query, np.zeros((0, len(FEATURES))), (), (), ())


def _groups(
    store: JudgedStore, memory_ids: Sequence[str], recorded: Sequence[str]
) -> tuple[str, ...]:
    if store.group_of is None:
        return tuple(recorded)
    return tuple(store.group_of.get(m, g) for m, g in zip(memory_ids, recorded, strict=True))


def _training_rows(examples: Sequence[Example]) -> tuple[np.ndarray, np.ndarray]:
    rows = [e.pool.rows for e in examples if len(e.labels)]
    labels = [e.labels for e in examples if len(e.labels)]
    if not rows:
        raise ConfigurationError(
            "training needs at least one judged query whose search finds a pool"
        )
    out_rows, out_labels = np.vstack(rows), np.concatenate(labels)
    positive = out_labels > 0
    if positive.all() or not positive.any():
        raise ConfigurationError(
            "training needs pools with relevant and other candidates: of "
            f"{len(out_labels)} pooled candidates {int(positive.sum())} are relevant; judge "
            "queries whose relevant memories the search finds among others"
        )
    return out_rows, out_labels


def _classifier(params: Mapping[str, Any] | None) -> Any:
    try:
        from sklearn.ensemble import HistGradientBoostingClassifier
    except ImportError:  # pragma: no cover - the train extra is missing
        raise ConfigurationError(
            "training needs scikit-learn: pip install 'rankseam-learned[train]'"
        ) from None
    return HistGradientBoostingClassifier(**{**DEFAULT_PARAMS, **(params or {})})


def _one_thread() -> Any:
    """A context in which scikit-learn's fits use one thread (see the module docstring)."""
    from threadpoolctl import threadpool_limits  # scikit-learn's own dependency

    return threadpool_limits(limits=1)


@attrs.frozen(eq=False)
class Fitted:
    """Fitted scikit-learn classifiers: the ``rerank`` head and, optionally, the ``decision``
    head, and the ``rerank`` head's weight against the coarse order. :meth:`export` writes
    them as a model file."""

    rerank: Any
    decision: Any = None
    model_weight: float = 1.0

    def export(self, summary: Mapping[str, Any] | None = None) -> bytes:
        """The model file's bytes (:mod:`rankseam_learned.model`), with ``summary``."""
        return model_file.export(
            self.rerank,
            FEATURE_SET,
            summary,
            decision=self.decision,
            model_weight=self.model_weight,
        )

    def model(self, source: str = "<trained model>") -> model_file.Model:
        """The model as the reranker loads it (exported, then read back)."""
        return model_file.loads(self.export(), source=source)


def fit(
    examples: Sequence[Example],
    *,
    params: Mapping[str, Any] | None = None,
    decision: bool = False,
) -> Fitted:
    """Fit on ``examples``' rows: a relevant candidate is a positive, weighted by its gain.
    With ``decision`` a ``decision`` head is fitted too, on the same rows' pair columns
    (:data:`~rankseam_learned.features.PAIR_FEATURES`: what one decision request carries)."""
    rows, labels = _training_rows(examples)
    positive = (labels > 0).astype(np.int64)
    weights = np.where(labels > 0, labels, 1.0)
    with _one_thread():
        estimator = _classifier(params).fit(rows, positive, sample_weight=weights)
        head = None
        if decision:
            head = _classifier(params).fit(rows[:, PAIR_INDEX], positive, sample_weight=weights)
    return Fitted(estimator, head)


def _ordered(example: Example, p: np.ndarray, weight: float, limit: int) -> tuple[str, ...]:
    """The groups of the top ``limit`` of ``example``'s pool ordered as the ``learned``
    reranker orders it from the probabilities ``p`` at ``weight``: blended with the coarse
    order, then the source-aware rule."""
    if not len(p):
        return ()
    order = spread_sources(blended_order(p, weight, model_file.RANK_CONSTANT), example.pool.groups)
    return tuple(example.groups[i] for i in order[:limit])


def model_order(model: model_file.Model, example: Example, limit: int = 10) -> tuple[str, ...]:
    """The groups of the top ``limit`` of ``example``'s pool as the ``learned`` reranker
    orders it with ``model`` (its probabilities, blended with the coarse order at the model's
    weight, then the source-aware rule)."""
    if not len(example.labels):
        return ()
    p = model.predict_proba(example.pool.rows)[:, 1]
    return _ordered(example, p, model.model_weight, limit)


def choose_weight(
    examples: Sequence[Example], probabilities: Sequence[np.ndarray], limit: int = 10
) -> float:
    """The weight of :data:`WEIGHTS` whose order of ``examples`` (by their held-out
    ``probabilities``) has the best mean of the headline metrics over the headline queries
    (all queries where none is headline); ties: the lower weight."""
    chosen = [i for i, e in enumerate(examples) if e.judgement.headline] or list(
        range(len(examples))
    )
    best, best_value = WEIGHTS[0], -1.0
    for weight in WEIGHTS:
        ranked = [_ordered(examples[i], probabilities[i], weight, limit) for i in chosen]
        scores = _scores([examples[i] for i in chosen], ranked)
        value = float(np.mean([np.mean(v) for v in scores.values()])) if chosen else 0.0
        if value > best_value + 1e-12:
            best, best_value = weight, value
    return best


@attrs.frozen
class TrainingReport:
    """What a training run found: the cross-validated comparisons (headline queries), the
    same for the queries off the headline (LoCoMo's category 5), the folds, the model fitted
    on every query, and its figures on the training queries themselves (``dev``)."""

    source: str
    queries: int
    headline_queries: int
    folds: int
    groups: int
    comparisons: tuple[Comparison, ...]
    off_headline: tuple[Comparison, ...]
    dev: Mapping[str, float]
    seconds: Mapping[str, float]
    counts: Mapping[str, int] = attrs.field(factory=dict)
    #: The model file fitted on every query (its summary is this report's :meth:`to_dict`).
    model_bytes: bytes = b""
    #: The final model's weight against the coarse order, and each fold's (nested choice).
    model_weight: float = 1.0
    fold_weights: tuple[float, ...] = ()

    @property
    def loses(self) -> bool:
        """True when the model's cross-validated mean is below the default's on any metric."""
        return any(c.model < c.default for c in self.comparisons)

    @property
    def adds_nothing(self) -> bool:
        """True when the chosen weight is 0: the model would rank as the default does."""
        return self.model_weight == 0.0

    def lines(self) -> list[str]:
        """The report as a person reads it."""
        out = [
            f"trained on {self.source}: {self.queries} queries ({self.headline_queries} "
            f"headline), {self.groups} leak-proof groups in {self.folds} folds, feature set "
            f"{FEATURE_SET}",
            "cross-validated, each query ranked by a model that never saw its fold:",
        ]
        out += [f"  {c.line()}" for c in self.comparisons]
        if self.off_headline:
            out.append("off the headline (reported alone):")
            out += [f"  {c.line()}" for c in self.off_headline]
        dev = ", ".join(f"{k} {v:.3f}" for k, v in self.dev.items())
        folds = ", ".join(f"{w:g}" for w in self.fold_weights)
        out.append(
            f"the model's weight against the coarse order: {self.model_weight:g} (0: the "
            f"default's order, 1: the model's alone; the folds chose {folds})"
        )
        out.append(f"the model fitted on every query, on those queries: {dev}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "feature_set": FEATURE_SET,
            "queries": self.queries,
            "headline_queries": self.headline_queries,
            "folds": self.folds,
            "groups": self.groups,
            "cross_validated": {c.metric: c.to_dict() for c in self.comparisons},
            "off_headline": {c.metric: c.to_dict() for c in self.off_headline},
            "dev": {k: round(v, 6) for k, v in self.dev.items()},
            "model_weight": self.model_weight,
            "fold_model_weights": list(self.fold_weights),
            "loses_to_default": self.loses,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "counts": dict(self.counts),
        }


def _scores(examples: Sequence[Example], ranked: Sequence[Sequence[str]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {m: [] for m in benchdata.METRICS}
    for example, groups in zip(examples, ranked, strict=True):
        for metric, value in benchdata.score(groups, example.judgement.relevance).items():
            out[metric].append(value)
    return out


def _comparisons(
    examples: Sequence[Example], default: Sequence[Sequence[str]], model: Sequence[Sequence[str]]
) -> tuple[Comparison, ...]:
    if not examples:
        return ()
    base = _scores(examples, default)
    mine = _scores(examples, model)
    return tuple(compare(m, base[m], mine[m]) for m in benchdata.METRICS)


@attrs.frozen(eq=False)
class CrossValidation:
    """What :func:`cross_validate` found: each example's top groups as ranked by a model that
    never saw its fold (at that fold's nested weight), its held-out probabilities, its leak
    group and fold, and each fold's weight."""

    ranked: list[tuple[str, ...]]
    probabilities: list[np.ndarray]
    groups: tuple[int, ...]
    fold_of: tuple[int, ...]
    weights: tuple[float, ...]


def _held_out(
    examples: Sequence[Example],
    fold_of: Sequence[int],
    params: Mapping[str, Any] | None,
    tick: Callable[[], None],
) -> list[np.ndarray]:
    """Each example's probabilities from a model fitted on the other folds (a model per
    fold, exported and read back as the reranker reads it)."""
    out: list[np.ndarray] = [np.zeros(0) for _ in examples]
    n_folds = max(fold_of) + 1
    for fold in range(n_folds):
        train_set = [e for e, f in zip(examples, fold_of, strict=True) if f != fold]
        model = fit(train_set, params=params).model(f"<fold {fold + 1} of {n_folds}>")
        tick()
        for i, (example, f) in enumerate(zip(examples, fold_of, strict=True)):
            if f == fold and len(example.labels):
                out[i] = model.predict_proba(example.pool.rows)[:, 1]
    return out


def cross_validate(
    examples: Sequence[Example],
    *,
    folds: int = 5,
    limit: int = 10,
    params: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> CrossValidation:
    """Nested cross-validation (see the module docstring): for each fold, the weight chosen by
    a cross-validation of the other folds' queries alone, and the fold's queries ranked by a
    model fitted on those queries at that weight. A fold whose other queries form a single
    leak group cannot choose: its weight is 1 (the model's order alone)."""
    groups = leak_groups([e.leak_key() for e in examples])
    fold_of = assign_folds(groups, folds)
    n_folds = max(fold_of) + 1
    plans: list[tuple[list[Example], tuple[int, ...] | None]] = []
    for fold in range(n_folds):
        train_set = [e for e, f in zip(examples, fold_of, strict=True) if f != fold]
        inner_groups = leak_groups([e.leak_key() for e in train_set])
        inner = assign_folds(inner_groups, folds) if len(set(inner_groups)) > 1 else None
        plans.append((train_set, inner))
    total = sum(1 + (max(inner) + 1 if inner is not None else 0) for _, inner in plans)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress("cross-validation", done, total)

    if progress is not None:
        progress("cross-validation", 0, total)
    weights: list[float] = []
    for train_set, inner in plans:
        if inner is None:
            weights.append(1.0)
        else:
            held_out = _held_out(train_set, inner, params, tick)
            weights.append(choose_weight(train_set, held_out, limit))
    probabilities = _held_out(examples, fold_of, params, tick)
    ranked = [
        _ordered(example, probabilities[i], weights[fold_of[i]], limit)
        for i, example in enumerate(examples)
    ]
    return CrossValidation(ranked, probabilities, groups, fold_of, tuple(weights))


def train(
    stores: Sequence[JudgedStore],
    *,
    source: str,
    folds: int = 5,
    pool: int = 30,
    limit: int = 10,
    params: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    examples: Sequence[Example] | None = None,
) -> TrainingReport:
    """Record the pools of ``stores``' judgements (or use ``examples``), cross-validate, and
    fit the model on every query: see the module docstring."""
    clock: dict[str, float] = {}
    started = time.process_time()
    if examples is None:
        examples = record_pools(stores, pool=pool, limit=limit, progress=progress)
    recorded = len(examples)
    examples = [e for e in examples if len(e.labels)]
    clock["pools_cpu_s"] = time.process_time() - started
    started = time.process_time()
    cv = cross_validate(examples, folds=folds, limit=limit, params=params, progress=progress)
    ranked, groups, fold_of = cv.ranked, cv.groups, cv.fold_of
    weight = choose_weight(examples, cv.probabilities, limit)
    clock["cv_cpu_s"] = time.process_time() - started
    started = time.process_time()
    if progress is not None:
        progress("final model", 0, 1)
    fitted = attrs.evolve(fit(examples, params=params, decision=True), model_weight=weight)
    if progress is not None:
        progress("final model", 1, 1)
    model = fitted.model()
    clock["fit_cpu_s"] = time.process_time() - started
    head = [i for i, e in enumerate(examples) if e.judgement.headline]
    rest = [i for i, e in enumerate(examples) if not e.judgement.headline]

    def pick(indices: Sequence[int]) -> tuple[Comparison, ...]:
        return _comparisons(
            [examples[i] for i in indices],
            [examples[i].default_groups for i in indices],
            [ranked[i] for i in indices],
        )

    head_examples = [examples[i] for i in head]
    dev_scores = _scores(head_examples, [model_order(model, e, limit) for e in head_examples])
    report = TrainingReport(
        source=source,
        queries=len(examples),
        headline_queries=len(head),
        folds=max(fold_of) + 1,
        groups=max(groups) + 1,
        comparisons=pick(head),
        off_headline=pick(rest),
        dev={k: float(np.mean(v)) if v else 0.0 for k, v in dev_scores.items()},
        seconds=clock,
        counts={
            "dropped_relevant_ids": sum(s.dropped_ids for s in stores),
            "skipped_queries": sum(s.skipped_queries for s in stores),
            "queries_without_pool": recorded - len(examples),
        },
        model_weight=weight,
        fold_weights=cv.weights,
    )
    return attrs.evolve(report, model_bytes=fitted.export(report.to_dict()))
