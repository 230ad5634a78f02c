"""The embedder conformance kit against the packaged model."""

from __future__ import annotations

from typing import ClassVar

from rankseam.testing import EmbedderContract, build_component
from rankseam_sentence_transformers import SentenceTransformerEmbedder


class TestSentenceTransformerEmbedderContract(EmbedderContract):
    capabilities: ClassVar[frozenset[str]] = frozenset({"deterministic"})

    def make_embedder(self) -> SentenceTransformerEmbedder:
        built = build_component("embedder", "sentence-transformers")
        assert isinstance(built, SentenceTransformerEmbedder)
        return built
