"""The identity reranker: selects coarse ranks ``1..limit``; zero work, zero cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rankseam.plugin import RerankerRegister, hookimpl
from rankseam.types import Candidate, RerankDecision


class IdentityReranker:
    policy_id = "rankseam.rerank.identity.v1"
    descriptor: Mapping[str, Any] = {"name": "identity"}
    deterministic = True
    needs_embeddings = False
    needs_event_loop = False  # never suspends: a synchronous search runs it inline

    async def rerank(
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision:
        return RerankDecision(tuple(range(1, min(limit, len(candidates)) + 1)))


def _factory(options: Mapping[str, Any], context: object) -> IdentityReranker:
    return IdentityReranker()


@hookimpl
def register_rerankers(register: RerankerRegister) -> None:
    register(
        "identity", _factory, summary="keeps the coarse order (selects ranks 1..limit)", options=()
    )
