"""The conformance kit for plugin authors (``pip install rankseam[testing]``).

Subclass a contract in your plugin's tests and implement its factory method::

    from rankseam.testing import RerankerContract

    class TestMyReranker(RerankerContract):
        def make_reranker(self):
            return MyReranker()

Every standard test then runs against your component. To test a component inside the host
without its internals, the kit also gives :func:`build_component` / :func:`factory_context`
(build from options as an assembly does), :func:`run_reranker` / :func:`arun_reranker` (run a
reranker over a pool through the real rerank seam), :func:`assert_listed` (the component is
registered by your plugin), :func:`installed_plugin` (load a plugin object as if installed) and
:func:`invoke_cli` (run the ``rankseam`` command). Import them from ``rankseam.testing``; its
sub-modules are internal. Contracts declare *capability flags*
(:class:`Capability` members; a name the contract does not know is a ``TypeError`` when your
class is defined, so a typo cannot silently drop coverage); a standard test that needs a
capability your component lacks is skipped **with a message that names the flag**. A subclass
cannot silently drop a standard test: overriding or deleting one raises ``TypeError`` at class
creation unless the test is listed in ``waived_tests`` with a reason (which the kit then reports
as a skip carrying that reason).

The kit's modules are registered for pytest's assertion rewriting before they are imported,
so a failing standard test shows the compared values, not a bare ``AssertionError``.
"""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite(
    "rankseam.testing.adapters",
    "rankseam.testing.base",
    "rankseam.testing.decision",
    "rankseam.testing.embedder",
    "rankseam.testing.generation",
    "rankseam.testing.host",
    "rankseam.testing.network",
    "rankseam.testing.reranker",
    "rankseam.testing.store",
    "rankseam.testing.store_forget",
    "rankseam.testing.store_ranking",
    "rankseam.testing.store_reader",
    "rankseam.testing.store_structure",
    "rankseam.testing.store_workers",
)

from rankseam.adapters import lazy_exports  # noqa: E402
from rankseam.testing.adapters import (  # noqa: E402
    FILTER_SAMPLE,
    SAMPLE_MEMORIES,
    assert_integration,
    sample_memory,
)
from rankseam.testing.base import Capability, ContractBase  # noqa: E402
from rankseam.testing.host import (  # noqa: E402
    KIT_NAMESPACE,
    Listing,
    RerankRun,
    arun_reranker,
    assert_listed,
    build_component,
    factory_context,
    installed_plugin,
    invoke_cli,
    run_reranker,
)
from rankseam.testing.network import NetworkBlocked, block_off_host_connections  # noqa: E402
from rankseam.testing.reranker import (  # noqa: E402
    OverlapReranker,
    RerankerContract,
    synthetic_pool,
)

__all__ = [
    "FILTER_SAMPLE",
    "KIT_NAMESPACE",
    "RANK_SELECTION_SCHEMA",
    "SAMPLE_MEMORIES",
    "Capability",
    "ContractBase",
    "DecisionBackendContract",
    "EmbedderContract",
    "GenerationBackendContract",
    "Listing",
    "NetworkBlocked",
    "OverlapReranker",
    "RerankRun",
    "RerankerContract",
    "StoreContract",
    "arun_reranker",
    "assert_integration",
    "assert_listed",
    "block_off_host_connections",
    "build_component",
    "factory_context",
    "installed_plugin",
    "invoke_cli",
    "rank_selection_request",
    "run_reranker",
    "sample_memory",
    "synthetic_pool",
]

_LAZY = {
    "DecisionBackendContract": "rankseam.testing.decision",
    "GenerationBackendContract": "rankseam.testing.generation",
    "RANK_SELECTION_SCHEMA": "rankseam.testing.generation",
    "rank_selection_request": "rankseam.testing.generation",
    "EmbedderContract": "rankseam.testing.embedder",
    "StoreContract": "rankseam.testing.store",
}

__getattr__ = lazy_exports(__name__, _LAZY)
