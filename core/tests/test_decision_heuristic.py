"""The built-in heuristic decision backend: documented thresholds, options, conformance."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rankseam.compose import ComponentContext, Config
from rankseam.decision import RERANK_ROLE, DecisionOutcome, rerank_request, write_gate_request
from rankseam.default_plugins.heuristic_decision import HeuristicDecisionBackend
from rankseam.errors import ConfigurationError
from rankseam.plugins import get_plugins, get_registry
from rankseam.testing import DecisionBackendContract

Y, N, A = DecisionOutcome.YES, DecisionOutcome.NO, DecisionOutcome.ABSTAIN


def verdict(backend: HeuristicDecisionBackend, query: str, text: str) -> DecisionOutcome:
    return asyncio.run(backend.evaluate(rerank_request(query, text))).outcome


def test_coverage_thresholds() -> None:
    b = HeuristicDecisionBackend()
    assert verdict(b, "when is the flight to lisbon?", "Flights to Lisbon are booked") is Y
    assert verdict(b, "when is the flight to lisbon?", "lisbon in may") is Y  # 1/2 >= 0.5
    assert verdict(b, "flight lisbon conference", "lisbon in may") is A  # 1/3
    assert verdict(b, "when is the flight to lisbon?", "the cat sat") is N
    assert verdict(b, "when is it?", "anything") is A  # only stop words: cannot tell


def test_write_gate_informativeness() -> None:
    b = HeuristicDecisionBackend(min_terms=3)

    def gate(text: str) -> DecisionOutcome:
        return asyncio.run(b.evaluate(write_gate_request(text))).outcome

    assert gate("alice moved to porto in june") is Y
    assert gate("porto") is A
    assert gate("it is what it is") is N


def test_registered_as_a_default_plugin() -> None:
    assert "heuristic" in get_registry().names("decision_backend")
    infos = {i.name: i for i in get_plugins(all=True)}
    assert infos["rankseam.default_plugins.heuristic_decision"].components == {
        "decision_backend": ["heuristic"]
    }


def build(options: dict[str, Any]) -> Any:
    config = Config.from_mapping({"decision_backends": {"heuristic": options}})
    return ComponentContext(config).decision_backend("heuristic", RERANK_ROLE)


def test_options() -> None:
    b = build({"yes_threshold": 1.0, "no_threshold": 0.5, "min_terms": 1})
    assert (b.yes_threshold, b.no_threshold, b.min_terms) == (1.0, 0.5, 1)
    assert verdict(b, "flight lisbon", "lisbon") is N  # 1/2 <= 0.5


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"yes": 1}, r"\[decision_backends.heuristic\] yes is not an option"),
        ({"yes_threshold": 2}, "yes_threshold must be a number in"),
        ({"no_threshold": True}, "no_threshold must be a number in"),
        ({"yes_threshold": 0.3, "no_threshold": 0.3}, "must be below"),
        ({"min_terms": 0}, "min_terms must be an integer"),
    ],
)
def test_bad_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build(options)


class TestHeuristicBackendContract(DecisionBackendContract):
    def make_backend(self) -> HeuristicDecisionBackend:
        return HeuristicDecisionBackend()
