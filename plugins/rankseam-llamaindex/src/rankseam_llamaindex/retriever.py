"""A LlamaIndex retriever over a rankseam ``Memory``."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.settings import Settings
from llama_index.core.vector_stores.types import MetadataFilters

from rankseam import Memory
from rankseam.plugin.adapters import check_filter, hits_metadata, search_arguments
from rankseam.types import SearchResult
from rankseam_llamaindex.filters import where_from_filters

__all__ = ["DEFAULT_SIMILARITY_TOP_K", "TRACE_KEYS", "RankseamRetriever"]

#: How many nodes a retriever returns unless ``similarity_top_k`` says otherwise.
DEFAULT_SIMILARITY_TOP_K = 4

#: Metadata keys kept out of what LlamaIndex sends to an LLM or an embedder (the citation keys
#: ``namespace``, ``memory_id``, ``revision`` and the stored metadata stay in view).
TRACE_KEYS = ["score", "coarse_score", "rerank_score", "matched_by", "rerank_trace"]


class RankseamRetriever(BaseRetriever):
    """Search a rankseam ``Memory`` from LlamaIndex.

    Each hit becomes a ``NodeWithScore`` around a ``TextNode`` (``id_`` = the memory id), in
    the reranker's order. ``node.score`` is the score that ordered the result: the reranker's
    own when it gave one, else the coarse score. The node's metadata is flat: ``namespace``,
    ``memory_id``, ``revision`` (the exact stored revision it cites), ``score`` (as
    ``node.score``), ``coarse_score``, ``rerank_score`` (or ``None``), ``matched_by``,
    ``rerank_trace`` (the seam's trace; ``None`` without a reranker) and, beside them, what
    was stored with the memory (a stored key that is one of these is kept as
    ``stored_<key>``). Score and trace keys (:data:`TRACE_KEYS`) are excluded from the LLM's
    and the embedder's view.

    ``similarity_top_k``: how many nodes (at most; ``k`` is a deprecated alias).
    ``reranker``: a registered name (``"mmr"``), ``"none"`` for the coarse order, a reranker
    object, a list of them (a chain: each stage reranks the previous one's selection; a stage
    may be a table ``{"name", "options", "on_error", "deadline_s"}``), or ``None`` (default)
    for the memory's configured default. The caller owns ``memory`` and closes it.

    Filters (rankseam docs/filters.md), applied inside the search's channels: ``filters``,
    LlamaIndex's ``MetadataFilters`` as a vector index retriever takes them (``==``, ``!=``,
    ``>``, ``>=``, ``<``, ``<=``, ``in``, ``nin``, ``is_empty``; AND, OR, NOT; nested; see
    :mod:`rankseam_llamaindex.filters`), or ``where``, a rankseam filter mapping (give one of
    the two); ``thread``, ``since``, ``until`` and ``min_score`` as ``Memory.search`` takes
    them. An operator with no exact meaning in rankseam's filters (``text_match``,
    ``contains``, ``any``, ``all``, ...) is a ``rankseam.ValidationError`` naming it, raised
    when the retriever is made.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        similarity_top_k: int | None = None,
        namespace: str | None = None,
        reranker: Any = None,
        reranker_options: Mapping[str, Any] | None = None,
        pool: int | None = None,
        on_error: str | None = None,
        include_trace: bool = True,
        callback_manager: CallbackManager | None = None,
        object_map: dict[str, Any] | None = None,
        verbose: bool = False,
        k: int | None = None,
        filters: MetadataFilters | None = None,
        where: Mapping[str, Any] | None = None,
        thread: str | None = None,
        since: Any = None,
        until: Any = None,
        min_score: float | None = None,
    ) -> None:
        if k is not None:
            if similarity_top_k is not None and similarity_top_k != k:
                raise TypeError(
                    f"RankseamRetriever got k={k} and similarity_top_k={similarity_top_k}; "
                    "pass only similarity_top_k (k is its deprecated alias)"
                )
            warnings.warn(
                "RankseamRetriever(k=...) is deprecated; pass similarity_top_k=... "
                "(LlamaIndex's name for it)",
                DeprecationWarning,
                stacklevel=2,
            )
            similarity_top_k = k
        super().__init__(callback_manager=callback_manager, object_map=object_map, verbose=verbose)
        self.memory = memory
        self.similarity_top_k = (
            DEFAULT_SIMILARITY_TOP_K if similarity_top_k is None else similarity_top_k
        )
        self.namespace = namespace
        self.reranker = reranker
        self.reranker_options = reranker_options
        self.pool = pool
        self.on_error = on_error
        self.include_trace = include_trace
        if filters is not None and where is not None:
            raise TypeError(
                "RankseamRetriever got both filters and where; give one (filters is "
                "LlamaIndex's MetadataFilters, where a rankseam filter mapping)"
            )
        where_from_filters(filters)  # a filter rankseam cannot read fails here, not later
        self.filters = filters
        self.where = check_filter(where, "where")
        self.thread = thread
        self.since = since
        self.until = until
        self.min_score = min_score

    @classmethod
    def from_defaults(
        cls,
        memory: Memory,
        similarity_top_k: int = DEFAULT_SIMILARITY_TOP_K,
        *,
        callback_manager: CallbackManager | None = None,
        **settings: Any,
    ) -> RankseamRetriever:
        """A retriever over ``memory`` with LlamaIndex's defaults: the callback manager is
        ``Settings.callback_manager`` unless one is given. Every other keyword (``reranker``,
        ``reranker_options``, ``namespace``, ``pool``, ``on_error``, ``include_trace``,
        ``verbose``, ``filters``, ``where``, ``thread``, ``since``, ``until``, ``min_score``)
        is the constructor's."""
        return cls(
            memory,
            similarity_top_k=similarity_top_k,
            callback_manager=callback_manager or Settings.callback_manager,
            **settings,
        )

    def _nodes(self, result: SearchResult) -> list[NodeWithScore]:
        out = []
        metadata = hits_metadata(result, with_trace=self.include_trace)
        for hit, meta in zip(result.hits, metadata, strict=True):
            node = TextNode(
                text=hit.text,
                id_=hit.ref.memory_id,
                metadata=meta,
                excluded_llm_metadata_keys=list(TRACE_KEYS),
                excluded_embed_metadata_keys=list(TRACE_KEYS),
            )
            out.append(NodeWithScore(node=node, score=meta["score"]))
        return out

    def _arguments(self) -> dict[str, Any]:
        """The ``Memory.search`` keywords: the retriever's settings, ``filters`` as ``where``
        (read at each query, so a retriever whose ``filters`` is set later uses them)."""
        arguments = search_arguments(self)
        if self.filters is not None and self.where is not None:
            raise TypeError("RankseamRetriever has both filters and where; set one of them to None")
        where = where_from_filters(self.filters)
        if where is not None:
            arguments["where"] = where
        return arguments

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self.memory.search(
            query_bundle.query_str, self.similarity_top_k, **self._arguments()
        )
        return self._nodes(result)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await self.memory.asearch(
            query_bundle.query_str, self.similarity_top_k, **self._arguments()
        )
        return self._nodes(result)
