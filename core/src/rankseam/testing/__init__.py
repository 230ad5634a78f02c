"""The conformance kit for plugin authors (``pip install rankseam[testing]``).

Subclass a contract in your plugin's tests and implement its factory method::

    from rankseam.testing import RerankerContract

    class TestMyReranker(RerankerContract):
        def make_reranker(self):
            return MyReranker()

Every standard test then runs against your component. Contracts declare *capability flags*;
a standard test that needs a capability your component lacks is skipped **with a message that
names the flag**. A subclass cannot silently drop a standard test: overriding or deleting one
raises ``TypeError`` at class creation unless the test is listed in ``waived_tests`` with a
reason (which the kit then reports as a skip carrying that reason).
"""

from __future__ import annotations

import importlib
from typing import Any

from rankseam.testing.base import ContractBase
from rankseam.testing.reranker import RerankerContract, synthetic_pool

__all__ = [
    "ContractBase",
    "DecisionBackendContract",
    "EmbedderContract",
    "GenerationBackendContract",
    "RerankerContract",
    "StoreContract",
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
