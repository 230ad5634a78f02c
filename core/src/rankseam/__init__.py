"""rankseam: memory search with a governed rerank seam.

Importing rankseam has no side effects: plugins load lazily, once, on first need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rankseam.errors import (
    BackendError,
    BackendTimeoutError,
    BackendUnavailableError,
    ConfigurationError,
    InvalidOutputError,
    PluginError,
    RankseamError,
    RerankError,
    StoreError,
    ValidationError,
    WriteGateError,
)
from rankseam.hookspecs import hookimpl
from rankseam.types import (
    Candidate,
    CandidateRecord,
    Hit,
    MemoryRef,
    RerankDecision,
    RerankStatus,
    RerankTrace,
    SearchResult,
    SearchTrace,
    Usage,
)
from rankseam.version import __version__

if TYPE_CHECKING:
    from rankseam.documents import DocumentReranker, DocumentResult, open_reranker
    from rankseam.memory import Memory, open_memory
    from rankseam.resolve import find_config


__all__ = [
    "BackendError",
    "BackendTimeoutError",
    "BackendUnavailableError",
    "Candidate",
    "CandidateRecord",
    "ConfigurationError",
    "DocumentReranker",
    "DocumentResult",
    "Hit",
    "InvalidOutputError",
    "Memory",
    "MemoryRef",
    "PluginError",
    "RankseamError",
    "RerankDecision",
    "RerankError",
    "RerankStatus",
    "RerankTrace",
    "SearchResult",
    "SearchTrace",
    "StoreError",
    "Usage",
    "ValidationError",
    "WriteGateError",
    "__version__",
    "find_config",
    "hookimpl",
    "open_memory",
    "open_reranker",
]


def __getattr__(name: str) -> Any:
    if name in ("open_memory", "Memory"):
        from rankseam import memory

        return getattr(memory, name)
    if name == "find_config":
        from rankseam.resolve import find_config

        return find_config
    if name == "compose":  # the module code has always reached as rankseam.compose
        import rankseam.compose

        return rankseam.compose
    if name in ("open_reranker", "DocumentReranker", "DocumentResult"):
        from rankseam import documents

        return getattr(documents, name)
    raise AttributeError(f"module 'rankseam' has no attribute {name!r}")
