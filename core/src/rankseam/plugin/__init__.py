"""The public plugin API: the one module a plugin imports, with :mod:`rankseam.types`,
:mod:`rankseam.errors` and :mod:`rankseam.testing`.

Everything a plugin author needs to write a store, a candidate source, an embedder, a reranker,
a decision backend or a generation backend is here: the hook marker, the register types, the
component Protocols, the store's record types, the option helpers, the numeric checks and the
seam helpers. Names leave
this module only through a deprecation; other ``rankseam.*`` modules are internal and may
change in any release. docs/writing-plugins.md documents each name.
"""

from __future__ import annotations

import warnings
from typing import Any

from rankseam.adapters import (
    ADAPTER_KEYS,
    RerankedBatch,
    hits_metadata,
    lazy_exports,
    reranked_items,
    reranker_arguments,
    result_score,
    search_arguments,
    upstream_scores,
)
from rankseam.checks import is_int, is_real
from rankseam.decision import (
    RERANK_DECISION_KIND,
    RERANK_QUESTION,
    RERANK_ROLE,
    WRITE_GATE_DECISION_KIND,
    WRITE_GATE_QUESTION,
    WRITE_GATE_ROLE,
    DecisionBackend,
    DecisionFailurePolicy,
    DecisionOutcome,
    DecisionRequest,
    DecisionResult,
    Role,
    checked_result,
    rerank_request,
    unwrap,
    write_gate_request,
)
from rankseam.embedding import (
    DEFAULT_FUSION_SCALE,
    DEFAULT_FUSION_WEIGHT,
    Embedder,
    EmbedderDescriptor,
)
from rankseam.generation import (
    GenerationBackend,
    GenerationRequest,
    GenerationResult,
    parse_output,
    thaw,
    validate_output,
)
from rankseam.hookspecs import hookimpl
from rankseam.options import OptionError, option, parse_options, resolve_env_refs
from rankseam.options import check_options as _check_options
from rankseam.registry import (
    AssemblyConfig,
    CandidateSourceRegister,
    DecisionBackendRegister,
    EmbedderRegister,
    FactoryContext,
    GenerationBackendRegister,
    RerankerRegister,
    StoreRegister,
)
from rankseam.seam import (
    DEFAULT_MAX_CHARS,
    MAX_POOL,
    CandidateViews,
    Reranker,
    make_candidates,
    normalize_ranks,
)
from rankseam.search.channels.base import CandidateSource, ScoredKey, SourceRequest
from rankseam.search.fusion import SCALES, ScoreSpec
from rankseam.search.terms import MAX_TERMS, STOPWORDS, query_terms
from rankseam.store.contract import BatchWriter, BulkReader, BulkWriter, Store, StoreReader, Vectors
from rankseam.store.listing import PageFetch, memory_pages, pending_pages, store_stats
from rankseam.store.readers import (
    ConcurrentReader,
    Identities,
    ImportanceReader,
    LexicalQuery,
    LexicalReader,
    ScoredKeys,
    VectorReader,
)
from rankseam.store.records import (
    BatchCounts,
    MemoryNotFoundError,
    MemoryRows,
    PreparedRecord,
    RevisionRow,
    StoredMemory,
    WritePlan,
    plan_write,
)
from rankseam.store.rows import (
    BulkRevision,
    MemoryHead,
    MemoryKey,
    PendingText,
    RevisionDigest,
    SpaceRow,
    StoreCounts,
    VectorItem,
    WriteOrder,
)
from rankseam.store.target import StoreTarget

__all__ = [
    "ADAPTER_KEYS",
    "DEFAULT_FUSION_SCALE",
    "DEFAULT_FUSION_WEIGHT",
    "DEFAULT_MAX_CHARS",
    "MAX_POOL",
    "MAX_TERMS",
    "RERANK_DECISION_KIND",
    "RERANK_QUESTION",
    "RERANK_ROLE",
    "SCALES",
    "STOPWORDS",
    "WRITE_GATE_DECISION_KIND",
    "WRITE_GATE_QUESTION",
    "WRITE_GATE_ROLE",
    "AssemblyConfig",
    "BatchCounts",
    "BatchWriter",
    "BulkReader",
    "BulkRevision",
    "BulkWriter",
    "CandidateSource",
    "CandidateSourceRegister",
    "CandidateViews",
    "ConcurrentReader",
    "DecisionBackend",
    "DecisionBackendRegister",
    "DecisionFailurePolicy",
    "DecisionOutcome",
    "DecisionRequest",
    "DecisionResult",
    "Embedder",
    "EmbedderDescriptor",
    "EmbedderRegister",
    "FactoryContext",
    "GenerationBackend",
    "GenerationBackendRegister",
    "GenerationRequest",
    "GenerationResult",
    "Identities",
    "ImportanceReader",
    "LexicalQuery",
    "LexicalReader",
    "MemoryHead",
    "MemoryKey",
    "MemoryNotFoundError",
    "MemoryRows",
    "OptionError",
    "PageFetch",
    "PendingText",
    "PreparedRecord",
    "RerankedBatch",
    "Reranker",
    "RerankerRegister",
    "RevisionDigest",
    "RevisionRow",
    "Role",
    "ScoreSpec",
    "ScoredKey",
    "ScoredKeys",
    "SourceRequest",
    "SpaceRow",
    "Store",
    "StoreCounts",
    "StoreReader",
    "StoreRegister",
    "StoreTarget",
    "StoredMemory",
    "VectorItem",
    "VectorReader",
    "Vectors",
    "WriteOrder",
    "WritePlan",
    "checked_result",
    "hits_metadata",
    "hookimpl",
    "is_int",
    "is_real",
    "lazy_exports",
    "make_candidates",
    "memory_pages",
    "normalize_ranks",
    "option",
    "parse_options",
    "parse_output",
    "pending_pages",
    "plan_write",
    "query_terms",
    "rerank_request",
    "reranked_items",
    "reranker_arguments",
    "resolve_env_refs",
    "result_score",
    "search_arguments",
    "store_stats",
    "thaw",
    "unwrap",
    "upstream_scores",
    "validate_output",
    "write_gate_request",
]


def __getattr__(name: str) -> Any:
    if name == "FailurePolicy":  # the old name, kept one release for plugins that import it
        warnings.warn(
            "rankseam.plugin.FailurePolicy is deprecated; import DecisionFailurePolicy "
            "(same values). The alias will be removed in a future release",
            DeprecationWarning,
            stacklevel=2,
        )
        return DecisionFailurePolicy
    if name == "check_options":  # options are declared by a class now; kept one release
        warnings.warn(
            "rankseam.plugin.check_options is deprecated; register an options class "
            "(register(name, factory, options=MyOptions), fields made with option(...)) and the "
            "host refuses unknown names and wrong types (docs/writing-plugins.md, 'Options')",
            DeprecationWarning,
            stacklevel=2,
        )
        return _check_options
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
