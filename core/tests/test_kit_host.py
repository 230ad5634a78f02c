"""The kit's host helpers (``rankseam.testing``): what a plugin's tests use instead of internals.

Each helper is checked against the host it stands for: a component built by the kit is the one
an assembly builds, a reranker run by the kit goes through the seam's rules, a listing is what
``rankseam plugins`` reports.
"""

from __future__ import annotations

import asyncio
import json
import types
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import rankseam
import rankseam.testing as kit
from rankseam.errors import ConfigurationError, RerankError, ValidationError
from rankseam.plugin.rerankers import MAX_POOL
from rankseam.types import Candidate, RerankDecision, RerankStatus


class Answer:
    """A reranker that answers what it is told, and records what it saw."""

    policy_id = "test.answer.v1"

    def __init__(self, ranks: Sequence[object], *, needs_embeddings: bool = False) -> None:
        self.ranks = tuple(ranks)
        self.needs_embeddings = needs_embeddings
        self.seen: list[tuple[Candidate, ...]] = []

    async def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> Any:
        self.seen.append(tuple(candidates))
        return RerankDecision(self.ranks)  # type: ignore[arg-type]


class Broken:
    policy_id = "test.broken.v1"

    def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> Any:
        raise RuntimeError("model crashed")


def _plugin(**hooks: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(**{name: rankseam.hookimpl(fn) for name, fn in hooks.items()})


# -- build_component --------------------------------------------------------------------------


def test_build_component_builds_what_an_assembly_builds() -> None:
    embedder = kit.build_component("embedder", "hashed", {"dimensions": 64})
    assert embedder.descriptor.dimensions == 64
    configured = kit.build_component(
        "embedder", "hashed", config={"embedders": {"hashed": {"dimensions": 32}}}
    )
    assert configured.descriptor.dimensions == 32
    assert kit.build_component("reranker", "identity").policy_id.startswith("rankseam.rerank.")


def test_build_component_applies_the_hosts_checks() -> None:
    with pytest.raises(ConfigurationError, match="no reranker named 'nope' is installed"):
        kit.build_component("reranker", "nope")
    with pytest.raises(ValueError, match="kind must be one of"):
        kit.build_component("rerankers", "identity")

    def register_rerankers(register: Any) -> None:
        register("shapeless", lambda options, context: object(), summary="not a reranker")

    with kit.installed_plugin(_plugin(register_rerankers=register_rerankers), name="shapeless"):
        with pytest.raises(ConfigurationError, match="does not implement the protocol"):
            kit.build_component("reranker", "shapeless")


def test_factory_context_hands_each_role_its_handle() -> None:
    context = kit.factory_context({"decision_backends": {"heuristic": {}}})
    from rankseam.plugin.decision import RERANK_ROLE, WRITE_GATE_ROLE, unwrap

    closed = context.decision_backend("heuristic", RERANK_ROLE)
    opened = context.decision_backend("heuristic", WRITE_GATE_ROLE)
    assert opened is not closed and unwrap(opened) is closed  # one instance, two handles


# -- run_reranker -----------------------------------------------------------------------------


def test_run_reranker_goes_through_the_seams_rules() -> None:
    hits, _ = kit.synthetic_pool(5)
    run = kit.run_reranker(Answer([3, 3, 9, "1", 1]), "q", hits, 3)
    assert run.positions == (2, 0)  # the repeat, the out-of-range and the string are discarded
    assert run.hits == (hits[2], hits[0])
    assert run.trace is not None and run.trace.status is RerankStatus.REPAIRED
    assert run.trace.discarded_rank_count == 3
    nothing = kit.run_reranker(Answer([]), "q", hits, 2)
    assert nothing.trace is not None and nothing.trace.status is RerankStatus.FELL_BACK
    assert nothing.hits == hits[:2]


def test_run_reranker_over_texts_and_the_failure_policy() -> None:
    run = kit.run_reranker(Answer([2]), "q", ["first", "second"])
    assert [h.text for h in run.hits] == ["second"] and run.positions == (1,)
    assert run.hits[0].ref.namespace == kit.KIT_NAMESPACE
    with pytest.raises(RerankError, match="model crashed"):
        kit.run_reranker(Broken(), "q", ["a", "b"])
    degraded = kit.run_reranker(Broken(), "q", ["a", "b"], on_error="coarse")
    assert degraded.trace is not None and degraded.trace.status is RerankStatus.DEGRADED
    assert [h.text for h in degraded.hits] == ["a", "b"]
    with pytest.raises(ValidationError):
        kit.run_reranker(Answer([1]), "q", ["x"] * (MAX_POOL + 1))


def test_vectors_reach_only_a_reranker_that_asks_for_them() -> None:
    hits, vectors = kit.synthetic_pool(4)
    asks = Answer([1], needs_embeddings=True)
    kit.run_reranker(asks, "q", hits, vectors=vectors)
    seen = asks.seen[0]
    assert all(np.array_equal(c.embedding, v) for c, v in zip(seen, vectors, strict=True))
    assert seen[0].ref == hits[0].ref and seen[0].score == hits[0].score
    silent = Answer([1])
    kit.run_reranker(silent, "q", hits, vectors=vectors)
    assert all(c.embedding is None for c in silent.seen[0])


def test_an_installed_reranker_by_name_and_the_async_form() -> None:
    async def main() -> Any:
        with pytest.raises(RuntimeError, match="await arun_reranker"):
            kit.run_reranker("identity", "q", ["a"])
        return await kit.arun_reranker("identity", "q", ["a", "b", "c"], 2)

    run = asyncio.run(main())
    assert [h.text for h in run.hits] == ["a", "b"]
    assert run.trace is not None and run.trace.status is RerankStatus.OK


def test_an_empty_pool_never_calls_the_reranker() -> None:
    never = Answer([1])
    run = kit.run_reranker(never, "q", [])
    assert run.hits == () and run.trace is None and never.seen == []


# -- assert_listed, installed_plugin, invoke_cli ----------------------------------------------


def test_assert_listed_and_installed_plugin() -> None:
    def register_rerankers(register: Any) -> None:
        register("answer", lambda options, context: Answer([1]), summary="answers rank 1")

    with pytest.raises(AssertionError, match="no reranker named 'answer'"):
        kit.assert_listed("reranker", "answer")
    with kit.installed_plugin(_plugin(register_rerankers=register_rerankers), name="answers"):
        listing = kit.assert_listed("reranker", "answer", plugin="answers")
        assert listing == kit.Listing(
            kind="reranker",
            name="answer",
            plugin="answers",
            summary="answers rank 1",
            distribution=None,
            version=None,
            components={"reranker": ("answer",)},
        )
        identity = "rankseam.default_plugins.identity"
        with pytest.raises(AssertionError, match=f"registered by 'answers', not '{identity}'"):
            kit.assert_listed("reranker", "answer", plugin=identity)
        with pytest.raises(AssertionError, match="no plugin named 'other'"):
            kit.assert_listed("reranker", "identity", plugin="other")
        plugins = {p["name"]: p for p in json.loads(kit.invoke_cli(["plugins"]).output)}
        assert plugins["answers"]["status"] == "ok"
        assert plugins["answers"]["components"] == {"reranker": ["answer"]}
    with pytest.raises(AssertionError, match="no reranker named 'answer'"):
        kit.assert_listed("reranker", "answer")  # gone after the block


def test_a_broken_installed_plugin_is_isolated_and_assert_listed_says_why() -> None:
    def register_rerankers(register: Any) -> None:
        raise RuntimeError("needs a GPU")

    with kit.installed_plugin(_plugin(register_rerankers=register_rerankers), name="gpu"):
        with pytest.raises(
            AssertionError, match="plugin 'gpu' is error: RuntimeError: needs a GPU"
        ):
            kit.assert_listed("reranker", "identity", plugin="gpu")
        assert kit.build_component("reranker", "identity") is not None  # the host still works


def test_invoke_cli_runs_the_command_with_its_exit_statuses(tmp_path: Any) -> None:
    db = str(tmp_path / "m.sqlite3")
    added = kit.invoke_cli(["add", "the cat sat", "--db", db, "--id", "c1"])
    assert added.exit_code == 0, added.output
    found = kit.invoke_cli(["search", "cat", "--json"], env={"RANKSEAM_DB": db})
    assert json.loads(found.output)["hits"][0]["memory_id"] == "c1"
    assert kit.invoke_cli(["search"]).exit_code == 2  # a usage error
    with pytest.raises(TypeError):
        kit.invoke_cli("search cat")  # type: ignore[arg-type]
