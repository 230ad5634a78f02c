"""rankseam-langchain: rankseam inside LangChain pipelines.

- :class:`RankseamRetriever` — a LangChain retriever over a rankseam ``Memory``: each hit is a
  ``Document`` whose metadata cites the exact stored revision and carries the rerank trace.
- :class:`RankseamVectorStore` — a LangChain ``VectorStore`` over a rankseam ``Memory``: add,
  delete, get by id, similarity and MMR search with filters, sync and async.
- :class:`LangChainEmbedder` — a LangChain ``Embeddings`` as rankseam's embedder (registered as
  the embedder ``langchain``).
- :class:`RankseamCompressor` — a LangChain document compressor that runs any installed rankseam
  reranker over documents a pipeline already has, through rankseam's rerank seam (the reranker
  answers with positions only; the host validates them and records a trace).

Importing this package does not import LangChain; the classes load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rankseam.plugin.adapters import lazy_exports

#: The distribution's version (the one place it is written; pyproject.toml reads it).
__version__ = "0.1.0"

if TYPE_CHECKING:
    from rankseam_langchain.compressor import RankseamCompressor
    from rankseam_langchain.embeddings import LangChainEmbedder
    from rankseam_langchain.retriever import RankseamRetriever
    from rankseam_langchain.vectorstore import RankseamVectorStore

__all__ = [
    "LangChainEmbedder",
    "RankseamCompressor",
    "RankseamRetriever",
    "RankseamVectorStore",
    "__version__",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "LangChainEmbedder": "rankseam_langchain.embeddings",
        "RankseamCompressor": "rankseam_langchain.compressor",
        "RankseamRetriever": "rankseam_langchain.retriever",
        "RankseamVectorStore": "rankseam_langchain.vectorstore",
    },
)
