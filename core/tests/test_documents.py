"""open_reranker: an installed reranker over texts the caller already has, through the seam."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

import rankseam
from rankseam.types import RerankDecision, RerankStatus

TEXTS = ["alpha one", "beta two", "gamma three", "delta four"]


class Scripted:
    policy_id = "test.scripted.v1"

    def __init__(self, ranks: tuple[Any, ...], scores: tuple[float, ...] | None = None) -> None:
        self.ranks, self.scores = ranks, scores
        self.seen: list[tuple[str, int, int]] = []

    def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
        self.seen.append((query, len(candidates), limit))
        return RerankDecision(selected_ranks=self.ranks, scores=self.scores)


def test_identity_by_name_keeps_the_input_order() -> None:
    result = rankseam.open_reranker("identity").rerank("q", TEXTS, 2)
    assert [h.text for h in result.hits] == TEXTS[:2]
    assert [h.ref.memory_id for h in result.hits] == ["1", "2"]
    assert result.trace.rerank is not None
    assert result.trace.rerank.policy_id.startswith("rankseam.rerank.identity")


def test_positions_resolve_to_the_callers_texts_and_ids() -> None:
    reranker = Scripted((4, 2), scores=(0.9, 0.1))
    result = rankseam.open_reranker(reranker).rerank(
        "q", TEXTS, 3, ids=["a", "b", "c", "d"], namespace="mine"
    )
    assert [(h.ref.namespace, h.ref.memory_id, h.text) for h in result.hits] == [
        ("mine", "d", "delta four"),
        ("mine", "b", "beta two"),
    ]
    assert [h.rerank_score for h in result.hits] == [0.9, 0.1]
    assert reranker.seen == [("q", 4, 3)]


def test_invalid_positions_are_discarded_and_counted() -> None:
    result = rankseam.open_reranker(Scripted((3, 3, 99, 0))).rerank("q", TEXTS, 3)
    assert [h.text for h in result.hits] == ["gamma three"]
    assert result.trace.rerank.status is RerankStatus.REPAIRED
    assert result.trace.rerank.discarded_rank_count == 3


def test_no_valid_position_falls_back_to_the_input_order() -> None:
    result = rankseam.open_reranker(Scripted((0, 9))).rerank("q", TEXTS, 2)
    assert [h.text for h in result.hits] == TEXTS[:2]
    assert result.trace.rerank.status is RerankStatus.FELL_BACK


def test_caller_scores_are_the_coarse_scores() -> None:
    result = rankseam.open_reranker("identity").rerank("q", TEXTS, 4, scores=[4, 3, 2, 1])
    assert [h.score for h in result.hits] == [4.0, 3.0, 2.0, 1.0]


def test_async_and_inside_a_running_loop() -> None:
    reranker = rankseam.open_reranker(Scripted((2, 1)))

    async def main() -> tuple[list[str], list[str]]:
        a = await reranker.arerank("q", TEXTS, 2)
        b = reranker.rerank("q", TEXTS, 2)  # sync call from inside a loop still works
        return [h.text for h in a.hits], [h.text for h in b.hits]

    a, b = asyncio.run(main())
    assert a == b == ["beta two", "alpha one"]


class NeedsVectors:
    policy_id = "test.vectors.v1"
    needs_embeddings = True

    def __init__(self) -> None:
        self.dims: list[int | None] = []

    def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
        self.dims.append(None if candidates[0].embedding is None else len(candidates[0].embedding))
        return RerankDecision(selected_ranks=(1,))


def test_vectors_come_from_the_caller_or_the_configured_embedder() -> None:
    seen = NeedsVectors()
    reranker = rankseam.open_reranker(seen)
    reranker.rerank("q", TEXTS, 1, vectors=np.eye(4, 3))
    reranker.rerank("q", TEXTS, 1)
    assert seen.dims[0] == 3
    assert seen.dims[1] is not None and seen.dims[1] > 3  # the hashed default embedder


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"texts": "one string"}, "sequence of strings"),
        ({"texts": ["ok", 3]}, "document 2: text must be a string"),
        ({"texts": TEXTS, "ids": ["a", "a", "b", "c"]}, "distinct"),
        ({"texts": TEXTS, "scores": [1.0]}, "one number per document"),
        ({"texts": TEXTS, "scores": [1.0, float("nan"), 0, 0]}, "document 2"),
        ({"texts": ["t"] * 201}, "at most 200"),
        ({"texts": TEXTS, "query": "  "}, "query"),
        ({"texts": TEXTS, "vectors": np.zeros((2, 3))}, "one row per document"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs: dict[str, Any], message: str) -> None:
    args = {"query": "q", **kwargs}
    reranker = rankseam.open_reranker(NeedsVectors())
    with pytest.raises(rankseam.ValidationError, match=message):
        reranker.rerank(args.pop("query"), args.pop("texts"), 2, **args)


def test_unknown_reranker_and_bad_policy_fail_at_open() -> None:
    with pytest.raises(rankseam.ConfigurationError, match="no reranker named 'nope'"):
        rankseam.open_reranker("nope")
    with pytest.raises(rankseam.ValidationError, match="on_error"):
        rankseam.open_reranker("identity", on_error="ignore")
    with pytest.raises(rankseam.ConfigurationError, match="Reranker protocol"):
        rankseam.open_reranker(object())  # type: ignore[arg-type]


def test_a_failing_reranker_raises_or_degrades_visibly() -> None:
    class Boom:
        policy_id = "test.boom.v1"

        def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
            raise RuntimeError("down")

    with pytest.raises(rankseam.RerankError, match="down"):
        rankseam.open_reranker(Boom()).rerank("q", TEXTS, 2)
    result = rankseam.open_reranker(Boom(), on_error="coarse").rerank("q", TEXTS, 2)
    assert result.trace.rerank.status is RerankStatus.DEGRADED
    assert [h.text for h in result.hits] == TEXTS[:2]


def test_positions_are_the_callers_input_indices_best_first() -> None:
    result = rankseam.open_reranker(Scripted((4, 2))).rerank(
        "q", TEXTS, 3, ids=["a", "b", "c", "d"]
    )
    assert isinstance(result, rankseam.DocumentResult)
    assert result.positions == (3, 1)
    assert [TEXTS[p] for p in result.positions] == [h.text for h in result.hits]
    repaired = rankseam.open_reranker(Scripted((3, 3, 99, 1))).rerank("q", TEXTS, 3)
    assert repaired.positions == (2, 0)
    fell_back = rankseam.open_reranker(Scripted((0, 9))).rerank("q", TEXTS, 2)
    assert fell_back.positions == (0, 1)


def test_positions_of_a_degraded_result_are_the_input_order() -> None:
    class Boom:
        policy_id = "test.boom.v1"

        def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
            raise RuntimeError("down")

    result = rankseam.open_reranker(Boom(), on_error="coarse").rerank("q", TEXTS, 3)
    assert result.trace.rerank.status is RerankStatus.DEGRADED
    assert result.positions == (0, 1, 2)


@pytest.mark.parametrize("choice", ["none", None])
def test_none_keeps_the_input_order_and_runs_no_reranker(choice: str | None) -> None:
    reranker = rankseam.open_reranker(choice)
    assert reranker.name == "none" and reranker.policy_id == "none"
    result = reranker.rerank("q", TEXTS, 3, scores=[4, 3, 2, 1])
    assert result.trace.rerank is None
    assert result.positions == (0, 1, 2)
    assert [h.text for h in result.hits] == TEXTS[:3]
    assert [h.score for h in result.hits] == [4.0, 3.0, 2.0]
    assert asyncio.run(reranker.arerank("q", TEXTS)).positions == (0, 1, 2, 3)
    with pytest.raises(rankseam.ConfigurationError, match="no reranker is chosen"):
        rankseam.open_reranker("none", options={"lambda": 0.5})
