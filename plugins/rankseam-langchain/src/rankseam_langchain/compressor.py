"""A LangChain document compressor that runs an installed rankseam reranker."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, PrivateAttr

from rankseam import DocumentReranker, DocumentResult, open_reranker
from rankseam.plugin import reranked_items, reranker_arguments

__all__ = ["RankseamCompressor"]


class RankseamCompressor(BaseDocumentCompressor):
    """Rerank the documents a pipeline already has with any installed rankseam reranker.

    The documents go through rankseam's rerank seam: the reranker sees read-only views and
    answers with positions only; rankseam validates the positions (invalid or repeated ones
    are discarded and counted), maps them back to *your* documents and records a trace. The
    returned documents are copies of the selected inputs, best first, at most ``top_n``; the
    inputs are never modified. Each copy's metadata gains ``rerank`` — its input position
    (``coarse_rank``, 1-based), the reranker's ``rerank_score`` (or ``None``) and the whole
    seam ``trace`` (policy id, status, selected ranks, discarded count, usage, latency).

    ``reranker``: an installed reranker name (``rankseam plugins --options`` lists them) or a
    reranker object;
    ``options``: its options; ``on_error``: ``"raise"`` (default; a failing reranker raises
    ``RerankError``) or ``"coarse"`` (the input order, marked ``degraded`` in the trace).
    ``use_embeddings``: for rerankers that use vectors (mmr), pass each document's own
    ``metadata["embedding"]`` instead of embedding the texts with the configured embedder.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reranker: Any
    options: Mapping[str, Any] | None = None
    top_n: int | None = 3
    on_error: str | None = None
    config_file: str | os.PathLike[str] | None = None
    use_embeddings: bool = False

    _built: DocumentReranker | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        # Build now: a reranker that is not installed fails here, not in the first query.
        self._built = open_reranker(**reranker_arguments(self))

    @property
    def document_reranker(self) -> DocumentReranker:
        assert self._built is not None
        return self._built

    def _vectors(self, documents: Sequence[Document]) -> list[Any] | None:
        if not self.use_embeddings:
            return None
        missing = [i + 1 for i, d in enumerate(documents) if "embedding" not in d.metadata]
        if missing:
            from rankseam.errors import ValidationError

            raise ValidationError(
                f"use_embeddings=True but document(s) {missing} have no metadata['embedding']; "
                "add one vector per document or set use_embeddings=False"
            )
        return [d.metadata["embedding"] for d in documents]

    def _select(self, documents: Sequence[Document], result: DocumentResult) -> list[Document]:
        return [
            source.model_copy(update={"metadata": {**source.metadata, "rerank": rerank}})
            for source, rerank in reranked_items(documents, result)
        ]

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        docs = list(documents)
        result = self.document_reranker.rerank(
            query, [d.page_content for d in docs], self.top_n, vectors=self._vectors(docs)
        )
        return self._select(docs, result)

    async def acompress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        docs = list(documents)
        result = await self.document_reranker.arerank(
            query, [d.page_content for d in docs], self.top_n, vectors=self._vectors(docs)
        )
        return self._select(docs, result)
