"""What framework adapters share (an integration whose surface is classes for another
framework: LangChain, LlamaIndex, Haystack, MCP; one may register rankseam components too,
through their roles' modules, as rankseam-langchain registers its ``langchain`` embedder): a
retriever's settings as ``Memory.search`` arguments (a filter checked in
the framework's words), a reranking
component's settings as ``open_reranker`` arguments, the flat metadata each hit carries into a
framework document, the one score rule, mapping a reranked batch back to the caller's items,
and a package ``__getattr__`` that loads the framework's classes on first use.
docs/plugin-api/adapters.md says what each name is for, docs/integrations.md how an adapter
uses them.

The names are defined in the host's internal modules and re-exported here, the one place a
plugin imports them from.
"""

from __future__ import annotations

from rankseam.adapters import (
    FILTER_ARGUMENTS,
    RerankedBatch,
    check_filter,
    hits_metadata,
    lazy_exports,
    reranked_items,
    reranker_arguments,
    result_score,
    search_arguments,
    upstream_scores,
)

__all__ = [
    "FILTER_ARGUMENTS",
    "RerankedBatch",
    "check_filter",
    "hits_metadata",
    "lazy_exports",
    "reranked_items",
    "reranker_arguments",
    "result_score",
    "search_arguments",
    "upstream_scores",
]
