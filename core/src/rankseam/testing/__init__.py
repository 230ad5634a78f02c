"""The conformance kit for plugin authors (``pip install rankseam[testing]``).

Subclass a contract in your plugin's tests and implement its factory method::

    from rankseam.testing import RerankerContract

    class TestMyReranker(RerankerContract):
        def make_reranker(self):
            return MyReranker()

Every standard test then runs against your component. Contracts declare *capability flags*
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

import importlib
from typing import Any

import pytest

pytest.register_assert_rewrite(
    "rankseam.testing.base",
    "rankseam.testing.decision",
    "rankseam.testing.embedder",
    "rankseam.testing.generation",
    "rankseam.testing.network",
    "rankseam.testing.reranker",
    "rankseam.testing.store",
    "rankseam.testing.store_ranking",
    "rankseam.testing.store_workers",
)

from rankseam.testing.base import Capability, ContractBase  # noqa: E402
from rankseam.testing.network import NetworkBlocked, block_off_host_connections  # noqa: E402
from rankseam.testing.reranker import RerankerContract, synthetic_pool  # noqa: E402

__all__ = [
    "Capability",
    "ContractBase",
    "DecisionBackendContract",
    "EmbedderContract",
    "GenerationBackendContract",
    "NetworkBlocked",
    "RerankerContract",
    "StoreContract",
    "block_off_host_connections",
    "synthetic_pool",
]

_LAZY = {
    "DecisionBackendContract": "rankseam.testing.decision",
    "GenerationBackendContract": "rankseam.testing.generation",
    "EmbedderContract": "rankseam.testing.embedder",
    "StoreContract": "rankseam.testing.store",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rankseam.testing' has no attribute {name!r}")
