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
from pydantic import ConfigDict

from rankseam import Memory
from rankseam.plugin.adapters import hits_metadata, search_arguments
from rankseam.types import SearchResult

__all__ = ["RankseamRetriever"]

#: What ``invoke``/``ainvoke`` accept as keyword arguments for one call; each overrides the
#: retriever's attribute of the same name for that call only.
CALL_ARGUMENTS = ("k", "namespace", "reranker", "reranker_options", "pool", "on_error")
#: Keyword arguments LangChain itself passes through ``invoke`` (read by its callbacks).
_LANGCHAIN_ARGUMENTS = frozenset({"verbose"})


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
    do ``namespace``, ``reranker``, ``reranker_options``, ``pool`` and ``on_error``; any other
    keyword is a ``TypeError``. ``reranker``: a registered reranker name (``"mmr"``),
    ``"none"`` for the coarse order, a reranker object, a list of them (a chain: each stage
    reranks the previous one's selection; a stage may be a table ``{"name", "options",
    "on_error", "deadline_s"}``), or ``None`` (the default) for the memory's configured
    default. The caller owns ``memory`` and closes it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Memory
    k: int = 4
    namespace: str | None = None
    reranker: Any = None
    reranker_options: Mapping[str, Any] | None = None
    pool: int | None = None
    on_error: str | None = None
    include_trace: bool = True

    def _search(self, overrides: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """``k`` and the ``Memory.search`` keywords of one call: the retriever's settings,
        overridden by the call's keywords."""
        unknown = sorted(set(overrides) - set(CALL_ARGUMENTS) - _LANGCHAIN_ARGUMENTS)
        if unknown:
            raise TypeError(
                f"RankseamRetriever got unexpected keyword argument(s) {unknown}; a call "
                f"accepts {list(CALL_ARGUMENTS)}"
            )
        settings = {name: overrides.get(name, getattr(self, name)) for name in CALL_ARGUMENTS}
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
