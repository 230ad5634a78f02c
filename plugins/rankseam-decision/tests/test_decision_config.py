"""Assembly of the decision reranker: options, fail-fast configuration errors, conformance."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rankseam.errors import ConfigurationError
from rankseam.plugin.decision import DecisionOutcome, unwrap
from rankseam.plugin.rerankers import make_candidates
from rankseam.testing import RerankerContract, build_component
from rankseam.types import Hit, MemoryRef
from rankseam_decision import DecisionReranker


def build(options: dict[str, Any]) -> Any:
    return build_component("reranker", "decision", config={"rerankers": {"decision": options}})


def test_the_plugin_is_discovered_and_builds_with_the_heuristic_backend() -> None:
    reranker = build({"backend": "heuristic"})
    assert isinstance(reranker, DecisionReranker)
    heuristic = build_component("decision_backend", "heuristic")
    assert reranker.backend.policy_id == heuristic.policy_id
    assert unwrap(reranker.backend) is reranker.backend  # unwrapped: fail-closed role
    assert reranker.deterministic is True
    assert reranker.window == 1 and reranker.deadline_s == 30.0
    assert reranker.keep == {DecisionOutcome.YES, DecisionOutcome.ABSTAIN}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "needs a decision backend"),
        ({"backend": "nope"}, "no decision backend named 'nope'"),
        ({"backend": 3}, r"^\[rerankers.decision\] backend must be a non-empty string, got 3"),
        ({"backend": "heuristic", "windw": 2}, r"^\[rerankers.decision\] windw is not an option"),
        ({"backend": "heuristic", "keep": "yes,maybe"}, "unknown outcome 'maybe'"),
        ({"backend": "heuristic", "keep": ""}, "at least one outcome"),
        ({"backend": "heuristic", "window": 0}, "window must be an integer"),
        ({"backend": "heuristic", "window": True}, "window must be an integer"),
        ({"backend": "heuristic", "window": 201}, "window must be an integer"),
        ({"backend": "heuristic", "window": "4"}, "window must be an integer"),
        ({"backend": "heuristic", "deadline_s": 0}, "deadline_s must be"),
        ({"backend": "heuristic", "deadline_s": float("inf")}, "deadline_s must be"),
        ({"backend": "heuristic", "deadline_s": "10"}, "deadline_s must be"),
    ],
)
def test_bad_configuration_fails_at_assembly(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build(options)


def test_options_are_parsed() -> None:
    reranker = build({"backend": "heuristic", "keep": "YES", "window": 8, "deadline_s": 2})
    assert reranker.keep == {DecisionOutcome.YES}
    assert (reranker.window, reranker.deadline_s) == (8, 2.0)
    assert build({"backend": "heuristic", "keep": ["yes", "no"]}).keep == {
        DecisionOutcome.YES,
        DecisionOutcome.NO,
    }


def test_heuristic_reranking_works_with_no_model() -> None:
    reranker = build({"backend": "heuristic", "keep": "yes"})
    texts = ["the cat sat", "flights to lisbon booked for may", "lisbon weather", "bob's cat"]
    pool = make_candidates([Hit(MemoryRef("t", f"m{i}", 1), t, 1.0) for i, t in enumerate(texts)])
    decision = asyncio.run(reranker.rerank("when is my flight to lisbon?", pool, 2))
    assert decision.selected_ranks == (2, 3)  # "flight"+"lisbon" 2/2, "lisbon" 1/2 >= 0.5


class TestDecisionRerankerContract(RerankerContract):
    capabilities = frozenset({"needs_backend"})

    def make_reranker(self) -> DecisionReranker:
        heuristic = build_component("decision_backend", "heuristic")
        return DecisionReranker(heuristic, backend_name="heuristic")


class TestWindowedDecisionRerankerContract(RerankerContract):
    capabilities = frozenset({"needs_backend"})

    def make_reranker(self) -> DecisionReranker:
        heuristic = build_component("decision_backend", "heuristic")
        return DecisionReranker(heuristic, window=4, backend_name="heuristic")
