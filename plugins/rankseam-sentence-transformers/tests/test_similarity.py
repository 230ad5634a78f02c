"""The ``similarity`` decision backend: the conformance kit, then its own behaviour."""

from __future__ import annotations

import asyncio
import re

import pytest

from rankseam.plugin.decision import (
    RERANK_ROLE,
    WRITE_GATE_ROLE,
    DecisionOutcome,
    DecisionRequest,
    rerank_request,
    write_gate_request,
)
from rankseam.testing import DecisionBackendContract, factory_context
from rankseam_sentence_transformers import SimilarityDecisionBackend

QUERY = "What did Melanie paint last summer?"
RELEVANT = "Melanie painted a sunrise over the lake last summer."
UNRELATED = "The quarterly tax filing is due on the fifteenth."


def _backend(**options: object) -> SimilarityDecisionBackend:
    context = factory_context({"decision_backends": {"similarity": options}})
    backend = context.decision_backend("similarity", RERANK_ROLE)
    assert isinstance(backend, SimilarityDecisionBackend)  # fail-closed role: unwrapped
    return backend


class TestSimilarityContract(DecisionBackendContract):
    def make_backend(self) -> SimilarityDecisionBackend:
        return _backend()


def _ask(backend: SimilarityDecisionBackend, request: DecisionRequest) -> tuple[str, float]:
    result = asyncio.run(backend.evaluate(request))
    assert result.rationale is not None
    match = re.match(r"cosine (-?\d\.\d{4}); yes >= ", result.rationale)
    assert match, result.rationale
    return result.outcome.value, float(match.group(1))


def test_relevant_is_yes_unrelated_is_no_and_the_score_is_in_the_rationale() -> None:
    backend = _backend()
    outcome, score = _ask(backend, rerank_request(QUERY, RELEVANT))
    assert outcome == "yes" and score >= backend.yes_threshold
    outcome, score = _ask(backend, rerank_request(QUERY, UNRELATED))
    assert outcome == "no" and score < backend.no_threshold
    assert score == pytest.approx(backend.cosine(QUERY, UNRELATED), abs=1e-4)


def test_between_the_thresholds_it_abstains() -> None:
    score = _backend().cosine(QUERY, RELEVANT)
    backend = _backend(yes_threshold=min(1.0, score + 0.05), no_threshold=score - 0.05)
    assert _ask(backend, rerank_request(QUERY, RELEVANT))[0] == "abstain"


def test_thresholds_are_configurable() -> None:
    always_yes = _backend(yes_threshold=-1.0, no_threshold=-1.0)
    assert _ask(always_yes, rerank_request(QUERY, UNRELATED))[0] == "yes"
    never_yes = _backend(yes_threshold=1.0, no_threshold=0.99)
    assert _ask(never_yes, rerank_request(QUERY, RELEVANT))[0] == "no"


def test_other_decision_kinds_abstain_and_say_why() -> None:
    gate = asyncio.run(_backend().evaluate(write_gate_request(RELEVANT)))
    assert gate.outcome is DecisionOutcome.ABSTAIN and not gate.used_fallback
    assert gate.rationale and "memory.write-gate" in gate.rationale
    assert gate.usage.calls == 0


def test_usage_counts_one_call_and_only_the_tokens_encoded() -> None:
    backend = _backend()
    first = asyncio.run(
        backend.evaluate(rerank_request("a question never asked before?", RELEVANT))
    )
    again = asyncio.run(
        backend.evaluate(rerank_request("a question never asked before?", RELEVANT))
    )
    assert first.usage.calls == again.usage.calls == 1
    assert first.usage.input_tokens and first.usage.input_tokens > 0
    assert again.usage.input_tokens == 0 and again.usage.output_tokens == 0
    assert again.outcome == first.outcome and again.rationale == first.rationale


def test_one_instance_serves_fail_open_and_fail_closed_roles() -> None:
    context = factory_context()
    closed = context.decision_backend("similarity", RERANK_ROLE)
    opened = context.decision_backend("similarity", WRITE_GATE_ROLE)
    assert getattr(opened, "delegate", None) is closed
    assert asyncio.run(opened.evaluate(rerank_request(QUERY, RELEVANT))).outcome.value == "yes"
