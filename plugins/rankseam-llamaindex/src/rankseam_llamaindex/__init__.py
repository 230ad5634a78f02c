"""rankseam-llamaindex: rankseam inside LlamaIndex pipelines.

- :class:`RankseamRetriever` — a LlamaIndex retriever over a rankseam ``Memory``: each hit is
  a node whose metadata cites the exact stored revision and carries the rerank trace.
- :class:`RankseamNodePostprocessor` — a node postprocessor that runs any installed rankseam
  reranker over nodes a pipeline already has, through rankseam's rerank seam (the reranker
  answers with positions only; the host validates them and records a trace).

Importing this package does not import LlamaIndex; the classes load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rankseam.plugin.adapters import lazy_exports

#: The distribution's version (the one place it is written; pyproject.toml reads it).
__version__ = "0.1.0"

if TYPE_CHECKING:
    from rankseam_llamaindex.postprocessor import RankseamNodePostprocessor
    from rankseam_llamaindex.retriever import RankseamRetriever

__all__ = ["RankseamNodePostprocessor", "RankseamRetriever", "__version__"]

__getattr__ = lazy_exports(
    __name__,
    {
        "RankseamNodePostprocessor": "rankseam_llamaindex.postprocessor",
        "RankseamRetriever": "rankseam_llamaindex.retriever",
    },
)
