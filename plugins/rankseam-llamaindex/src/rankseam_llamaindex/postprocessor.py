"""A LlamaIndex node postprocessor that runs an installed rankseam reranker."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.settings import Settings

from rankseam import DocumentReranker, DocumentResult, open_reranker
from rankseam.errors import ValidationError
from rankseam.plugin.adapters import (
    reranked_items,
    reranker_arguments,
    result_score,
    upstream_scores,
)

__all__ = ["RankseamNodePostprocessor"]


class RankseamNodePostprocessor(BaseNodePostprocessor):
    """Rerank the nodes a pipeline already has with any installed rankseam reranker.

    The nodes go through rankseam's rerank seam: the reranker sees read-only views of their
    text (``MetadataMode.NONE``) and answers with positions only; rankseam validates the
    positions (invalid or repeated ones are discarded and counted), maps them back to *your*
    nodes and records a trace. The result holds copies of the selected nodes, best first, at
    most ``top_n``; the inputs are never modified.

    Scores follow the rule the LangChain compressor follows (docs/integrations.md): when
    every input node has a score, those scores are the coarse relevance the reranker sees;
    otherwise the input order is. Each copy's ``score`` is the score that ordered it: the
    reranker's own when it gave one (as LlamaIndex's rerankers do), else its input score.
    Its metadata gains ``rerank`` — its input position (``coarse_rank``, 1-based), its input
    score as the reranker saw it (``coarse_score``, or ``None``), the reranker's
    ``rerank_score`` (or ``None``) and the seam ``trace`` — kept out of the LLM's view.

    ``use_embeddings``: for rerankers that use vectors (mmr), use the nodes' own
    ``embedding`` instead of embedding their text with the configured embedder.
    ``reranker`` may be a list (a chain: each stage reranks the previous one's selection; a
    stage may be a table ``{"name", "options", "on_error", "deadline_s"}``).
    ``on_error``: ``"fail_closed"`` (default; also ``"raise"``) or ``"fail_open"`` (input
    order, ``degraded``; also ``"coarse"``).
    """

    reranker: Any = Field(
        description="An installed reranker name (`rankseam plugins --options`), an object, "
        "or a list of them (a chain)."
    )
    options: Mapping[str, Any] | None = Field(default=None, description="The reranker's options.")
    top_n: int | None = Field(default=3, description="At most this many nodes are returned.")
    on_error: str | None = Field(
        default=None,
        description='"fail_closed" (default) or "fail_open" (input order, degraded); '
        '"raise" and "coarse" are the earlier spellings.',
    )
    config_file: str | os.PathLike[str] | None = Field(
        default=None, description="A rankseam.toml to read (default: the environment only)."
    )
    use_embeddings: bool = Field(
        default=False, description="Give the reranker the nodes' own embeddings."
    )

    _built: DocumentReranker | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        # Build now: a reranker that is not installed fails here, not in the first query.
        self._built = open_reranker(**reranker_arguments(self))

    @classmethod
    def class_name(cls) -> str:
        return "RankseamNodePostprocessor"

    @classmethod
    def from_defaults(
        cls,
        reranker: Any,
        top_n: int | None = 3,
        options: Mapping[str, Any] | None = None,
        on_error: str | None = None,
        config_file: str | os.PathLike[str] | None = None,
        use_embeddings: bool = False,
        callback_manager: CallbackManager | None = None,
    ) -> RankseamNodePostprocessor:
        """A postprocessor running ``reranker`` with LlamaIndex's defaults: the callback
        manager is ``Settings.callback_manager`` unless one is given."""
        return cls(
            reranker=reranker,
            top_n=top_n,
            options=options,
            on_error=on_error,
            config_file=config_file,
            use_embeddings=use_embeddings,
            callback_manager=callback_manager or Settings.callback_manager,
        )

    @property
    def document_reranker(self) -> DocumentReranker:
        assert self._built is not None
        return self._built

    def _arguments(
        self, nodes: Sequence[NodeWithScore], query_bundle: QueryBundle | None
    ) -> tuple[str, list[str], dict[str, Any]]:
        if query_bundle is None:
            raise ValidationError(
                "RankseamNodePostprocessor needs the query: pass query_str= or query_bundle="
            )
        texts = [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
        kwargs: dict[str, Any] = {"scores": upstream_scores([n.score for n in nodes])}
        if self.use_embeddings:
            missing = [i + 1 for i, n in enumerate(nodes) if n.node.embedding is None]
            if missing:
                raise ValidationError(
                    f"use_embeddings=True but node(s) {missing} have no embedding; embed them "
                    "first or set use_embeddings=False"
                )
            kwargs["vectors"] = [n.node.embedding for n in nodes]
        return query_bundle.query_str, texts, kwargs

    def _select(
        self,
        nodes: Sequence[NodeWithScore],
        result: DocumentResult,
        scores: Sequence[float] | None,
    ) -> list[NodeWithScore]:
        out = []
        for source, rerank in reranked_items(nodes, result, scores):
            node = source.node.model_copy()
            node.metadata = {**source.node.metadata, "rerank": rerank}
            node.excluded_llm_metadata_keys = [*source.node.excluded_llm_metadata_keys, "rerank"]
            node.excluded_embed_metadata_keys = [
                *source.node.excluded_embed_metadata_keys,
                "rerank",
            ]
            score = result_score(source.score, rerank["rerank_score"])
            out.append(NodeWithScore(node=node, score=score))
        return out

    def _event(self, nodes: Sequence[NodeWithScore], query: str) -> Any:
        """The callback event LlamaIndex's rerankers record around a rerank."""
        return self.callback_manager.event(
            CBEventType.RERANKING,
            payload={
                EventPayload.NODES: nodes,
                EventPayload.MODEL_NAME: self.document_reranker.policy_id,
                EventPayload.QUERY_STR: query,
                EventPayload.TOP_K: self.top_n,
            },
        )

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query, texts, kwargs = self._arguments(nodes, query_bundle)
        with self._event(nodes, query) as event:
            result = self.document_reranker.rerank(query, texts, self.top_n, **kwargs)
            out = self._select(nodes, result, kwargs["scores"])
            event.on_end(payload={EventPayload.NODES: out})
        return out

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query, texts, kwargs = self._arguments(nodes, query_bundle)
        with self._event(nodes, query) as event:
            result = await self.document_reranker.arerank(query, texts, self.top_n, **kwargs)
            out = self._select(nodes, result, kwargs["scores"])
            event.on_end(payload={EventPayload.NODES: out})
        return out
