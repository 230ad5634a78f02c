"""A real search on a real SQLite store, with mmr picked by name."""

from __future__ import annotations

from pathlib import Path

import pytest

import rankseam
from rankseam.errors import ConfigurationError
from rankseam.testing import invoke_cli

FACTS = [
    ("a1", "Alice booked a flight to Lisbon for the conference in May"),
    ("a2", "Alice booked a flight to Lisbon for the conference in May."),
    ("a3", "alice booked a flight to lisbon for the conference in may!"),
    ("b1", "The conference in Lisbon starts on the twelfth of May"),
    ("c1", "Bob adopted a grey cat named Pixel"),
    ("d1", "Carol runs the Lisbon marathon every October"),
]


@pytest.fixture
def memory(tmp_path: Path) -> rankseam.Memory:
    mem = rankseam.open_memory(tmp_path / "memory.sqlite3", namespace="t")
    for memory_id, text in FACTS:
        mem.add(text, memory_id=memory_id)
    yield mem
    mem.close()


QUERY = "Alice booked a flight to Lisbon"
# The coarse scores of the three restatements are close to 0.9 and the other facts' below 0.3
# (convex fusion): λ = 0.4 is where diversity outweighs that gap here.
LAMBDA = 0.4


def test_mmr_pushes_near_duplicates_out_of_the_top(memory: rankseam.Memory) -> None:
    coarse = memory.search(QUERY, 3, reranker=None)
    top = [h.ref.memory_id for h in coarse]
    assert sorted(top[:3]) == ["a1", "a2", "a3"], top  # the coarse top is all one fact

    result = memory.search(QUERY, 3, reranker="mmr", reranker_options={"lambda": LAMBDA})
    ids = [h.ref.memory_id for h in result]
    assert ids[0] == top[0]
    assert sum(i.startswith("a") for i in ids) == 1, ids  # one restatement, two other facts
    trace = result.trace.to_dict()["rerank"]
    assert trace["policy_id"] == "rankseam.rerank.mmr.v1"
    assert trace["status"] == "ok"
    assert trace["descriptor"]["lambda"] == LAMBDA
    assert all("vector=missing" not in r["detail"] for r in trace["records"])  # vectors came
    for hit in result:  # exact stored hits
        assert hit.text == dict(FACTS)[hit.ref.memory_id]


def test_lambda_one_keeps_the_coarse_order(memory: rankseam.Memory) -> None:
    coarse = [h.ref for h in memory.search(QUERY, 4, reranker=None)]
    mmr = [h.ref for h in memory.search(QUERY, 4, reranker="mmr", reranker_options={"lambda": 1})]
    assert mmr == coarse


def test_configured_as_the_default_reranker(tmp_path: Path) -> None:
    config = {"search": {"reranker": "mmr"}, "rerankers": {"mmr": {"lambda": 0.3}}}
    with rankseam.open_memory(tmp_path / "m.sqlite3", config=config) as mem:
        mem.add("one fact")
        result = mem.search("fact")
        assert result.trace.rerank is not None
        assert result.trace.rerank.descriptor["lambda"] == 0.3


def test_bad_option_fails_at_open(tmp_path: Path) -> None:
    config = {"search": {"reranker": "mmr"}, "rerankers": {"mmr": {"lambda": 2}}}
    with pytest.raises(ConfigurationError, match="lambda"):
        rankseam.open_memory(tmp_path / "m.sqlite3", config=config)


def test_cli_search_with_mmr_options(tmp_path: Path) -> None:
    import json

    db = str(tmp_path / "cli.sqlite3")
    for memory_id, text in FACTS:
        added = invoke_cli(["add", text, "--db", db, "--id", memory_id])
        assert added.exit_code == 0, added.output
    args = ["search", QUERY, "--db", db, "-k", "3", "--rerank", "mmr", "--json", "--trace"]
    result = invoke_cli([*args, "--mmr-lambda", str(LAMBDA)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["trace"]["rerank"]["descriptor"]["lambda"] == LAMBDA
    assert sum(h["memory_id"].startswith("a") for h in out["hits"]) == 1
    bad = invoke_cli([*args, "--mmr-lambda", "1.5"])
    assert bad.exit_code != 0
    assert "lambda" in (bad.output + str(bad.exception))
    # the order the help text shows: every option first, the query last
    first = ["search", "--db", db, "-k", "3", "--rerank", "mmr", "--mmr-lambda", str(LAMBDA)]
    ordered = invoke_cli([*first, "--json", "--trace", QUERY])
    assert ordered.exit_code == 0, ordered.output
    again = json.loads(ordered.output)
    assert again["hits"] == out["hits"] and again["trace"]["query"] == QUERY
