"""The ``learned`` reranker in real searches on a real SQLite store."""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

import rankseam
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.plugin.rerankers import MAX_POOL, make_candidates
from rankseam.types import Hit, MemoryRef
from rankseam_learned.features import FEATURES
from rankseam_learned.model import load
from rankseam_learned.pools import PoolRecorder
from rankseam_learned.reranker import LearnedReranker, blended_order, spread_sources

#: (id, thread, position, derived_from, text): two conversations and one observation (o1,
#: derived from s1-2, restates it).
MEMORIES = [
    ("s1-1", "s1", 1, None, "Did you hear what Alice cooked for the party?"),
    ("s1-2", "s1", 2, None, "Lasagna! She cooked lasagna for the whole party."),
    ("s1-3", "s1", 3, None, "Nice, I love it."),
    ("o1", None, None, "s1-2", "Alice cooked lasagna for the party."),
    ("o2", None, None, "s1-2", "Alice cooked lasagna for the party, a big one."),
    ("s2-1", "s2", 1, None, "Bob went hiking in the Alps with Alice last summer."),
    ("s2-2", "s2", 2, None, "Party party party party party at the weekend."),
    ("s2-3", "s2", 3, None, "Carol cooked soup."),
]
QUERY = "What did Alice cook for the party?"


def open_store(tmp_path: Path, model: Path | str, **config: object) -> rankseam.Memory:
    mem = rankseam.open_memory(
        tmp_path / "memory.sqlite3",
        namespace="t",
        config={"rerankers": {"learned": {"model": str(model)}}, **config},
    )
    for memory_id, thread, position, source, text in MEMORIES:
        mem.add(text, memory_id=memory_id, thread=thread, position=position, derived_from=source)
    return mem


@pytest.fixture
def memory(tmp_path: Path, model_file: Path) -> rankseam.Memory:
    mem = open_store(tmp_path, model_file)
    yield mem
    mem.close()


def test_orders_the_pool_by_the_model_probability(
    memory: rankseam.Memory, model_file: Path
) -> None:
    recorder = PoolRecorder()
    coarse = memory.search(QUERY, 8, reranker=recorder, distinct_sources=False)
    (pool,) = recorder.pools
    p = load(model_file).predict_proba(pool.rows)[:, 1]
    expected = [pool.memory_ids[i] for i in np.lexsort((np.arange(len(p)), -p))]

    result = memory.search(
        QUERY,
        8,
        reranker="learned",
        reranker_options={"distinct_sources": False},
        distinct_sources=False,
    )
    assert [h.ref.memory_id for h in result] == expected
    assert [h.ref.memory_id for h in result] != [h.ref.memory_id for h in coarse]
    assert [h.rerank_score for h in result] == sorted(p, reverse=True)
    trace = result.trace.to_dict()["rerank"]
    assert trace["status"] == "ok"
    assert trace["records"][0]["detail"] == f"p={max(p):.6f}"
    assert [r["confidence"] for r in trace["records"]] == [
        round(float(x), 6) for x in sorted(p, reverse=True)
    ]


def test_the_pool_rows_carry_the_neighbourhood(memory: rankseam.Memory) -> None:
    recorder = PoolRecorder()
    memory.search(QUERY, 8, reranker=recorder, distinct_sources=False)
    (pool,) = recorder.pools

    rows = dict(zip(pool.memory_ids, pool.rows, strict=True))
    col = FEATURES.index
    assert rows["s1-2"][col("prev_in_pool")] == 1.0  # s1-1 sits in the pool
    assert rows["s1-2"][col("derived_in_pool")] == 2.0  # o1 and o2
    assert rows["o1"][col("source_in_pool")] == 1.0
    assert rows["s1-3"][col("prev_coverage")] > 0  # its previous turn holds query terms
    # o2 repeats o1's six words and adds three: Jaccard 6 / 9
    assert rows["o1"][col("jaccard_max")] == pytest.approx(6 / 9)
    assert pool.groups[pool.memory_ids.index("o2")] == "s1-2"


def test_source_aware_rule_keeps_one_memory_of_a_source_in_the_top(
    memory: rankseam.Memory,
) -> None:
    def top(distinct: bool) -> list[str]:
        result = memory.search(
            QUERY, 3, reranker="learned", reranker_options={"distinct_sources": distinct}
        )
        return [h.ref.memory_id for h in result]

    group = {"s1-2", "o1", "o2"}
    assert len(group & set(top(False))) >= 2, top(False)
    assert len(group & set(top(True))) == 1, top(True)


def test_blended_order_runs_from_the_coarse_order_to_the_models() -> None:
    rng = np.random.default_rng(11)
    for n in (1, 2, 7, 30):
        p = rng.random(n).round(1)  # rounded: ties in p, broken by the coarse order
        by_p = sorted(range(n), key=lambda i: (-p[i], i))
        assert blended_order(p, 1.0) == by_p
        assert blended_order(p, 0.0) == list(range(n))
        for weight in (0.2, 0.5, 0.8):
            order = blended_order(p, weight)
            assert sorted(order) == list(range(n))
            place = {c: k for k, c in enumerate(order)}
            # a candidate above another in both orders stays above it in every blend
            for a in range(n):
                for b in range(a + 1, n):
                    if by_p.index(a) < by_p.index(b):
                        assert place[a] < place[b]
    # the model's first (coarse last): still last at 0.2, second at 0.5, first at 0.9
    p = np.array([0.4, 0.3, 0.2, 0.9])
    assert blended_order(p, 0.2) == [0, 1, 2, 3]
    assert blended_order(p, 0.5)[:2] == [0, 3]
    assert blended_order(p, 0.9)[0] == 3


def test_spread_sources_moves_repeats_below_the_first_of_each_group() -> None:
    groups = ["a", "a", "b", "a", "c", "b"]
    assert spread_sources([0, 1, 2, 3, 4, 5], groups) == [0, 2, 4, 1, 3, 5]
    assert spread_sources([5, 4, 3], groups) == [5, 4, 3]


def test_policy_id_and_descriptor_name_the_model(memory: rankseam.Memory, model_file: Path) -> None:
    sha = load(model_file).sha256
    trace = memory.search(QUERY, 3, reranker="learned").trace.to_dict()["rerank"]
    assert trace["policy_id"] == f"rankseam.rerank.learned.v1+sha256:{sha[:16]}"
    descriptor = trace["descriptor"]
    assert descriptor["model_sha256"] == sha
    assert descriptor["feature_set"] == "pool-v1"
    assert descriptor["kind"] == "gradient_boosting"
    json.dumps(trace)


def test_another_model_is_another_policy(
    tmp_path: Path, model_file: Path, logistic_model_file: Path
) -> None:
    other = logistic_model_file
    mem = open_store(tmp_path, other)
    try:
        trace = mem.search(QUERY, 3, reranker="learned").trace.to_dict()["rerank"]
    finally:
        mem.close()
    assert trace["descriptor"]["kind"] == "logistic"
    assert trace["policy_id"].endswith(load(other).sha256[:16])
    assert load(other).sha256 != load(model_file).sha256


def test_a_hostile_model_fails_at_assembly_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "model.json"
    bad.write_bytes(b"\x80\x04K\x01.")  # a pickle
    with pytest.raises(ConfigurationError, match="is a pickle") as info:
        rankseam.open_memory(
            tmp_path / "m.sqlite3",
            config={
                "search": {"reranker": "learned"},
                "rerankers": {"learned": {"model": str(bad)}},
            },
        )
    assert str(bad) in str(info.value)


def test_no_installed_model_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = metadata.entry_points

    def without_models(**kwargs: object) -> object:
        if kwargs.get("group") == "rankseam.learned_models":
            return metadata.EntryPoints(())
        return real(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(metadata, "entry_points", without_models)
    mem = rankseam.open_memory(tmp_path / "m.sqlite3")
    try:
        mem.add("anything at all")
        with pytest.raises(ConfigurationError, match="none is installed") as info:
            mem.search("anything", reranker="learned")
    finally:
        mem.close()
    assert "rankseam-learned-locomo" in str(info.value)
    assert "model = " in str(info.value)


def test_an_installed_model_is_found_by_name(
    tmp_path: Path, model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a model distribution as pip installs one: a dist-info with the entry point, a module
    site = tmp_path / "site"
    info = site / "tiny_model-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-model\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[rankseam.learned_models]\ntiny-test-model = tiny_model_pkg:path\n"
    )
    (site / "tiny_model_pkg.py").write_text(f"def path():\n    return {str(model_file)!r}\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "tiny_model_pkg", raising=False)
    mem = open_store(tmp_path, "tiny-test-model")
    try:
        trace = mem.search(QUERY, 3, reranker="learned").trace.to_dict()["rerank"]
    finally:
        mem.close()
    assert trace["descriptor"]["model"] == "tiny-test-model"
    assert trace["descriptor"]["model_sha256"] == load(model_file).sha256


def test_an_unknown_model_name_lists_the_installed_ones(tmp_path: Path) -> None:
    mem = open_store(tmp_path, "no-such-model")
    try:
        with pytest.raises(ConfigurationError, match="no installed learned model is named"):
            mem.search(QUERY, reranker="learned")
    finally:
        mem.close()


def test_a_pool_over_the_host_bound_is_refused(model_file: Path) -> None:
    reranker = LearnedReranker.from_options({"model": str(model_file)})
    pool = [Hit(MemoryRef("t", f"m{i}", 1), f"text {i}", 1.0) for i in range(MAX_POOL + 1)]
    with pytest.raises(ValidationError, match=f"at most {MAX_POOL} candidates"):
        reranker.select("text", make_candidates(pool), 10)
    assert len(reranker.select("text", make_candidates(pool[:MAX_POOL]), 10).selected_ranks) == 10
