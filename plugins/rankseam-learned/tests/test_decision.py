"""The ``learned`` decision backend: thresholds, the probability on every verdict, and the
``decision`` reranker asking it in a real search."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import rankseam
from rankseam.errors import ConfigurationError
from rankseam.plugin.decision import DecisionOutcome, rerank_request, write_gate_request
from rankseam_learned.decision import LearnedDecisionBackend

QUERY = "alice lisbon conference flight"
COVERED = "alice booked a flight to lisbon for the conference"
UNRELATED = "bob adopted a grey cat"


def backend(model_file: Path, **options: float) -> LearnedDecisionBackend:
    return LearnedDecisionBackend.from_options({"model": str(model_file), **options})


def verdict(b: LearnedDecisionBackend, text: str):
    return asyncio.run(b.evaluate(rerank_request(QUERY, text)))


def test_probability_is_on_every_verdict(model_file: Path) -> None:
    b = backend(model_file)
    high, low = verdict(b, COVERED), verdict(b, UNRELATED)
    assert high.confidence is not None and low.confidence is not None
    assert high.confidence > 0.5 > low.confidence  # the test model learned term coverage
    assert high.rationale == f"p={high.confidence:.6f}"
    assert high.confidence == pytest.approx(b.probability(QUERY, COVERED))


def test_thresholds_decide_yes_no_abstain(model_file: Path) -> None:
    b = backend(model_file)
    p_high = b.probability(QUERY, COVERED)
    p_low = b.probability(QUERY, UNRELATED)
    assert verdict(b, COVERED).outcome is DecisionOutcome.YES
    # a yes threshold just above the probability turns the yes into an abstention ...
    above = backend(model_file, yes_threshold=min(1.0, p_high + 1e-6), no_threshold=0.0)
    assert verdict(above, COVERED).outcome is DecisionOutcome.ABSTAIN
    # ... and a yes threshold equal to it keeps the yes (p >= yes_threshold)
    assert verdict(
        backend(model_file, yes_threshold=p_high, no_threshold=0.0), COVERED
    ).outcome is (DecisionOutcome.YES)
    # below no_threshold: no; equal to it: abstain (p < no_threshold)
    assert verdict(backend(model_file, no_threshold=p_low + 1e-6), UNRELATED).outcome is (
        DecisionOutcome.NO
    )
    assert verdict(backend(model_file, no_threshold=p_low), UNRELATED).outcome is (
        DecisionOutcome.ABSTAIN
    )


def test_no_threshold_must_be_below_yes_threshold(model_file: Path) -> None:
    with pytest.raises(ConfigurationError, match="no_threshold"):
        backend(model_file, yes_threshold=0.3, no_threshold=0.3)


def test_the_write_gate_question_abstains(model_file: Path) -> None:
    result = asyncio.run(backend(model_file).evaluate(write_gate_request(COVERED)))
    assert result.outcome is DecisionOutcome.ABSTAIN
    assert "rerank question only" in (result.rationale or "")


def test_a_model_without_a_decision_head_fails_at_assembly(rerank_only_model_file: Path) -> None:
    path = rerank_only_model_file
    with pytest.raises(ConfigurationError, match="no decision head") as info:
        backend(path)
    assert str(path) in str(info.value)


def test_decision_reranking_with_the_learned_backend(tmp_path: Path, model_file: Path) -> None:
    mem = rankseam.open_memory(
        tmp_path / "m.sqlite3",
        namespace="t",
        config={
            "rerankers": {"decision": {"backend": "learned"}},
            "decision_backends": {"learned": {"model": str(model_file)}},
        },
    )
    try:
        mem.add(COVERED, memory_id="yes")
        mem.add("alice flew home from porto", memory_id="maybe")
        mem.add(UNRELATED, memory_id="no")
        result = mem.search(QUERY, 3, reranker="decision")
    finally:
        mem.close()
    trace = result.trace.to_dict()["rerank"]
    assert trace["descriptor"]["backend"] == "learned"
    assert trace["descriptor"]["backend_policy_id"].startswith("rankseam.decision.learned.v1+")
    outcomes = {r["rank"]: r["outcome"] for r in trace["records"]}
    ids = [h.ref.memory_id for h in result]
    assert "yes" in ids and "no" not in ids
    assert "yes" in outcomes.values() and "no" in outcomes.values()
    # every record carries the backend's probability, and it agrees with the verdict
    thresholds = LearnedDecisionBackend.from_options({"model": str(model_file)})
    for record in trace["records"]:
        p = record["confidence"]
        assert 0.0 <= p <= 1.0
        if record["outcome"] == "yes":
            assert p >= thresholds.yes_threshold
        elif record["outcome"] == "no":
            assert p < thresholds.no_threshold
