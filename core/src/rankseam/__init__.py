"""rankseam: memory search with a governed rerank seam.

Importing rankseam has no side effects and loads nothing heavy: every public name is imported
on first use (``rankseam.Memory`` imports :mod:`rankseam.memory` then), plugins load lazily,
once, on first need. So ``rankseam --version`` imports neither numpy nor attrs nor pluggy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rankseam.version import __version__

if TYPE_CHECKING:
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
        StoreUnavailableError,
        ValidationError,
        WriteGateError,
    )
    from rankseam.hookspecs import hookimpl
    from rankseam.memory import Memory, open_memory
    from rankseam.resolve import find_config
    from rankseam.text_reranker import DocumentReranker, DocumentResult, open_reranker
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
    from rankseam.writing.ingest import AddResult, IngestReport
    from rankseam.writing.reembed import ReembedReport


#: Where each public name lives; imported on first access (PEP 562 ``__getattr__``).
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "BackendError",
            "BackendTimeoutError",
            "BackendUnavailableError",
            "ConfigurationError",
            "InvalidOutputError",
            "PluginError",
            "RankseamError",
            "RerankError",
            "StoreError",
            "StoreUnavailableError",
            "ValidationError",
            "WriteGateError",
        ),
        "rankseam.errors",
    ),
    **dict.fromkeys(
        (
            "Candidate",
            "CandidateRecord",
            "Hit",
            "MemoryRef",
            "RerankDecision",
            "RerankStatus",
            "RerankTrace",
            "SearchResult",
            "SearchTrace",
            "Usage",
        ),
        "rankseam.types",
    ),
    **dict.fromkeys(("AddResult", "IngestReport"), "rankseam.writing.ingest"),
    "ReembedReport": "rankseam.writing.reembed",
    "hookimpl": "rankseam.hookspecs",
    "Memory": "rankseam.memory",
    "open_memory": "rankseam.memory",
    "find_config": "rankseam.resolve",
    "DocumentReranker": "rankseam.text_reranker",
    "DocumentResult": "rankseam.text_reranker",
    "open_reranker": "rankseam.text_reranker",
}

__all__ = [
    "AddResult",
    "BackendError",
    "BackendTimeoutError",
    "BackendUnavailableError",
    "Candidate",
    "CandidateRecord",
    "ConfigurationError",
    "DocumentReranker",
    "DocumentResult",
    "Hit",
    "IngestReport",
    "InvalidOutputError",
    "Memory",
    "MemoryRef",
    "PluginError",
    "RankseamError",
    "ReembedReport",
    "RerankDecision",
    "RerankError",
    "RerankStatus",
    "RerankTrace",
    "SearchResult",
    "SearchTrace",
    "StoreError",
    "StoreUnavailableError",
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
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if not name.startswith("_"):
        # a submodule reached as an attribute (``rankseam.types`` after ``import rankseam``),
        # as when this package imported its submodules eagerly
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'rankseam' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
