"""What the framework adapters share (rankseam-langchain, rankseam-llamaindex, rankseam-mcp).

One place for the three things every adapter does: turn a retriever's settings into the
arguments of ``Memory.search``, describe each hit in a framework document's metadata (the exact
citation, the scores, the rerank trace), and map a reranked batch of the caller's own items back
to those items by their input positions. Public through :mod:`rankseam.plugin`
(docs/integrations.md shows what the metadata holds).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from rankseam.types import Hit, SearchResult, SearchTrace

__all__ = [
    "RerankedBatch",
    "hits_metadata",
    "lazy_exports",
    "reranked_items",
    "reranker_arguments",
    "search_arguments",
]

T = TypeVar("T")


def search_arguments(
    settings: object | None = None,
    /,
    *,
    namespace: str | None = None,
    reranker: Any = None,
    reranker_options: Mapping[str, Any] | None = None,
    pool: int | None = None,
    on_error: str | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``Memory.search`` / ``asearch`` for a retriever's settings:
    the keywords, or the attributes of the same names of ``settings`` (a retriever object;
    a missing attribute is ``None``) when it is given.

    ``reranker``: ``None`` leaves it out, so the memory's configured default applies;
    ``"none"`` (no reranker), a registered name or a reranker object is passed on as it is
    (the host translates ``"none"``). Empty ``reranker_options`` are left out.
    """
    if settings is not None:
        namespace = getattr(settings, "namespace", None)
        reranker = getattr(settings, "reranker", None)
        reranker_options = getattr(settings, "reranker_options", None)
        pool = getattr(settings, "pool", None)
        on_error = getattr(settings, "on_error", None)
    out: dict[str, Any] = {"namespace": namespace, "pool": pool, "on_error": on_error}
    if reranker is not None:
        out["reranker"] = reranker
    if reranker_options:
        out["reranker_options"] = dict(reranker_options)
    return out


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


def _hit_metadata(hit: Hit) -> dict[str, Any]:
    return {
        "namespace": hit.ref.namespace,
        "memory_id": hit.ref.memory_id,
        "revision": hit.ref.revision,
        "score": hit.score,
        "rerank_score": hit.rerank_score,
        "matched_by": list(hit.matched_by),
        "memory_metadata": dict(hit.metadata),
    }


def hits_metadata(result: SearchResult, *, with_trace: bool = True) -> list[dict[str, Any]]:
    """One metadata dict per hit of a search, in the hits' order: the citation (``namespace``,
    ``memory_id``, ``revision``), ``score`` (coarse), ``rerank_score`` (the reranker's own, or
    ``None``), ``matched_by``, the memory's stored metadata under ``memory_metadata`` (so it can
    never overwrite the citation keys) and, with ``with_trace``, the rerank stage's trace as
    ``rerank_trace`` (``None`` without a reranker)."""
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


def reranked_items(items: Sequence[T], result: RerankedBatch) -> list[tuple[T, dict[str, Any]]]:
    """The items the reranker kept, best first, each with what to add to its metadata under
    ``"rerank"``: ``coarse_rank`` (its 1-based input position), ``rerank_score`` (or ``None``)
    and the seam's ``trace``.

    ``result`` is ``DocumentReranker.rerank(query, texts)`` (or ``arerank``) over ``items``'
    texts, in the same order: items are found by the result's ``positions``, never by text.
    """
    positions = getattr(result, "positions", None)
    if positions is None:
        raise TypeError(
            "reranked_items needs the result of DocumentReranker.rerank/arerank (it has "
            f"positions); got {type(result).__name__}"
        )
    trace = _trace(result.trace)
    out = []
    for position, hit in zip(positions, result.hits, strict=True):
        if not 0 <= position < len(items):
            raise ValueError(
                f"position {position} is outside the {len(items)} items given; pass the items "
                "whose texts were reranked, in the same order"
            )
        rerank = {"coarse_rank": position + 1, "rerank_score": hit.rerank_score, "trace": trace}
        out.append((items[position], rerank))
    return out
