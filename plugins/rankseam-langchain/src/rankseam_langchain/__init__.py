"""rankseam-langchain: rankseam inside LangChain pipelines.

- :class:`RankseamRetriever` — a LangChain retriever over a rankseam ``Memory``: each hit is a
  ``Document`` whose metadata cites the exact stored revision and carries the rerank trace.
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
    from rankseam_langchain.retriever import RankseamRetriever

__all__ = ["RankseamCompressor", "RankseamRetriever", "__version__"]

__getattr__ = lazy_exports(
    __name__,
    {
        "RankseamCompressor": "rankseam_langchain.compressor",
        "RankseamRetriever": "rankseam_langchain.retriever",
    },
)
