"""Every first-party plugin installed together: listed, assembled, and searching a real store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import rankseam
from rankseam.cli import cli
from rankseam.plugins import get_plugins, reset_plugins

FIRST_PARTY = {
    "mmr": {"reranker": ["mmr"]},
    "decision": {"reranker": ["decision"]},
    "listwise": {"reranker": ["listwise"], "generation_backend": ["local"]},
    "openai": {"decision_backend": ["openai"], "generation_backend": ["openai"]},
    # the store only: the host's lexical, vector and importance channels run on it
    "postgres": {"store": ["postgres"]},
    # integrations: they add classes for LangChain / LlamaIndex and a command; the LangChain
    # one also registers an embedder (a LangChain Embeddings object as rankseam's embedder)
    "langchain": {"embedder": ["langchain"]},
    "llamaindex": {},
    "mcp": {},
}

RERANKERS = {
    "identity": {},
    "mmr": {"lambda": 0.5},
    "decision": {"backend": "heuristic"},
    "listwise": {"backend": "local"},
}


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory):
    reset_plugins()
    db = tmp_path_factory.mktemp("store") / "all.sqlite3"
    with rankseam.open_memory(db) as mem:
        demo = Path(rankseam.__file__).parent / "demo"
        records = [json.loads(line) for f in sorted(demo.glob("*.jsonl")) for line in f.open()]
        mem.ingest(records)
        yield mem


def test_every_first_party_plugin_is_listed_ok() -> None:
    reset_plugins()
    listed = {p.name: p for p in get_plugins()}
    for name, components in FIRST_PARTY.items():
        assert listed[name].status == "ok", listed[name]
        for kind, names in components.items():
            assert set(names) <= set(listed[name].components.get(kind, [])), (name, kind)
        assert set(listed[name].components) <= set(components) | {"command"}, (
            name,
            listed[name].components,
        )


def assert_reselects(memory, result, coarse) -> None:
    """The reranker made a selection of its own (no fallback) of exact stored memories."""
    rerank = result.trace.rerank
    assert rerank is not None
    assert rerank.status.value == "ok" and not rerank.used_fallback, (
        f"{rerank.policy_id} did not select on its own: {rerank.status.value}, {rerank.reason}"
    )
    assert rerank.discarded_rank_count == 0 and rerank.over_limit_count == 0
    pool = {c.ref: c for c in result.trace.coarse}
    assert 1 <= len(result.hits) <= result.trace.limit
    for hit in result.hits:
        assert hit.ref in pool
        assert memory.get(hit.ref).text == hit.text  # the exact cited revision
    assert [c.ref for c in coarse.trace.coarse] == list(pool)  # same pool, reranker aside


@pytest.mark.parametrize("name", sorted(RERANKERS))
def test_each_reranker_reselects_exact_stored_memories(memory, name: str) -> None:
    query = "what does the user's cat eat"
    coarse = memory.search(query, limit=5, reranker=None)
    result = memory.search(query, limit=5, reranker=name, reranker_options=RERANKERS[name])
    assert_reselects(memory, result, coarse)
    rerank = result.trace.rerank
    assert rerank.policy_id.endswith(".v1")
    json.dumps(result.to_dict())
    if name == "decision":
        assert rerank.usage.calls == len(rerank.records) >= 1
    if name == "listwise":
        assert rerank.usage.calls == 1


class AlwaysFallsBack:
    policy_id = "test.always-falls-back.v1"

    async def rerank(self, query, candidates, limit, /):
        return rankseam.RerankDecision(tuple(range(1, limit + 1)), used_fallback=True)


def test_the_reselection_check_rejects_a_reranker_that_always_falls_back(memory) -> None:
    query = "what does the user's cat eat"
    coarse = memory.search(query, limit=5, reranker=None)
    result = memory.search(query, limit=5, reranker=AlwaysFallsBack())
    with pytest.raises(AssertionError, match="did not select on its own"):
        assert_reselects(memory, result, coarse)


def test_no_reranker_is_byte_identical_to_the_coarse_order(memory) -> None:
    """Two independently produced results: the search with no reranker, and the coarse pool
    of a second Memory on the same store passed through the seam by the identity reranker
    (which selects 1..limit); their hits serialise to the same bytes."""
    plain = memory.search("weekend plans", limit=8, reranker=None)
    assert plain.trace.rerank is None and len(plain.hits) == 8
    with rankseam.open_memory(memory.path) as other:
        through_seam = other.search("weekend plans", limit=8, reranker="identity")
        wide = other.search("weekend plans", limit=20, reranker=None)
    assert through_seam.trace.rerank.status.value == "ok"
    as_bytes = lambda result: json.dumps(  # noqa: E731
        [h.to_dict() for h in result.hits], sort_keys=True
    ).encode()
    assert as_bytes(plain) == as_bytes(through_seam)
    assert [h.to_dict() for h in wide.hits][:8] == [h.to_dict() for h in plain.hits]


def test_cli_generic_component_options(memory) -> None:
    out = CliRunner().invoke(
        cli,
        [
            "search",
            "cat food",
            "--db",
            memory.path,
            "--rerank",
            "mmr",
            "--mmr-lambda",
            "0.3",
            "--json",
            "--trace",
        ],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["trace"]["rerank"]["descriptor"]["lambda"] == 0.3
    bad = CliRunner().invoke(
        cli, ["search", "cat food", "--db", memory.path, "--rerank", "mmr", "--mmr-lambda", "7"]
    )
    assert bad.exit_code != 0 and "lambda" in bad.output
