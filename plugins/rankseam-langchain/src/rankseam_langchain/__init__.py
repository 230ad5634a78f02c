"""rankseam-langchain: rankseam inside LangChain pipelines.

- :class:`RankseamRetriever` — a LangChain retriever over a rankseam ``Memory``: each hit is a
  ``Document`` whose metadata cites the exact stored revision and carries the rerank trace.
- :class:`RankseamCompressor` — a LangChain document compressor that runs any installed rankseam
  reranker over documents a pipeline already has, through rankseam's rerank seam (the reranker
  answers with positions only; the host validates them and records a trace).

Importing this package does not import LangChain; the classes load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

#: The distribution's version (the one place it is written; pyproject.toml reads it).
__version__ = "0.1.0"

if TYPE_CHECKING:
    from rankseam_langchain.compressor import RankseamCompressor
    from rankseam_langchain.retriever import RankseamRetriever

__all__ = ["RankseamCompressor", "RankseamRetriever", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "RankseamRetriever":
        from rankseam_langchain.retriever import RankseamRetriever

        return RankseamRetriever
    if name == "RankseamCompressor":
        from rankseam_langchain.compressor import RankseamCompressor

        return RankseamCompressor
    raise AttributeError(f"module 'rankseam_langchain' has no attribute {name!r}")
