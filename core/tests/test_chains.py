"""Reranker chains (docs/seam.md, "Reranker chains"): each stage a governed call over the
previous stage's selection, with its own options, policy, deadline and trace entry; identity,
bounds and cost accounting hold across stages. Property tests run random chains of the kit's
reranker doubles (rankseam.testing.doubles); the rest goes through the public entry points
(Memory.search / asearch, open_memory, open_reranker, the configuration, the CLI)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rankseam
from rankseam.errors import ConfigurationError, RerankError, ValidationError
from rankseam.governed import DecisionFailurePolicy
from rankseam.loop import LoopRunner
from rankseam.seam import (
    RerankerSpec,
    chain_of,
    chain_trace,
    reranker_specs,
)
from rankseam.seam.chain import CHAIN_POLICY_PREFIX
from rankseam.testing import synthetic_pool
from rankseam.testing.doubles import (
    DOUBLE_USAGE,
    FAILING_MISBEHAVIOURS,
    MISBEHAVIOURS,
    EveryOtherReranker,
    MisbehavingReranker,
    ReverseReranker,
)
from rankseam.types import Hit, RerankStatus, RerankTrace, Usage

OPEN = DecisionFailurePolicy.FAIL_OPEN
CLOSED = DecisionFailurePolicy.FAIL_CLOSED
RUNNER = LoopRunner()


def make(kind: str, calls: int) -> Any:
    usage = Usage(calls, 10 * calls, calls)
    if kind == "reverse":
        return ReverseReranker(usage)
    if kind == "every_other":
        return EveryOtherReranker(usage)
    return MisbehavingReranker(kind, usage)


KINDS = ("reverse", "every_other", *MISBEHAVIOURS)
stage_st = st.tuples(
    st.sampled_from(KINDS), st.integers(1, 5), st.sampled_from([None, OPEN, CLOSED])
)


def run_chain(
    stages: list[tuple[str, int, Any]], pool: tuple[Hit, ...], limit: int, on_error: Any, sync: bool
) -> Any:
    chain = chain_of([RerankerSpec(make(k, c), on_error=p) for k, c, p in stages])
    stage = chain.stage("a query", pool, limit, on_error=on_error, deadline_s=30.0)
    if sync:
        return stage.run_sync(RUNNER)
    return asyncio.run(stage.run())


def policy_of(stage: tuple[str, int, Any], search: Any) -> Any:
    return search if stage[2] is None else stage[2]


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(
    n=st.integers(1, 12),
    limit=st.integers(1, 9),
    stages=st.lists(stage_st, min_size=1, max_size=4),
    on_error=st.sampled_from([OPEN, CLOSED, "raise", "coarse"]),
    sync=st.booleans(),
)
def test_random_chains_keep_identity_bounds_and_cost(
    n: int, limit: int, stages: list[tuple[str, int, Any]], on_error: Any, sync: bool
) -> None:
    pool, _vectors = synthetic_pool(n, seed=n)
    search_policy = DecisionFailurePolicy.FAIL_OPEN if on_error in (OPEN, "coarse") else CLOSED
    failing = [
        i
        for i, s in enumerate(stages)
        if s[0] in FAILING_MISBEHAVIOURS and policy_of(s, search_policy) is CLOSED
    ]
    # what each stage spends: its double's usage (a wrong_type answer attaches none)
    spent = [Usage.zero() if s[0] == "wrong_type" else Usage(s[1], 10 * s[1], s[1]) for s in stages]
    if failing:
        first = failing[0]
        with pytest.raises(RerankError) as info:
            run_chain(stages, pool, limit, on_error, sync)
        error = info.value
        assert error.usage == sum(spent[: first + 1], Usage.zero())
        if len(stages) > 1:
            assert error.stage == first + 1
            assert str(error).startswith(
                f"stage {first + 1} of {len(stages)} of the reranker chain "
            )
        else:
            assert error.stage is None
        return
    hits, trace = run_chain(stages, pool, limit, on_error, sync)
    k = min(limit, n)
    # bounds: at most the limit, no duplicates, every hit an exact stored memory
    assert 1 <= len(hits) <= k
    assert len({h.ref for h in hits}) == len(hits)
    for hit in hits:
        stored = pool[[p.ref for p in pool].index(hit.ref)]
        assert (hit.ref, hit.text, hit.score, hit.matched_by) == (
            stored.ref,
            stored.text,
            stored.score,
            stored.matched_by,
        )
    # the trace maps the final hits back to the coarse pool
    assert tuple(pool[r - 1] for r in trace.selected_ranks) == hits
    assert trace.candidate_count == n and trace.limit == k
    # cost: every stage's usage, summed
    assert trace.usage == sum(spent, Usage.zero())
    if len(stages) == 1:
        assert trace.stages == ()
        assert trace.policy_id == make(*stages[0][:2]).policy_id
        return
    assert len(trace.stages) == len(stages)
    assert [t.usage for t in trace.stages] == spent
    assert trace.policy_id == CHAIN_POLICY_PREFIX + ">".join(t.policy_id for t in trace.stages)
    # stage k+1's pool is stage k's selection
    assert trace.stages[0].candidate_count == n
    for before, after in zip(trace.stages, trace.stages[1:], strict=False):
        assert after.candidate_count == len(before.selected_ranks)
    statuses = [t.status for t in trace.stages]
    for i, (s, t) in enumerate(zip(stages, trace.stages, strict=True)):
        if s[0] in FAILING_MISBEHAVIOURS:  # failed open: the previous selection, degraded
            assert t.status is RerankStatus.DEGRADED, i
    order = [RerankStatus.OK, RerankStatus.REPAIRED, RerankStatus.FELL_BACK, RerankStatus.DEGRADED]
    assert trace.status is max(statuses, key=order.index)
    assert trace.discarded_rank_count == sum(t.discarded_rank_count for t in trace.stages)
    assert trace.over_limit_count == sum(t.over_limit_count for t in trace.stages)
    assert trace.used_fallback == any(t.used_fallback for t in trace.stages)
    assert trace.scores == trace.stages[-1].scores
    assert [h.rerank_score for h in hits] == list(trace.scores or [None] * len(hits))
    json.dumps(trace.to_dict())  # the per-stage trace is JSON-serialisable


def test_a_failing_stage_fails_open_to_the_previous_selection() -> None:
    pool, _ = synthetic_pool(6)
    stages = [("reverse", 1, None), ("raises", 2, OPEN), ("every_other", 3, None)]
    hits, trace = run_chain(stages, pool, 4, CLOSED, sync=False)
    first, failed, last = trace.stages
    assert first.selected_ranks == (6, 5, 4, 3)
    assert failed.status is RerankStatus.DEGRADED and failed.selected_ranks == (1, 2, 3, 4)
    assert failed.reason == "exception: RuntimeError" and failed.usage == Usage(2, 20, 2)
    assert last.selected_ranks == (1, 3, 2, 4)
    assert trace.selected_ranks == (6, 4, 5, 3) and hits == tuple(pool[r - 1] for r in (6, 4, 5, 3))
    assert trace.status is RerankStatus.DEGRADED
    assert trace.reason == f"stage 2 ({failed.policy_id}): exception: RuntimeError"
    assert trace.usage == Usage(6, 60, 6)
    assert trace.descriptor == {
        "stages": ["kit.reverse.v1", "kit.misbehaving.raises.v1", "kit.every-other.v1"]
    }
    assert trace.to_dict()["stages"][1]["status"] == "degraded"


def test_a_failing_stage_fails_closed_naming_the_stage_and_the_cost_so_far() -> None:
    pool, _ = synthetic_pool(5)
    with pytest.raises(RerankError) as info:
        run_chain([("reverse", 2, None), ("system_exit", 1, None)], pool, 3, "raise", sync=True)
    error = info.value
    assert error.stage == 2 and error.reason == "exception"
    assert error.policy_id == "kit.misbehaving.system_exit.v1"
    assert error.usage == Usage(3, 30, 3)
    assert str(error).startswith(
        "stage 2 of 2 of the reranker chain ('kit.misbehaving.system_exit.v1') failed: "
        "reranker 'kit.misbehaving.system_exit.v1' failed (exception)"
    )
    assert isinstance(error.__cause__, RerankError)


def test_each_stage_has_its_own_deadline() -> None:
    class Hangs:
        policy_id = "test.hangs.v1"

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
            await asyncio.Event().wait()

    pool, _ = synthetic_pool(4)
    chain = chain_of(
        [ReverseReranker(), RerankerSpec(Hangs(), on_error="fail_open", deadline_s=0.05)]
    )
    hits, trace = asyncio.run(
        chain.stage("q", pool, 3, on_error="fail_closed", deadline_s=60).run()
    )
    assert trace.stages[1].status is RerankStatus.DEGRADED
    assert trace.stages[1].reason == "timeout: RerankError"
    assert hits == tuple(pool[r - 1] for r in (4, 3, 2))


def test_a_single_stage_keeps_the_single_reranker_trace() -> None:
    pool, _ = synthetic_pool(4)
    _, trace = asyncio.run(
        chain_of([ReverseReranker()]).stage("q", pool, 2, on_error="raise", deadline_s=5).run()
    )
    assert trace.stages == () and "stages" not in trace.to_dict()
    assert trace.policy_id == "kit.reverse.v1" and trace.selected_ranks == (4, 3)


def test_the_chain_trace_of_stages() -> None:
    a = RerankTrace("a", RerankStatus.REPAIRED, (2, 1), 1, usage=Usage(1, 1, 1), reason="r1")
    b = RerankTrace("b", RerankStatus.OK, (1,), 0, usage=Usage(2, None, 0), scores=(0.5,))
    trace = chain_trace((a, b), (2,), 3, 1, 4.0)
    assert trace.policy_id == CHAIN_POLICY_PREFIX + "a>b"
    assert trace.status is RerankStatus.REPAIRED and trace.reason == "stage 1 (a): r1"
    assert trace.usage == Usage(3, None, 1) and trace.scores == (0.5,)
    assert (trace.candidate_count, trace.limit, trace.latency_ms) == (3, 1, 4.0)
    assert trace.stages == (a, b) and trace.used_fallback is False


# the one reading of a choice ------------------------------------------------------------------


def test_reranker_specs_reads_every_spelling() -> None:
    obj = ReverseReranker()
    assert reranker_specs(None) is None and reranker_specs("none") is None
    assert reranker_specs("") is None and reranker_specs([]) is None
    assert reranker_specs(["none"]) is None
    assert reranker_specs("mmr") == (RerankerSpec("mmr"),)
    assert reranker_specs(" decision , mmr ") == (RerankerSpec("decision"), RerankerSpec("mmr"))
    got = reranker_specs(
        [
            "decision",
            {"name": "mmr", "options": {"lambda": 0.3}, "on_error": "coarse", "deadline_s": 2},
            obj,
        ]
    )
    assert got == (
        RerankerSpec("decision"),
        RerankerSpec("mmr", {"lambda": 0.3}, OPEN, 2.0),
        RerankerSpec(obj),
    )
    assert got is not None and got[2].label == "ReverseReranker" and got[0].label == "decision"
    assert reranker_specs(obj) == (RerankerSpec(obj),)


@pytest.mark.parametrize(
    ("choice", "message"),
    [
        (["mmr", "none"], "'none' cannot be a stage of a reranker chain"),
        ([{"options": {}}], "a chain stage given as a table needs 'name'"),
        ([{"name": "mmr", "lambda": 1}], "got the keys ['lambda', 'name']"),
        ([{"name": 3}], "a chain stage's name must be a string, got 3"),
        ([{"name": "mmr", "on_error": "ignore"}], "on_error must be 'fail_closed'"),
        ([{"name": "mmr", "deadline_s": 0}], "a chain stage's deadline_s must be"),
        ([{"name": "mmr", "options": 3}], "a chain stage's options must be a table, got 3"),
        ([RerankerSpec.__new__(RerankerSpec)] * 0 + [{"name": "  "}], "cannot be a stage"),
    ],
)
def test_a_bad_stage_says_what_is_wrong(choice: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=None) as info:
        reranker_specs(choice)
    assert message in str(info.value)


def test_options_only_for_a_stage_given_by_name() -> None:
    with pytest.raises(ValidationError, match="options apply only to a reranker given by name"):
        RerankerSpec(ReverseReranker(), {"x": 1})
    with pytest.raises(ValidationError, match="chain_of\\(\\) takes reranker objects"):
        chain_of(["mmr"])
    with pytest.raises(ValidationError, match="needs at least one stage"):
        chain_of([])


# the public entry points ------------------------------------------------------------------------

TEXTS = [
    "alice booked a flight to lisbon",
    "bob adopted a grey cat named pixel",
    "the flight to lisbon leaves at nine",
    "carol runs a marathon in october",
    "lisbon is sunny in may, said alice",
    "the team moved standup to nine thirty",
]


@pytest.fixture
def memory(tmp_path: Path) -> Any:
    with rankseam.open_memory(tmp_path / "chains.sqlite3") as m:
        for i, text in enumerate(TEXTS):
            m.add(text, memory_id=f"m{i}")
        yield m


def test_search_takes_a_chain_of_names_objects_and_tables(memory: Any) -> None:
    plain = memory.search("flight to lisbon", 3, reranker=None)
    result = memory.search(
        "flight to lisbon",
        3,
        reranker=["identity", ReverseReranker(), {"name": "identity", "on_error": "fail_open"}],
    )
    trace = result.trace.rerank
    assert [t.policy_id for t in trace.stages] == [
        "rankseam.rerank.identity.v1",
        "kit.reverse.v1",
        "rankseam.rerank.identity.v1",
    ]
    assert result.hits == tuple(reversed(plain.hits))
    assert result.trace.to_dict()["rerank"]["stages"][1]["usage"] == DOUBLE_USAGE.to_dict()
    again = asyncio.run(memory.asearch("flight to lisbon", 3, reranker="identity,identity"))
    assert again.hits == plain.hits and len(again.trace.rerank.stages) == 2
    with pytest.raises(ValidationError, match="reranker_options apply to a single reranker"):
        memory.search("q", reranker=["identity", "identity"], reranker_options={"x": 1})


def test_the_configuration_and_open_memory_take_a_chain(tmp_path: Path) -> None:
    config = {"search": {"reranker": ["identity", {"name": "identity", "deadline_s": 3}]}}
    with rankseam.open_memory(tmp_path / "c.sqlite3", config=config) as m:
        m.add("one memory about lisbon")
        stages = m.search("lisbon").trace.rerank.stages
        assert [s.policy_id for s in stages] == ["rankseam.rerank.identity.v1"] * 2
    with rankseam.open_memory(
        tmp_path / "d.sqlite3", reranker=[ReverseReranker(), "identity"]
    ) as m:
        m.add("one memory about lisbon")
        assert len(m.search("lisbon").trace.rerank.stages) == 2
    with rankseam.open_memory(tmp_path / "e.sqlite3", reranker=["identity", "identity"]) as m:
        assert m.config.search.reranker == (RerankerSpec("identity"), RerankerSpec("identity"))
    with pytest.raises(ConfigurationError, match="search.reranker: 'none' cannot be a stage"):
        rankseam.open_memory(
            tmp_path / "f.sqlite3", config={"search": {"reranker": ["mmr", "none"]}}
        )
    with pytest.raises(ConfigurationError, match="or a list of them \\(a chain\\)"):
        rankseam.open_memory(tmp_path / "g.sqlite3", reranker=[object()])
    with pytest.raises(ConfigurationError):  # a stage that is not installed, at open time
        rankseam.open_memory(
            tmp_path / "h.sqlite3", config={"search": {"reranker": ["identity", "nope"]}}
        )


def test_open_reranker_takes_a_chain() -> None:
    chain = rankseam.open_reranker(["identity", ReverseReranker()])
    assert chain.name == "identity,ReverseReranker"
    assert chain.policy_id == CHAIN_POLICY_PREFIX + "rankseam.rerank.identity.v1>kit.reverse.v1"
    result = chain.rerank("q", ["a", "b", "c", "d"], 3)
    assert result.positions == (2, 1, 0)
    assert len(result.trace.rerank.stages) == 2
    with pytest.raises(ConfigurationError, match="give each stage of a chain its own"):
        rankseam.open_reranker(["identity", "identity"], options={"x": 1})
    with pytest.raises(ConfigurationError, match="cannot be a stage"):
        rankseam.open_reranker(["identity", "none"])
