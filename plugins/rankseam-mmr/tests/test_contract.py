"""The conformance kit's reranker contract, with vectors and without."""

from __future__ import annotations

from typing import ClassVar

from rankseam.testing import RerankerContract
from rankseam_mmr import MMROptions, MMRReranker


class TestMMRContract(RerankerContract):
    capabilities: ClassVar[frozenset[str]] = frozenset({"embeddings"})

    def make_reranker(self) -> MMRReranker:
        return MMRReranker()


class TestMMRContractPureDiversity(RerankerContract):
    capabilities: ClassVar[frozenset[str]] = frozenset({"embeddings"})

    def make_reranker(self) -> MMRReranker:
        return MMRReranker(MMROptions(lam=0.0))


class TestMMRContractWithoutVectors(RerankerContract):
    """No vectors attached at all: MMR must still answer (similarity 0 everywhere)."""

    def make_reranker(self) -> MMRReranker:
        return MMRReranker(MMROptions(lam=0.3))
