"""rankseam-listwise: the listwise reranker and a deterministic local generation backend.

Registers the reranker ``listwise`` and the generation backend ``local``.

Reranker options (``[rerankers.listwise]`` or ``--listwise-<option>``):

- ``backend`` (required): name of a generation backend, e.g. ``"local"`` or a model backend.
- ``window`` (integer >= 2, default 30): most candidates per generation call. Pools up to the
  window take exactly one call; larger pools use bottom-up sliding windows.
- ``stride`` (integer in 1..window-1, default window // 2): how far each window moves up.
- ``max_calls`` (integer >= 1, default 20): call budget per search, checked before any call.
- ``max_chars`` (integer >= 1, default 2000): candidate text cut (the seam cuts too).

See docs/plugins/listwise.md for the policy, the call-count formula and failure behaviour.
"""

from __future__ import annotations

from rankseam.plugin import GenerationBackendRegister, RerankerRegister, hookimpl
from rankseam_listwise.instructions import (
    INSTRUCTIONS,
    INSTRUCTIONS_VERSION,
    OUTPUT_SCHEMA,
    build_request,
)
from rankseam_listwise.local import LOCAL_POLICY_ID, LocalGenerationBackend, make_local_backend
from rankseam_listwise.reranker import (
    DEFAULT_MAX_CALLS,
    DEFAULT_WINDOW,
    POLICY_ID,
    CallBudgetError,
    ListwiseOptions,
    ListwiseReranker,
    make_reranker,
)
from rankseam_listwise.windows import call_count, plan_windows

__all__ = [
    "DEFAULT_MAX_CALLS",
    "DEFAULT_WINDOW",
    "INSTRUCTIONS",
    "INSTRUCTIONS_VERSION",
    "LOCAL_POLICY_ID",
    "OUTPUT_SCHEMA",
    "POLICY_ID",
    "CallBudgetError",
    "ListwiseOptions",
    "ListwiseReranker",
    "LocalGenerationBackend",
    "build_request",
    "call_count",
    "make_local_backend",
    "make_reranker",
    "plan_windows",
    "register_generation_backends",
    "register_rerankers",
]


@hookimpl
def register_rerankers(register: RerankerRegister) -> None:
    register(
        "listwise",
        make_reranker,
        summary="one structured generation request over the pool, answered with ranks only",
        options=ListwiseOptions,
    )


@hookimpl
def register_generation_backends(register: GenerationBackendRegister) -> None:
    register(
        "local",
        make_local_backend,
        summary="deterministic term-overlap heuristic (not a model) for tests and demos",
        options=(),
    )


#: The distribution's version (the one place it is written; pyproject.toml reads it).
__version__ = "0.1.0"
