"""A LangChain retriever over a rankseam ``Memory``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, model_validator

from rankseam import Memory
from rankseam.plugin.adapters import check_filter, hits_metadata, search_arguments
from rankseam.types import SearchResult
from rankseam_langchain.arguments import CALL_ARGUMENTS, layered, search_settings

__all__ = ["RankseamRetriever"]


class RankseamRetriever(BaseRetriever):
    """Search a rankseam ``Memory`` from LangChain.

    Each hit becomes a ``Document`` (``id`` = the memory id) whose flat metadata holds
    ``namespace``, ``memory_id``, ``revision`` (the exact stored revision it cites), ``score``
    (the reranker's score when it gave one, else the coarse score), ``coarse_score``,
    ``rerank_score`` (the reranker's own, or ``None``), ``matched_by``, ``rerank_trace`` (the
    seam's trace: policy id, status, selected ranks, usage, latency; ``None`` without a
    reranker) and, beside them, what was stored with the memory (a stored key that is one of
    these is kept as ``stored_<key>``).

    ``k``: how many documents (at most); ``invoke(query, k=1)`` overrides it for one call, as
    do ``namespace``, ``reranker``, ``reranker_options``, ``pool``, ``on_error`` and the
    filter arguments; any other keyword is a ``TypeError``. ``reranker_options`` are the
    options of the reranker set beside them: a call (or ``search_kwargs``) that names a
    ``reranker`` without ``reranker_options`` runs it with none of the retriever's.

    Filters (docs/filters.md): ``where`` (a filter mapping such as ``{"user": "dana"}`` or
    ``{"year": {"$gte": 2025}}``, with ``$and`` / ``$or``), ``thread``, ``since``, ``until``
    and ``min_score``, as ``Memory.search`` takes them, each applied inside the search's
    channels. LangChain's spelling works too: ``search_kwargs={"filter": {...}, "k": 2}`` (a
    vector store retriever's settings: ``filter`` is ``where``, the other keys are the
    attributes above) and ``invoke(query, filter={...})``. A call's keyword overrides
    ``search_kwargs``, which overrides the attribute. An operator or form rankseam does not
    support is a ``rankseam.ValidationError`` naming it, never ignored.

    ``reranker``: a registered reranker name (``"mmr"``), ``"none"`` for the coarse order, a
    reranker object, a list of them (a chain: each stage reranks the previous one's
    selection; a stage may be a table ``{"name", "options", "on_error", "deadline_s"}``), or
    ``None`` (the default) for the memory's configured default. The caller owns ``memory``
    and closes it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Memory
    k: int = 4
    namespace: str | None = None
    reranker: Any = None
    reranker_options: Mapping[str, Any] | None = None
    pool: int | None = None
    on_error: str | None = None
    where: Mapping[str, Any] | None = None
    thread: str | None = None
    since: Any = None
    until: Any = None
    min_score: float | None = None
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    include_trace: bool = True

    @model_validator(mode="after")
    def _check_filters(self) -> RankseamRetriever:
        """A filter mistake, or an unknown ``search_kwargs`` key, fails when the retriever is
        made, not in its first query."""
        check_filter(self.where, "where")
        search_settings(self.search_kwargs, "search_kwargs")
        return self

    def _search(self, overrides: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """``k`` and the ``Memory.search`` keywords of one call: the retriever's settings,
        overridden by ``search_kwargs``, overridden by the call's keywords (a layer's
        ``reranker`` comes with that layer's ``reranker_options`` only: :func:`layered`)."""
        call = search_settings(overrides, "keyword argument(s)")
        configured = search_settings(self.search_kwargs, "search_kwargs")
        own = {name: getattr(self, name) for name in CALL_ARGUMENTS}
        settings = layered(CALL_ARGUMENTS, own, configured, call)
        k = settings.pop("k")
        return k, search_arguments(**settings)

    def _documents(self, result: SearchResult) -> list[Document]:
        metadata = hits_metadata(result, with_trace=self.include_trace)
        return [
            Document(page_content=hit.text, id=hit.ref.memory_id, metadata=meta)
            for hit, meta in zip(result.hits, metadata, strict=True)
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k, arguments = self._search(kwargs)
        return self._documents(self.memory.search(query, k, **arguments))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        k, arguments = self._search(kwargs)
        return self._documents(await self.memory.asearch(query, k, **arguments))
