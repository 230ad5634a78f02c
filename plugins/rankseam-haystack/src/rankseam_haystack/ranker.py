"""A Haystack ranker component that runs an installed rankseam reranker (or chain)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from haystack import Document, component

from rankseam import DocumentReranker, DocumentResult, open_reranker
from rankseam.errors import ValidationError
from rankseam.plugin.adapters import (
    reranked_items,
    reranker_arguments,
    result_score,
    upstream_scores,
)
from rankseam_haystack.components import Serialised, check_top_k

__all__ = ["RankseamRanker"]


@component
class RankseamRanker(Serialised):
    """Rerank the documents a pipeline already has with any installed rankseam reranker, as
    Haystack's rankers do: ``run(query, documents, top_k=None)`` returns ``{"documents":
    [...]}``, best first, at most ``top_k`` (default the component's, 10).

    The documents go through rankseam's rerank seam (``rankseam.open_reranker``): the reranker
    sees read-only views of their ``content`` and answers with positions only; rankseam
    validates them (invalid or repeated ones are discarded and counted), maps them back to
    *your* documents and records a trace. The result holds copies of the selected documents;
    the inputs are never modified.

    Scores follow the adapters' rule (rankseam docs/integrations.md): when every input
    document has a score, those scores are the coarse relevance the reranker sees; otherwise
    the input order is. Each copy's ``score`` is the reranker's own when it gave one, else its
    input score. Its meta gains ``rerank``: its input position (``coarse_rank``, 1-based), its
    input score as the reranker saw it (``coarse_score``, or ``None``), the reranker's
    ``rerank_score`` (or ``None``) and the seam ``trace``.

    ``reranker``: an installed reranker name (``rankseam plugins --options``), a reranker
    object, or a list (a chain: each stage reranks the previous one's selection; a stage may be
    a table ``{"name", "options", "on_error", "deadline_s"}``). ``options``: the reranker's
    options. ``on_error``: ``"fail_closed"`` (default) or ``"fail_open"`` (input order,
    ``degraded``). ``use_embeddings``: rerankers that use vectors (mmr) get the documents' own
    ``embedding`` instead of the configured embedder's vectors of their text. The reranker is
    built when the component is made: one that is not installed fails there.
    """

    def __init__(
        self,
        reranker: Any,
        options: Mapping[str, Any] | None = None,
        top_k: int = 10,
        on_error: str | None = None,
        config_file: str | os.PathLike[str] | None = None,
        use_embeddings: bool = False,
    ) -> None:
        self.reranker = reranker
        self.options = dict(options) if options else None
        self.top_k = check_top_k(top_k)
        self.on_error = on_error
        self.config_file = None if config_file is None else os.fspath(config_file)
        self.use_embeddings = bool(use_embeddings)
        self._built: DocumentReranker = open_reranker(**reranker_arguments(self))

    @property
    def document_reranker(self) -> DocumentReranker:
        """The rankseam reranker this component runs."""
        return self._built

    SETTINGS = ("reranker", "options", "top_k", "on_error", "config_file", "use_embeddings")

    def settings(self) -> dict[str, Any]:
        """The component's settings; a reranker given as an object cannot be written (name
        an installed reranker instead)."""
        stages = self.reranker if isinstance(self.reranker, list | tuple) else [self.reranker]
        for stage in stages:
            if not isinstance(stage, str | Mapping) and stage is not None:
                raise ValidationError(
                    f"RankseamRanker cannot serialise the reranker object {stage!r}; name an "
                    "installed reranker (e.g. 'mmr') or a table {'name': ..., 'options': ...}"
                )
        reranker = list(self.reranker) if isinstance(self.reranker, tuple) else self.reranker
        return {**Serialised.settings(self), "reranker": reranker}

    def _arguments(
        self, documents: Sequence[Document], top_k: int | None
    ) -> tuple[list[str], int, dict[str, Any]]:
        texts = []
        for i, document in enumerate(documents):
            if not isinstance(document, Document):
                raise ValidationError(
                    f"documents[{i}] must be a haystack Document, got {type(document).__name__}"
                )
            if not isinstance(document.content, str):
                raise ValidationError(
                    f"documents[{i}] (id {document.id!r}) has no text content to rerank"
                )
            texts.append(document.content)
        limit = self.top_k if top_k is None else check_top_k(top_k)
        kwargs: dict[str, Any] = {"scores": upstream_scores([d.score for d in documents])}
        if self.use_embeddings:
            missing = [i for i, d in enumerate(documents) if d.embedding is None]
            if missing:
                raise ValidationError(
                    f"use_embeddings=True but documents {missing} have no embedding; embed "
                    "them first (a Haystack document embedder) or set use_embeddings=False"
                )
            kwargs["vectors"] = [d.embedding for d in documents]
        return texts, limit, kwargs

    @staticmethod
    def _select(
        documents: Sequence[Document], result: DocumentResult, scores: Sequence[float] | None
    ) -> list[Document]:
        return [
            dataclasses.replace(
                source,
                meta={**source.meta, "rerank": rerank},
                score=result_score(source.score, rerank["rerank_score"]),
            )
            for source, rerank in reranked_items(documents, result, scores)
        ]

    @component.output_types(documents=list[Document])
    def run(
        self, query: str, documents: list[Document], top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """The best of ``documents`` for ``query``, best first."""
        if not documents:
            return {"documents": []}
        texts, limit, kwargs = self._arguments(documents, top_k)
        result = self._built.rerank(query, texts, limit, **kwargs)
        return {"documents": self._select(documents, result, kwargs["scores"])}

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query: str, documents: list[Document], top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """:meth:`run` for async pipelines."""
        if not documents:
            return {"documents": []}
        texts, limit, kwargs = self._arguments(documents, top_k)
        result = await self._built.arerank(query, texts, limit, **kwargs)
        return {"documents": self._select(documents, result, kwargs["scores"])}
