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
3. **The comparison**: R@5 and nDCG@10 of the model against the default's (the coarse order),
   paired over the same queries, with a sign test and a paired bootstrap.
4. **The model** fitted on every query, exported to the safe model file format
   (:mod:`rankseam_learned.model`). :attr:`TrainingReport.loses` says whether it loses to the
   default; the command writes it only if it does not (or when forced).

scikit-learn (the ``train`` extra) is imported here only, when a model is fitted.
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
from rankseam_learned.reranker import spread_sources

__all__ = [
    "DEFAULT_PARAMS",
    "Example",
    "Progress",
    "TrainingReport",
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


@attrs.frozen(eq=False)
class Fitted:
    """Fitted scikit-learn classifiers: the ``rerank`` head and, optionally, the ``decision``
    head. :meth:`export` writes them as a model file."""

    rerank: Any
    decision: Any = None

    def export(self, summary: Mapping[str, Any] | None = None) -> bytes:
        """The model file's bytes (:mod:`rankseam_learned.model`), with ``summary``."""
        return model_file.export(self.rerank, FEATURE_SET, summary, decision=self.decision)

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
    estimator = _classifier(params).fit(rows, positive, sample_weight=weights)
    head = None
    if decision:
        head = _classifier(params).fit(rows[:, PAIR_INDEX], positive, sample_weight=weights)
    return Fitted(estimator, head)


def model_order(model: model_file.Model, example: Example, limit: int = 10) -> tuple[str, ...]:
    """The groups of the top ``limit`` of ``example``'s pool as the ``learned`` reranker
    orders it with ``model``: by probability (ties: the coarse order), then the source-aware
    rule."""
    n = len(example.labels)
    if not n:
        return ()
    p = model.predict_proba(example.pool.rows)[:, 1]
    order = spread_sources(np.lexsort((np.arange(n), -p)).tolist(), example.pool.groups)
    return tuple(example.groups[i] for i in order[:limit])


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

    @property
    def loses(self) -> bool:
        """True when the model's cross-validated mean is below the default's on any metric."""
        return any(c.model < c.default for c in self.comparisons)

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


def cross_validate(
    examples: Sequence[Example],
    *,
    folds: int = 5,
    limit: int = 10,
    params: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> tuple[list[tuple[str, ...]], tuple[int, ...], tuple[int, ...]]:
    """Each example's top ``limit`` groups as ranked by a model fitted on the other folds;
    with each example's leak group and fold."""
    groups = leak_groups([e.leak_key() for e in examples])
    fold_of = assign_folds(groups, folds)
    n_folds = max(fold_of) + 1
    ranked: list[tuple[str, ...]] = [() for _ in examples]
    for fold in range(n_folds):
        if progress is not None:
            progress("cross-validation", fold, n_folds)
        train_set = [e for e, f in zip(examples, fold_of, strict=True) if f != fold]
        model = fit(train_set, params=params).model(f"<fold {fold + 1} of {n_folds}>")
        for i, (example, f) in enumerate(zip(examples, fold_of, strict=True)):
            if f == fold:
                ranked[i] = model_order(model, example, limit)
    if progress is not None:
        progress("cross-validation", n_folds, n_folds)
    return ranked, groups, fold_of


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
    ranked, groups, fold_of = cross_validate(
        examples, folds=folds, limit=limit, params=params, progress=progress
    )
    clock["cv_cpu_s"] = time.process_time() - started
    started = time.process_time()
    if progress is not None:
        progress("final model", 0, 1)
    fitted = fit(examples, params=params, decision=True)
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
    )
    return attrs.evolve(report, model_bytes=fitted.export(report.to_dict()))
