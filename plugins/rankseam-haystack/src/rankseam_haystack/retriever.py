"""A Haystack retriever component over a :class:`RankseamDocumentStore`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from haystack import Document, component
from haystack.document_stores.types import FilterPolicy, apply_filter_policy

from rankseam.plugin.adapters import hits_metadata, search_arguments
from rankseam.types import SearchResult
from rankseam_haystack.components import Serialised, check_top_k
from rankseam_haystack.document_store import RankseamDocumentStore
from rankseam_haystack.documents import document_meta
from rankseam_haystack.filters import where_from_filters

__all__ = ["RankseamRetriever"]


@component
class RankseamRetriever(Serialised):
    """Search a :class:`RankseamDocumentStore` with rankseam's search: its channels (lexical,
    vector over rankseam's own embedder, importance), fusion, and the rerank seam with the
    reranker you choose.

    ``run(query, filters=None, top_k=None)`` returns ``{"documents": [...]}``, best first, at
    most ``top_k`` (default the component's, 10). Each document is the stored one (``id``,
    ``content``, its ``meta``, ``embedding``) with ``score`` the score that ordered it (the
    reranker's own when it gave one, else the coarse score) and, beside its meta, rankseam's
    flat citation and scores: ``namespace``, ``memory_id``, ``revision``, ``score``,
    ``coarse_score``, ``rerank_score``, ``matched_by``, ``thread``, ``position``,
    ``derived_from`` and ``rerank_trace`` (with ``include_trace``; ``None`` without a
    reranker). A stored meta key that is one of these is kept as ``stored_<key>``.

    ``filters`` take Haystack's syntax (rankseam_haystack.filters) and are applied inside
    rankseam's channels, before the pool is cut; ``filter_policy``: ``REPLACE`` (a run's
    filters replace the component's) or ``MERGE`` (both must hold). ``reranker``: a registered
    name (``"mmr"``), ``"none"`` for the coarse order, a list (a chain), or ``None`` for the
    memory's configured default; ``reranker_options``, ``pool`` and ``on_error`` as
    ``Memory.search`` takes them.
    """

    def __init__(
        self,
        document_store: RankseamDocumentStore,
        filters: dict[str, Any] | None = None,
        top_k: int = 10,
        filter_policy: FilterPolicy | str = FilterPolicy.REPLACE,
        reranker: Any = None,
        reranker_options: Mapping[str, Any] | None = None,
        pool: int | None = None,
        on_error: str | None = None,
        include_trace: bool = True,
    ) -> None:
        if not isinstance(document_store, RankseamDocumentStore):
            raise TypeError(
                "document_store must be a RankseamDocumentStore, got "
                f"{type(document_store).__name__}"
            )
        self.document_store = document_store
        where_from_filters(filters)  # a filter rankseam cannot apply fails here, not later
        self.filters = filters
        self.top_k = check_top_k(top_k)
        self.filter_policy = (
            FilterPolicy.from_str(filter_policy)
            if isinstance(filter_policy, str)
            else FilterPolicy(filter_policy)
        )
        self.reranker = reranker
        self.reranker_options = dict(reranker_options) if reranker_options else None
        self.pool = pool
        self.on_error = on_error
        self.include_trace = include_trace

    SETTINGS = (
        "document_store",
        "filters",
        "top_k",
        "filter_policy",
        "reranker",
        "reranker_options",
        "pool",
        "on_error",
        "include_trace",
    )

    def settings(self) -> dict[str, Any]:
        return {**Serialised.settings(self), "filter_policy": self.filter_policy.value}

    def _arguments(self, filters: dict[str, Any] | None, top_k: int | None) -> dict[str, Any]:
        chosen = apply_filter_policy(self.filter_policy, self.filters, filters)
        arguments = search_arguments(
            namespace=self.document_store.namespace,
            reranker=self.reranker,
            reranker_options=self.reranker_options,
            pool=self.pool,
            on_error=self.on_error,
            where=where_from_filters(chosen),
        )
        arguments["limit"] = self.top_k if top_k is None else check_top_k(top_k)
        return arguments

    def _documents(self, result: SearchResult) -> list[Document]:
        out = []
        metadata = hits_metadata(result, with_trace=self.include_trace)
        for hit, flat in zip(result.hits, metadata, strict=True):
            meta, fields = document_meta(flat)
            out.append(
                Document(
                    id=hit.ref.memory_id,
                    content=hit.text,
                    meta=meta,
                    score=meta["score"],
                    **fields,
                )
            )
        return out

    @component.output_types(documents=list[Document])
    def run(
        self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """The stored documents that best answer ``query``, best first."""
        result = self.document_store.memory.search(query, **self._arguments(filters, top_k))
        return {"documents": self._documents(result)}

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """:meth:`run` for async pipelines (rankseam's ``Memory.asearch``)."""
        result = await self.document_store.memory.asearch(query, **self._arguments(filters, top_k))
        return {"documents": self._documents(result)}
