"""A LangChain document compressor that runs an installed rankseam reranker."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, PrivateAttr

from rankseam import DocumentReranker, DocumentResult, open_reranker
from rankseam.plugin.adapters import (
    reranked_items,
    reranker_arguments,
    result_score,
    upstream_scores,
)

__all__ = ["RankseamCompressor"]


class RankseamCompressor(BaseDocumentCompressor):
    """Rerank the documents a pipeline already has with any installed rankseam reranker.

    The documents go through rankseam's rerank seam: the reranker sees read-only views and
    answers with positions only; rankseam validates the positions (invalid or repeated ones
    are discarded and counted), maps them back to *your* documents and records a trace. The
    returned documents are copies of the selected inputs, best first, at most ``top_n``; the
    inputs are never modified.

    Scores follow the rule the LlamaIndex postprocessor follows (docs/integrations.md): when
    every input document has a numeric ``metadata["score"]`` (a ``RankseamRetriever``'s
    documents do), those scores are the coarse relevance the reranker sees; otherwise the
    input order is. Each copy's metadata gains ``rerank`` — its input position
    (``coarse_rank``, 1-based), the upstream score the reranker saw (``coarse_score``, or
    ``None``), the reranker's ``rerank_score`` (or ``None``) and the whole seam ``trace``
    (policy id, status, selected ranks, discarded count, usage, latency) — and, when the
    reranker gave a score, ``metadata["score"]`` becomes that score.

    ``reranker``: an installed reranker name (``rankseam plugins --options`` lists them), a
    reranker object, or a list of them (a chain; a stage may be a table ``{"name",
    "options", "on_error", "deadline_s"}``);
    ``options``: its options (a single reranker); ``on_error``: ``"fail_closed"`` (default;
    a failing reranker raises ``RerankError``; also spelt ``"raise"``) or ``"fail_open"``
    (the input order, marked ``degraded`` in the trace; also spelt ``"coarse"``).
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

    def _arguments(self, documents: Sequence[Document]) -> dict[str, Any]:
        return {
            "scores": upstream_scores([d.metadata.get("score") for d in documents]),
            "vectors": self._vectors(documents),
        }

    def _select(
        self,
        documents: Sequence[Document],
        result: DocumentResult,
        scores: Sequence[float] | None,
    ) -> list[Document]:
        out = []
        for source, rerank in reranked_items(documents, result, scores):
            metadata = {**source.metadata, "rerank": rerank}
            score = result_score(source.metadata.get("score"), rerank["rerank_score"])
            if score is not None:
                metadata["score"] = score
            out.append(source.model_copy(update={"metadata": metadata}))
        return out

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        docs = list(documents)
        arguments = self._arguments(docs)
        result = self.document_reranker.rerank(
            query, [d.page_content for d in docs], self.top_n, **arguments
        )
        return self._select(docs, result, arguments["scores"])

    async def acompress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        docs = list(documents)
        arguments = self._arguments(docs)
        result = await self.document_reranker.arerank(
            query, [d.page_content for d in docs], self.top_n, **arguments
        )
        return self._select(docs, result, arguments["scores"])
