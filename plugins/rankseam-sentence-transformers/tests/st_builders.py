"""What several test files of this plugin share: the plugin's components built as an assembly
builds them (``rankseam.testing.build_component``), texts to embed, and a small rerank query
and pool."""

from __future__ import annotations

from rankseam.testing import build_component
from rankseam_sentence_transformers import SemanticReranker, SentenceTransformerEmbedder

#: Texts an embedder's tests embed: a sentence, its paraphrase, an unrelated one, the empty
#: text and non-ASCII text.
TEXTS = [
    "Melanie painted a sunrise over the lake last summer.",
    "Last summer Mel made a painting of the sun coming up above a lake.",
    "The quarterly tax filing is due on the fifteenth.",
    "",
    "ünïcødé — 漢字 テスト 🙂",
]

QUERY = "who painted the sunrise over the lake?"
POOL = [
    "The quarterly tax filing is due on the fifteenth.",
    "Our team meeting moved to Thursday afternoon.",
    "Melanie painted a sunrise over the lake last summer.",
    "The cat knocked the plant off the windowsill.",
    "Last summer Mel made a painting of the sun coming up above a lake.",
]


def build_embedder(**options: object) -> SentenceTransformerEmbedder:
    """The ``sentence-transformers`` embedder with ``options``."""
    built = build_component("embedder", "sentence-transformers", options)
    assert isinstance(built, SentenceTransformerEmbedder)
    return built


def build_reranker(**options: object) -> SemanticReranker:
    """The ``semantic`` reranker with ``options``."""
    built = build_component("reranker", "semantic", options)
    assert isinstance(built, SemanticReranker)
    return built
