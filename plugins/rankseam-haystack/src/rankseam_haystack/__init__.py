"""rankseam-haystack: rankseam inside Haystack pipelines.

- :class:`RankseamDocumentStore` — a Haystack document store over a rankseam memory store
  (count, filter with Haystack's filters, write with a ``DuplicatePolicy``, delete; async
  twins; ``to_dict``/``from_dict``).
- :class:`RankseamRetriever` — a component that searches the store through rankseam's search
  (its channels, fusion and rerank seam) and returns scored documents.
- :class:`RankseamRanker` — a component that runs any installed rankseam reranker (or chain)
  over documents a pipeline already has, through rankseam's rerank seam (the reranker answers
  with positions only; the host validates them and records a trace).

Importing this package does not import Haystack; the classes load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rankseam.plugin.adapters import lazy_exports

#: The distribution's version (the one place it is written; pyproject.toml reads it).
__version__ = "0.1.0"

if TYPE_CHECKING:
    from rankseam_haystack.document_store import RankseamDocumentStore
    from rankseam_haystack.ranker import RankseamRanker
    from rankseam_haystack.retriever import RankseamRetriever

__all__ = ["RankseamDocumentStore", "RankseamRanker", "RankseamRetriever", "__version__"]

__getattr__ = lazy_exports(
    __name__,
    {
        "RankseamDocumentStore": "rankseam_haystack.document_store",
        "RankseamRanker": "rankseam_haystack.ranker",
        "RankseamRetriever": "rankseam_haystack.retriever",
    },
)
