"""What the framework adapters share (rankseam-langchain, rankseam-llamaindex, rankseam-mcp).

One place for what every adapter does: turn a retriever's settings into the arguments of
``Memory.search`` (its filter among them: :func:`check_filter` checks one in the words of the
framework's own argument), describe each hit in a framework document's metadata (the exact citation,
the scores, the rerank trace, the stored metadata), decide which score a document or node
carries and which upstream scores a reranking component uses, and map a reranked batch of the
caller's own items back to those items by their input positions. Public through
:mod:`rankseam.plugin.adapters` (docs/integrations.md shows what the metadata holds and the score
rule).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from rankseam.checks import is_real
from rankseam.store.filters import parse_where
from rankseam.types import Hit, SearchResult, SearchTrace

__all__ = [
    "ADAPTER_KEYS",
    "FILTER_ARGUMENTS",
    "RerankedBatch",
    "check_filter",
    "hits_metadata",
    "lazy_exports",
    "reranked_items",
    "reranker_arguments",
    "result_score",
    "search_arguments",
    "upstream_scores",
]

#: The metadata keys the adapters write. A memory's stored metadata is merged in flat beside
#: them; a stored key that is one of these is kept as ``stored_<key>`` (prefixed again while
#: that name is taken too), so nothing stored can overwrite the citation or the scores.
ADAPTER_KEYS = (
    "namespace",
    "memory_id",
    "revision",
    "score",
    "coarse_score",
    "rerank_score",
    "matched_by",
    "rerank_trace",
    "rerank",
    "thread",
    "position",
    "derived_from",
)

T = TypeVar("T")


#: The arguments of ``Memory.search`` that say which memories may be answered and how good a
#: hit must be (docs/filters.md): a retriever takes them under these names.
FILTER_ARGUMENTS = ("where", "thread", "since", "until", "min_score")


def search_arguments(
    settings: object | None = None,
    /,
    *,
    namespace: str | None = None,
    reranker: Any = None,
    reranker_options: Mapping[str, Any] | None = None,
    pool: int | None = None,
    on_error: str | None = None,
    where: Mapping[str, Any] | None = None,
    thread: str | None = None,
    since: Any = None,
    until: Any = None,
    min_score: float | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``Memory.search`` / ``asearch`` for a retriever's settings:
    the keywords, or the attributes of the same names of ``settings`` (a retriever object;
    a missing attribute is ``None``) when it is given.

    ``reranker``: ``None`` leaves it out, so the memory's configured default applies;
    ``"none"`` (no reranker), a registered name or a reranker object is passed on as it is
    (the host translates ``"none"``). Empty ``reranker_options`` are left out. The filter
    arguments (:data:`FILTER_ARGUMENTS`: ``where``, ``thread``, ``since``, ``until``,
    ``min_score``) are passed on when set; the search checks them (docs/filters.md).
    """
    filters = {
        "where": where,
        "thread": thread,
        "since": since,
        "until": until,
        "min_score": min_score,
    }
    if settings is not None:
        namespace = getattr(settings, "namespace", None)
        reranker = getattr(settings, "reranker", None)
        reranker_options = getattr(settings, "reranker_options", None)
        pool = getattr(settings, "pool", None)
        on_error = getattr(settings, "on_error", None)
        filters = {name: getattr(settings, name, None) for name in FILTER_ARGUMENTS}
    out: dict[str, Any] = {"namespace": namespace, "pool": pool, "on_error": on_error}
    if reranker is not None:
        out["reranker"] = reranker
    if reranker_options:
        out["reranker_options"] = dict(reranker_options)
    out.update((name, value) for name, value in filters.items() if value is not None)
    return out


def check_filter(value: object, name: str = "where") -> Mapping[str, Any] | None:
    """``value`` checked as ``Memory.search`` checks its ``where`` (docs/filters.md) and
    returned as it is (None for None or an empty mapping): a mistake (not a mapping, an
    unknown operator, a value of the wrong type) is a
    :class:`~rankseam.errors.ValidationError` that names the place in the filter starting
    from ``name``, the word the framework's user wrote (``filter``, ``filters``), when the
    adapter is given the filter rather than when it first searches."""
    if parse_where(value, name=name) is None:
        return None
    assert isinstance(value, Mapping)  # parse_where refuses anything else
    return value


def reranker_arguments(settings: Any) -> dict[str, Any]:
    """The arguments of ``rankseam.open_reranker`` for a framework's reranking component (a
    document compressor, a node postprocessor): its ``reranker``, ``options``,
    ``config_file`` and ``on_error`` attributes. Open it when the component is made,
    ``open_reranker(**reranker_arguments(self))``, so a reranker that is not installed fails
    there, not in the first query."""
    return {
        "reranker": settings.reranker,
        "options": settings.options,
        "config_file": settings.config_file,
        "on_error": settings.on_error,
    }


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports each name of ``where`` (name ->
    module) from its module on first use, so importing the package does not import the
    framework the module needs: ``__getattr__ = lazy_exports(__name__, {...})``."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__


def _trace(trace: SearchTrace) -> dict[str, Any] | None:
    return None if trace.rerank is None else trace.rerank.to_dict()


def result_score(coarse_score: float | None, rerank_score: float | None) -> float | None:
    """The score a document or node carries: the reranker's own score when it gave one (its
    order is the result's order), else the coarse score (no reranker ran, or it chose by
    position alone: mmr, decision, listwise; the order is then the reranker's while the scores
    are the coarse ones)."""
    return coarse_score if rerank_score is None else rerank_score


def upstream_scores(scores: Sequence[object]) -> list[float] | None:
    """The scores a reranking component (the LangChain compressor, the LlamaIndex
    postprocessor) passes to the reranker as its inputs' coarse relevance: each input's own
    score (a LangChain document's ``metadata["score"]``, a LlamaIndex node's ``score``) when
    *every* input has one that is a finite number, else ``None``: the input order is the
    relevance (the first input 1.0, falling evenly). The input order is the coarse order
    either way."""
    values = list(scores)
    if not values or not all(is_real(value) for value in values):
        return None
    return [float(value) for value in values]  # type: ignore[arg-type]


def _stored_key(key: str, taken: Mapping[str, Any]) -> str:
    while key in taken or key in ADAPTER_KEYS:
        key = f"stored_{key}"
    return key


def _hit_metadata(hit: Hit) -> dict[str, Any]:
    ours: dict[str, Any] = {
        "namespace": hit.ref.namespace,
        "memory_id": hit.ref.memory_id,
        "revision": hit.ref.revision,
        "score": result_score(hit.score, hit.rerank_score),
        "coarse_score": hit.score,
        "rerank_score": hit.rerank_score,
        "matched_by": list(hit.matched_by),
        # the memory's place in its conversation (docs/store.md): None when it has none
        "thread": hit.thread,
        "position": hit.position,
        "derived_from": hit.derived_from,
    }
    stored = {key: value for key, value in hit.metadata.items() if key not in ADAPTER_KEYS}
    for key, value in hit.metadata.items():
        if key in ADAPTER_KEYS:
            stored[_stored_key(key, {**hit.metadata, **stored})] = value
    return {**ours, **stored}


def hits_metadata(result: SearchResult, *, with_trace: bool = True) -> list[dict[str, Any]]:
    """One flat metadata dict per hit of a search, in the hits' order: the citation
    (``namespace``, ``memory_id``, ``revision``), ``score`` (:func:`result_score`: the
    reranker's score when it gave one, else the coarse score), ``coarse_score``,
    ``rerank_score`` (the reranker's own, or ``None``), ``matched_by``, the memory's stored
    metadata (each stored key beside ours; one that is in :data:`ADAPTER_KEYS` is kept as
    ``stored_<key>``) and, with ``with_trace``, the rerank stage's trace as ``rerank_trace``
    (``None`` without a reranker)."""
    trace = _trace(result.trace) if with_trace else None
    out = []
    for hit in result.hits:
        metadata = _hit_metadata(hit)
        if with_trace:
            metadata["rerank_trace"] = trace
        out.append(metadata)
    return out


class RerankedBatch(Protocol):
    """A reranked batch of caller-supplied items: what ``DocumentReranker.rerank`` returns."""

    @property
    def hits(self) -> tuple[Hit, ...]: ...

    @property
    def trace(self) -> SearchTrace: ...

    @property
    def positions(self) -> tuple[int, ...]: ...


def reranked_items(
    items: Sequence[T], result: RerankedBatch, scores: Sequence[float] | None = None
) -> list[tuple[T, dict[str, Any]]]:
    """The items the reranker kept, best first, each with what to add to its metadata under
    ``"rerank"``: ``coarse_rank`` (its 1-based input position), ``coarse_score`` (its entry in
    ``scores``, the upstream scores given to the reranker (:func:`upstream_scores`), or
    ``None`` when the input order was the relevance), ``rerank_score`` (or ``None``) and the
    seam's ``trace``. The score the kept item then carries is
    ``result_score(its upstream score, rerank_score)``.

    ``result`` is ``DocumentReranker.rerank(query, texts, scores=scores)`` (or ``arerank``)
    over ``items``' texts, in the same order: items are found by the result's ``positions``,
    never by text.
    """
    positions = getattr(result, "positions", None)
    if positions is None:
        raise TypeError(
            "reranked_items needs the result of DocumentReranker.rerank/arerank (it has "
            f"positions); got {type(result).__name__}"
        )
    if scores is not None and len(scores) != len(items):
        raise ValueError(
            f"scores must hold one number per item ({len(items)}), got {len(scores)}; pass the "
            "scores given to the reranker, or None"
        )
    trace = _trace(result.trace)
    out = []
    for position, hit in zip(positions, result.hits, strict=True):
        if not 0 <= position < len(items):
            raise ValueError(
                f"position {position} is outside the {len(items)} items given; pass the items "
                "whose texts were reranked, in the same order"
            )
        rerank = {
            "coarse_rank": position + 1,
            "coarse_score": None if scores is None else scores[position],
            "rerank_score": hit.rerank_score,
            "trace": trace,
        }
        out.append((items[position], rerank))
    return out
