"""The public plugin API: the modules a plugin imports, with :mod:`rankseam.types`,
:mod:`rankseam.errors` and :mod:`rankseam.testing`.

This top level holds what every plugin needs, whatever it adds: the hook marker, the register
types (the ``register`` argument of each hook), the factory context, the options helpers and
the numeric check. What one kind of component needs is in the module of its role:

- :mod:`rankseam.plugin.stores`: a store backend (the store contract, reader protocols, typed
  rows and records, listing helpers, the store target);
- :mod:`rankseam.plugin.channels`: a candidate source (a retrieval channel) and what fusion
  needs to know about its scores;
- :mod:`rankseam.plugin.embedders`: an embedder and the descriptor of its vector space;
- :mod:`rankseam.plugin.rerankers`: a reranker and the seam's helpers;
- :mod:`rankseam.plugin.decision`: a decision backend, and a component that asks one;
- :mod:`rankseam.plugin.generation`: a generation backend, and a component that asks one;
- :mod:`rankseam.plugin.adapters`: a framework adapter (LangChain, LlamaIndex, MCP).

Names leave these modules only through a deprecation; other ``rankseam.*`` modules are
internal and may change in any release. docs/plugin-api/ documents each name, one page per
module. A name that 0.1 exported here and that now lives in a role module (or left the plugin
API) still imports from here for one release, with a :class:`DeprecationWarning` that names
its new home.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from rankseam.checks import is_int
from rankseam.hookspecs import hookimpl
from rankseam.options import OptionError, option, parse_options
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

__all__ = [
    "AssemblyConfig",
    "CandidateSourceRegister",
    "DecisionBackendRegister",
    "EmbedderRegister",
    "FactoryContext",
    "GenerationBackendRegister",
    "OptionError",
    "RerankerRegister",
    "StoreRegister",
    "hookimpl",
    "is_int",
    "option",
    "parse_options",
]

#: The role modules, each imported on first use.
_ROLE_MODULES = (
    "adapters",
    "channels",
    "decision",
    "embedders",
    "generation",
    "rerankers",
    "stores",
)

#: 0.1's names of this module that moved to a role module: name -> that module. Imported from
#: here they still work for one release, with a DeprecationWarning naming the new home.
_MOVED = {
    **dict.fromkeys(
        (
            "BatchWriter BulkReader BulkRevision BulkWriter ConcurrentReader Identities "
            "ImportanceReader LexicalQuery LexicalReader MemoryHead MemoryKey "
            "MemoryNotFoundError MemoryRows PageFetch PendingText PreparedRecord "
            "RevisionDigest RevisionRow ScoredKeys SpaceRow Store StoreCounts StoreReader "
            "StoreTarget StoredMemory VectorItem VectorReader Vectors WriteOrder WritePlan "
            "memory_pages pending_pages store_stats"
        ).split(),
        "stores",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_FUSION_SCALE DEFAULT_FUSION_WEIGHT MAX_TERMS STOPWORDS CandidateSource "
            "ScoreSpec ScoredKey SourceRequest query_terms"
        ).split(),
        "channels",
    ),
    **dict.fromkeys(("Embedder", "EmbedderDescriptor"), "embedders"),
    **dict.fromkeys(
        (
            "DEFAULT_MAX_CHARS MAX_POOL CandidateViews Reranker make_candidates normalize_ranks"
        ).split(),
        "rerankers",
    ),
    **dict.fromkeys(
        (
            "RERANK_DECISION_KIND RERANK_QUESTION RERANK_ROLE WRITE_GATE_ROLE DecisionBackend "
            "DecisionFailurePolicy DecisionOutcome DecisionRequest DecisionResult Role "
            "checked_result rerank_request unwrap write_gate_request"
        ).split(),
        "decision",
    ),
    **dict.fromkeys(
        (
            "GenerationBackend GenerationRequest GenerationResult parse_output thaw validate_output"
        ).split(),
        "generation",
    ),
    **dict.fromkeys(
        (
            "RerankedBatch hits_metadata lazy_exports reranked_items reranker_arguments "
            "result_score search_arguments upstream_scores"
        ).split(),
        "adapters",
    ),
}

#: Names that left the plugin API (no plugin used them): name -> (the internal module that
#: still holds it, what to do instead). They still import from here for one release.
_LEFT = {
    "ADAPTER_KEYS": (
        "rankseam.adapters",
        "hits_metadata reserves these keys itself (docs/integrations.md lists them)",
    ),
    "BatchCounts": (
        "rankseam.store.records",
        "the host counts a batch's changes; a store's BatchWriter only applies WritePlans",
    ),
    "SCALES": (
        "rankseam.search.fusion",
        "the scales are 'max', 'unit' and 'minmax'; ScoreSpec refuses any other",
    ),
    "WRITE_GATE_DECISION_KIND": (
        "rankseam.decision",
        "compare a request's kind with write_gate_request('').kind "
        "(rankseam.plugin.decision.write_gate_request)",
    ),
    "WRITE_GATE_QUESTION": (
        "rankseam.decision",
        "write_gate_request(text) builds the whole request "
        "(rankseam.plugin.decision.write_gate_request)",
    ),
    "is_real": (
        "rankseam.checks",
        "test isinstance(value, int | float) and not isinstance(value, bool) and "
        "math.isfinite(value)",
    ),
    "plan_write": (
        "rankseam.store.records",
        "the host plans every write; a store's BatchWriter only applies the WritePlans it is given",
    ),
    "resolve_env_refs": (
        "rankseam.options",
        'declare the option with option(..., env=True) and the host reads {"$env": "NAME"}',
    ),
}


def __getattr__(name: str) -> Any:
    if name in _ROLE_MODULES:  # `import rankseam.plugin` then `rankseam.plugin.stores.Store`
        return importlib.import_module(f"{__name__}.{name}")
    role = _MOVED.get(name)
    if role is not None:
        warnings.warn(
            f"rankseam.plugin.{name} moved to rankseam.plugin.{role}.{name}: import it from "
            f"there (from rankseam.plugin.{role} import {name}); the old import will be removed "
            "in a future release (docs/plugin-api/index.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(f"{__name__}.{role}"), name)
    if name in _LEFT:
        home, instead = _LEFT[name]
        warnings.warn(
            f"rankseam.plugin.{name} is no longer part of the plugin API (it stays internal, in "
            f"{home}, and may change in any release); {instead}. The old import will be removed "
            "in a future release (docs/plugin-api/index.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)
    if name == "FailurePolicy":  # the old name, kept one release for plugins that import it
        warnings.warn(
            "rankseam.plugin.FailurePolicy is deprecated; import DecisionFailurePolicy from "
            "rankseam.plugin.decision (same values). The alias will be removed in a future "
            "release",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(f"{__name__}.decision").DecisionFailurePolicy
    if name == "check_options":  # options are declared by a class now; kept one release
        warnings.warn(
            "rankseam.plugin.check_options is deprecated; register an options class "
            "(register(name, factory, options=MyOptions), fields made with option(...)) and the "
            "host refuses unknown names and wrong types (docs/writing-plugins.md, 'Options')",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module("rankseam.options").check_options
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_ROLE_MODULES})
