"""Optional per-rank scores in ``RerankDecision``: checked by the seam, shown on the hits and in
the trace, never used to reorder."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import rankseam
from rankseam import CandidateRecord, RerankDecision, RerankError, RerankStatus
from rankseam.cli import cli
from rankseam.seam import normalize_scored_ranks, rerank_pool
from rankseam.testing import synthetic_pool

POOL, _ = synthetic_pool(6)


class Scripted:
    policy_id = "test.scored.v1"

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
        return self.answer


def run(answer: Any, limit: int = 3, **kw: Any) -> Any:
    return asyncio.run(rerank_pool("q", POOL, limit, Scripted(answer), **kw))


def test_scores_go_on_the_hits_and_into_the_trace_in_the_plugins_order() -> None:
    # The scores do not agree with the selection's order: the host shows them, never sorts.
    hits, trace = run(RerankDecision((3, 1, 5), scores=(0.25, 7.5, -2)))
    assert [h.ref for h in hits] == [POOL[2].ref, POOL[0].ref, POOL[4].ref]
    assert [h.rerank_score for h in hits] == [0.25, 7.5, -2.0]
    assert [h.score for h in hits] == [POOL[2].score, POOL[0].score, POOL[4].score]
    assert trace.status is RerankStatus.OK and trace.scores == (0.25, 7.5, -2.0)
    assert trace.to_dict()["scores"] == [0.25, 7.5, -2.0]
    assert hits[0].to_dict()["rerank_score"] == 0.25
    assert hits == (POOL[2], POOL[0], POOL[4])  # the same stored hits (rerank_score: eq=False)


def test_no_scores_means_none_on_hits_and_trace() -> None:
    hits, trace = run(RerankDecision((2, 1)))
    assert [h.rerank_score for h in hits] == [None, None]
    assert hits == (POOL[1], POOL[0]) and hits[0] is POOL[1]
    assert trace.scores is None and trace.to_dict()["scores"] is None
    assert hits[0].to_dict()["rerank_score"] is None


def test_numpy_scalars_are_accepted_as_floats() -> None:
    _, trace = run(RerankDecision((1, 2), scores=np.array([0.5, 1.5], dtype=np.float32)))
    assert trace.scores == (0.5, 1.5) and type(trace.scores[0]) is float
    assert json.dumps(trace.to_dict())  # plain floats in the JSON trace


@pytest.mark.parametrize(
    "bad", [math.nan, math.inf, -math.inf, "0.5", None, True, np.float64("nan"), 10**400]
)
def test_a_non_finite_or_non_numeric_score_discards_its_rank(bad: Any) -> None:
    hits, trace = run(RerankDecision((2, 4, 1), scores=(0.9, bad, 0.1)))
    assert trace.selected_ranks == (2, 1) and trace.scores == (0.9, 0.1)
    assert [h.rerank_score for h in hits] == [0.9, 0.1]
    assert trace.status is RerankStatus.REPAIRED and trace.discarded_rank_count == 1
    assert "finite" in (trace.reason or "")


def test_a_discarded_rank_takes_its_score_with_it() -> None:
    # (0, 2, 2, 7, 5): rank 0, a repeat and n+1 are discarded; their scores never show.
    hits, trace = run(RerankDecision((0, 2, 2, 7, 5), scores=(9.0, 0.8, 8.0, 7.0, 0.3)))
    assert trace.selected_ranks == (2, 5) and trace.scores == (0.8, 0.3)
    assert trace.discarded_rank_count == 3
    assert [h.rerank_score for h in hits] == [0.8, 0.3]


def test_ranks_beyond_the_limit_drop_their_scores() -> None:
    _, trace = run(RerankDecision((6, 5, 4, 3), scores=(4.0, 3.0, 2.0, 1.0)), limit=2)
    assert trace.selected_ranks == (6, 5) and trace.scores == (4.0, 3.0)


@pytest.mark.parametrize("scores", [(), (0.1,), (0.1, 0.2, 0.3, 0.4)])
def test_a_scores_tuple_of_another_length_is_invalid_output(scores: tuple[float, ...]) -> None:
    answer = RerankDecision((1, 2, 3), scores=scores)
    with pytest.raises(RerankError) as info:
        run(answer)
    assert info.value.reason == "invalid_output"
    assert "one score per element of selected_ranks" in str(info.value)
    hits, trace = run(answer, on_error="coarse")
    assert trace.status is RerankStatus.DEGRADED and trace.scores is None
    assert hits == POOL[:3] and all(h.rerank_score is None for h in hits)


def test_fallback_shows_no_scores() -> None:
    hits, trace = run(RerankDecision((0, 99), scores=(1.0, 2.0)), limit=2)
    assert trace.status is RerankStatus.FELL_BACK and trace.scores is None
    assert all(h.rerank_score is None for h in hits)
    hits, trace = run(RerankDecision((1, 2), scores=(1.0, 2.0), used_fallback=True), limit=2)
    assert trace.status is RerankStatus.FELL_BACK and trace.scores is None
    assert all(h.rerank_score is None for h in hits)


def test_every_score_nan_falls_back_to_coarse_ranks() -> None:
    hits, trace = run(RerankDecision((3, 2, 1), scores=(math.nan,) * 3))
    assert trace.status is RerankStatus.FELL_BACK and trace.selected_ranks == (1, 2, 3)
    assert trace.discarded_rank_count == 3 and trace.scores is None
    assert hits == POOL[:3]


def test_normalize_scored_ranks_without_scores_matches_normalize_ranks() -> None:
    assert normalize_scored_ranks((3, 3, 0, 1), None, 6, 5) == ((3, 1), None, 2)


def test_hit_rejects_a_non_finite_rerank_score() -> None:
    with pytest.raises(ValueError, match="finite"):
        rankseam.Hit(POOL[0].ref, "t", 1.0, rerank_score=math.nan)


SCORING = """
import rankseam
from rankseam.types import RerankDecision

class Scoring:
    policy_id = "test.scoring.v1"

    async def rerank(self, query, candidates, limit, /):
        order = tuple(reversed(candidates))[:limit]
        return RerankDecision(tuple(c.rank for c in order), scores=tuple(
            10.0 + c.rank for c in order))

@rankseam.hookimpl
def register_rerankers(register):
    register("scoring", lambda options, context: Scoring())
"""


def test_scores_through_memory_and_the_cli(tmp_path: Path, install: Any) -> None:
    install("scoring", SCORING, module="rs_test_scoring")
    db = tmp_path / "m.sqlite3"
    with rankseam.open_memory(db) as memory:
        for text in ("spare key under the pot", "spare tyre in the boot", "blue key ring"):
            memory.add(text)
        result = memory.search("spare key", limit=2, reranker="scoring")
        coarse = result.trace.coarse
        assert [h.ref for h in result.hits] == [c.ref for c in coarse][::-1][:2]
        assert [h.rerank_score for h in result.hits] == [10.0 + len(coarse), 9.0 + len(coarse)]
        assert result.trace.to_dict()["rerank"]["scores"] == [h.rerank_score for h in result.hits]
        assert [h.score for h in result.hits] == [c.score for c in coarse][::-1][:2]
        plain = memory.search("spare key", limit=2, reranker=None)
        assert all(h.rerank_score is None for h in plain.hits)

    args = ["search", "spare key", "--db", str(db), "--limit", "2", "--rerank", "scoring"]
    out = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert f"rerank_score={10.0 + len(coarse):.4f}" in out.output
    out = CliRunner().invoke(cli, [*args, "--json", "--trace"], catch_exceptions=False)
    data = json.loads(out.output)
    assert [h["rerank_score"] for h in data["hits"]] == data["trace"]["rerank"]["scores"]


def test_a_records_confidence_reaches_the_trace_json_only_when_set() -> None:
    records = (CandidateRecord(1, "yes", confidence=0.8125), CandidateRecord(2, "no"))
    _, trace = run(RerankDecision((1, 2), records=records))
    shown = trace.to_dict()["records"]
    assert shown[0]["confidence"] == 0.8125
    assert "confidence" not in shown[1]
    json.dumps(trace.to_dict())  # what the CLI and MCP print


@pytest.mark.parametrize("bad", ["0.5", math.nan, math.inf, True, [0.5]])
def test_a_records_confidence_must_be_a_finite_number(bad: Any) -> None:
    with pytest.raises(ValueError, match="confidence must be None or a finite number"):
        CandidateRecord(1, "yes", confidence=bad)
