"""Report writers and the latency command's store-free parts (rerank stage, reference MMR)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from click.testing import CliRunner

import rankseam
from rankseam.bench.latency import reference_mmr, time_rerank_stage
from rankseam.bench.policies import PolicySpec
from rankseam.bench.quality import (
    MMR_GATE_DUP_SLOT,
    POLICY_KEYS,
    columns_for,
    mmr_gate,
    score_query,
)
from rankseam.bench.reports import finish_report, mmr_gate_lines, quality_markdown, write_report
from rankseam.cli import cli
from rankseam.compose import ComponentContext, Config

PNG = b"\x89PNG\r\n\x1a\n"
PLOT = importlib.util.find_spec("matplotlib") is not None


def _quality_body() -> dict:
    row = score_query(["D1:1", "D1:1", "x"], ["D1:1", "x", "D1:5"], {"D1:1": 1.0, "D1:5": 1.0})
    flat = {k: row.get(k, 0.0) for k in POLICY_KEYS}
    return {
        "kind": "quality",
        "dataset": {
            "name": "locomo",
            "conversations": 1,
            "turns": 3,
            "observations": 2,
            "dropped_evidence_ids": 1,
            "skipped_queries_no_evidence": 0,
        },
        "configuration": {"limit": 10, "pool": 30, "policies": []},
        "policies": {"none": flat, "identity": flat},
        "category_5": {"none": {**flat, "queries": 1}, "identity": {**flat, "queries": 1}},
        "by_category": {
            "none": {"4": {**flat, "queries": 1}},
            "identity": {"4": {**flat, "queries": 1}},
        },
        "details": {"none": {"queries": 1}, "identity": {"queries": 1}},
        "timing": {"elapsed_s": 1.0, "ingest_s": 0.5},
    }


def test_score_query_hand_computed():
    row = score_query(["D1:1", "D1:1", "x"], ["D1:1", "x", "D1:5"], {"D1:1": 1.0, "D1:5": 1.0})
    assert row["recall@5"] == 0.5
    assert row["dup_slot@5"] == pytest.approx(1 / 3)
    assert row["pool_recall"] == 1.0  # the ceiling is over the whole coarse pool
    assert row["mrr"] == 1.0


def test_write_quality_report(tmp_path):
    report = finish_report(_quality_body(), command={"command": "rankseam bench quality"})
    paths = write_report(report, tmp_path / "out", plot=PLOT)
    data = json.loads(paths["json"].read_text())
    assert data["schema"] == "rankseam.bench/1"
    assert data["environment"]["python"] and data["environment"]["cpu_count"]
    assert data["configuration"]["cli"]["command"] == "rankseam bench quality"
    for flat in data["policies"].values():
        assert tuple(flat) == POLICY_KEYS
    if PLOT:
        assert paths["plot"].read_bytes().startswith(PNG)
    else:
        assert "plot" not in paths
    md = paths["markdown"].read_text()
    assert "| policy | Recall@5 | Recall@10 | nDCG@10 | MRR | dup-slot@5 |" in md
    assert "Category 5" in md and "4 single-hop" in md
    assert md == quality_markdown(data)


@pytest.mark.parametrize(
    ("rate", "verdict"),
    [(0.140448, "MMR not advised"), (0.2, "MMR not advised"), (0.2000001, "MMR advised")],
)
def test_quality_report_states_hotmems_mmr_gate(tmp_path, rate, verdict):
    # the gate is read off the column without a reranker; "above 20 %" is strict
    assert MMR_GATE_DUP_SLOT == 0.2
    columns = columns_for([PolicySpec(None), PolicySpec("mmr", {"lambda": 0.5})])
    headline = {"none": {"dup_slot@5": rate}, "mmr:lambda=0.5": {"dup_slot@5": 0.05}}
    gate = mmr_gate(columns, headline)
    advised = verdict == "MMR advised"
    assert gate == {
        "metric": "dup_slot@5",
        "threshold": 0.2,
        "coarse": {"none": {"dup_slot@5": rate, "mmr_advised": advised}},
    }
    body = {**_quality_body(), "mmr_gate": gate}
    paths = write_report(finish_report(body, command={}), tmp_path / "out", plot=False)
    assert json.loads(paths["json"].read_text())["mmr_gate"] == gate
    line = f"coarse dup-slot@5 {rate:.3f} vs HotMem's 20% gate: {verdict}."
    assert line in paths["markdown"].read_text().splitlines()


def test_mmr_gate_per_embedder_and_without_a_coarse_column():
    columns = columns_for([PolicySpec(None), PolicySpec("mmr")], embedders=["a", "b"])
    headline = {c.label: {"dup_slot@5": 0.3 if c.embedder == "a" else 0.1} for c in columns}
    gate = mmr_gate(columns, headline)
    assert gate["coarse"] == {
        "a/none": {"dup_slot@5": 0.3, "mmr_advised": True},
        "b/none": {"dup_slot@5": 0.1, "mmr_advised": False},
    }
    assert mmr_gate_lines({"mmr_gate": gate}) == [
        "a/none: coarse dup-slot@5 0.300 vs HotMem's 20% gate: MMR advised.",
        "b/none: coarse dup-slot@5 0.100 vs HotMem's 20% gate: MMR not advised.",
    ]
    none = mmr_gate(columns_for([PolicySpec("mmr")]), {"mmr": {"dup_slot@5": 0.5}})
    assert none["coarse"] == {}
    assert mmr_gate_lines({"mmr_gate": none}) == [
        "HotMem's 20% MMR gate: no coarse column in this run (add `none` to --rerank)."
    ]


def test_rerank_stage_times_disabled_path_and_identity():
    identity = ComponentContext(Config()).reranker("identity")
    out = time_rerank_stage({"none": None, "identity": identity}, counts=(20,), repeats=5, warmup=1)
    assert set(out) == {"none", "identity"}
    assert out["identity"]["20"]["runs"] == 5
    assert out["identity"]["20"]["ratio_to_identity"] == 1.0
    assert out["none"]["20"]["p50_ms"] <= out["none"]["20"]["p95_ms"]
    # the reranker's own call (the trace's latency) is part of its stage; none makes no call
    call = out["identity"]["20"]
    assert 0 < call["call_p50_ms"] <= call["p50_ms"] and call["call_p50_ms"] <= call["call_p95_ms"]
    assert "call_p50_ms" not in out["none"]["20"]


def test_latency_command_without_store_sizes(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            "latency",
            "--quick",
            "--sizes",
            "",
            "--repeats",
            "3",
            "--no-progress",
            "--plot" if PLOT else "--no-plot",
            "--out",
            str(tmp_path / "lat"),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "lat" / "report.json").read_text())
    assert {"none", "identity"} <= set(data["rerank_stage"])
    assert set(data["rerank_stage"]["identity"]) == {"20", "50"}
    assert "stage@20 identity/none" in data["disabled_path"]
    assert (tmp_path / "lat" / "report.png").exists() == PLOT
    assert "Rerank stage alone" in (tmp_path / "lat" / "report.md").read_text()


def test_latency_whole_search_policies_and_their_calls(tmp_path):
    args = ["bench", "latency", "--sizes", "120", "--repeats", "2", "--queries", "4"]
    args += ["--no-progress", "--no-plot", "--out", str(tmp_path / "lat")]
    result = CliRunner().invoke(cli, [*args, "--search-rerank", "none,identity"])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "lat" / "report.json").read_text())
    row = data["whole_search"]["120"]
    assert data["configuration"]["search_policies"] == ["none", "identity"]
    assert row["none"]["runs"] == row["identity"]["runs"] == 4
    assert "call_p50_ms" not in row["none"]
    assert 0 < row["identity"]["call_p50_ms"] <= row["identity"]["p50_ms"]
    assert "call p50 ms" in (tmp_path / "lat" / "report.md").read_text()


def test_latency_reports_cpu_time_per_search_next_to_wall_time(tmp_path):
    args = ["bench", "latency", "--sizes", "120", "--repeats", "2", "--queries", "5"]
    args += ["--corpus", "synthetic", "--no-progress", "--no-plot", "--out", str(tmp_path / "lat")]
    result = CliRunner().invoke(cli, [*args, "--search-rerank", "none,identity"])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "lat" / "report.json").read_text())
    row = data["whole_search"]["120"]
    assert data["configuration"]["blas_threads"] == 1  # idle BLAS threads would spin
    # the default search, identity and the floor: wall and CPU time of the same searches
    for name in ("none", "identity", "floor"):
        m = row[name]
        assert m["runs"] == 5
        assert {"p50_ms", "p95_ms", "cpu_p50_ms", "cpu_p95_ms", "cpu_mean_ms"} <= set(m)
        assert 0 < m["cpu_p50_ms"] <= m["cpu_p95_ms"]
        assert m["cpu_ratio_to_none"] == round(m["cpu_p50_ms"] / row["none"]["cpu_p50_ms"], 3)
    assert row["none"]["cpu_ratio_to_none"] == 1.0
    cpu_to_floor = round(row["none"]["cpu_p50_ms"] / row["floor"]["cpu_p50_ms"], 3)
    assert row["cpu_none_to_floor"] == cpu_to_floor
    assert row["none_to_floor"] == round(row["none"]["p50_ms"] / row["floor"]["p50_ms"], 3)
    assert {k: v for k, v in data["floor_ratios"].items() if "floor" in k} == {
        "search@120 none/floor": row["none_to_floor"],
        "search@120 none/floor cpu": cpu_to_floor,
    }
    cpu_identity = row["identity"]["cpu_ratio_to_none"]
    assert data["disabled_path"]["search@120 identity/none cpu"] == cpu_identity
    assert data["disabled_path"]["search@120 identity/none"] == row["identity"]["ratio_to_none"]
    md = (tmp_path / "lat" / "report.md").read_text()
    assert "CPU p50 ms" in md and "none / floor CPU" in md
    assert "search@120 none/floor cpu: " in md


def test_latency_times_bm25s_and_the_default_blas_pool(tmp_path):
    """The bm25s reference in the same interleaved run (where bm25s is installed), and with
    --default-pool the default search and the references again with numpy's own BLAS pool."""
    from rankseam.bench.whole_search import DEFAULT_POOL, bm25s_missing

    args = ["bench", "latency", "--sizes", "120", "--repeats", "2", "--queries", "5"]
    args += ["--corpus", "synthetic", "--no-progress", "--no-plot", "--out", str(tmp_path / "lat")]
    result = CliRunner().invoke(cli, [*args, "--search-rerank", "none", "--default-pool"])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "lat" / "report.json").read_text())
    row = data["whole_search"]["120"]
    assert data["configuration"]["default_pool"] is True
    references = ["floor"] if bm25s_missing() else ["floor", "bm25s"]
    for name in ["none", *references]:
        pinned, pooled = row[name], row[f"{name}{DEFAULT_POOL}"]
        assert pinned["runs"] == pooled["runs"] == 5
        assert 0 < pooled["cpu_p50_ms"] <= pooled["cpu_p95_ms"]
        divisor = row[f"none{DEFAULT_POOL}"]["cpu_p50_ms"]
        assert pooled["cpu_ratio_to_none"] == round(pooled["cpu_p50_ms"] / divisor, 3)
    if "bm25s" in references:
        to_bm25s = round(row["none"]["cpu_p50_ms"] / row["bm25s"]["cpu_p50_ms"], 3)
        assert row["cpu_none_to_bm25s"] == to_bm25s
        assert data["floor_ratios"]["search@120 none/bm25s cpu"] == to_bm25s
    md = (tmp_path / "lat" / "report.md").read_text()
    assert f"none{DEFAULT_POOL}" in md


def test_the_bm25s_reference_finds_what_bm25_finds(tmp_path):
    """bm25s + numpy, as the bench runs it: a memory that alone holds the question's rare word
    comes first, and the answer is (row key, text) read from the store."""
    pytest.importorskip("bm25s")
    from rankseam.bench.whole_search import Bm25sSearch

    path = str(tmp_path / "m.sqlite3")
    memory = rankseam.open_memory(path)
    try:
        for i in range(40):
            memory.add(f"an ordinary note number {i} about the weather")
        memory.add("the walrus sleeps on the ice floe")
        reference = Bm25sSearch(path, memory.embedder)
        try:
            hits = reference.search("where does the walrus sleep?", 20, 5)
            assert reference.lexical("zzzz qqqq", 20) == []
        finally:
            reference.close()
    finally:
        memory.close()
    assert hits[0][1] == "the walrus sleeps on the ice floe"
    assert len(hits) == 5


def test_latency_module_keeps_its_import_names():
    # the whole-search and rerank-stage parts live in their own modules; scripts that import
    # them from rankseam.bench.latency (the PostgreSQL bench) keep working
    from rankseam.bench import latency, rerank_stage, whole_search

    assert latency.FloorSearch is whole_search.FloorSearch
    assert latency.corpus_queries is whole_search.corpus_queries
    assert latency.corpus_texts is whole_search.corpus_texts
    assert latency.prepared_store is whole_search.prepared_store
    assert latency.time_rerank_stage is rerank_stage.time_rerank_stage
    assert latency.reference_mmr is rerank_stage.reference_mmr


def test_latency_times_search_variants_side_by_side(tmp_path):
    args = ["bench", "latency", "--sizes", "120", "--repeats", "2", "--queries", "4"]
    args += ["--no-progress", "--no-plot", "--out", str(tmp_path / "lat")]
    policies = "none,none@fusion=rrf,identity@fusion=rrf"
    result = CliRunner().invoke(cli, [*args, "--search-rerank", policies])
    assert result.exit_code == 0, result.output
    row = json.loads((tmp_path / "lat" / "report.json").read_text())["whole_search"]["120"]
    assert row["none"]["runs"] == row["none@fusion=rrf"]["runs"] == 4
    assert row["identity@fusion=rrf"]["call_p50_ms"] > 0


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        ("none,none@fusion=nope", "search.fusion must be one of"),
        ("none,nope", "no reranker named 'nope' is installed"),
        ("none,decision", "needs a decision backend"),
    ],
)
def test_latency_refuses_a_whole_search_policy_it_cannot_build(tmp_path, policies, message):
    from rankseam.plugins import get_registry

    if "decision" in policies and "decision" not in get_registry().names("reranker"):
        pytest.skip("the decision plugin (rankseam-decision) is not installed")
    args = ["bench", "latency", "--sizes", "120", "--search-rerank", policies]
    result = CliRunner().invoke(cli, [*args, "--no-plot", "--out", str(tmp_path / "lat")])
    assert result.exit_code == 1
    assert message in result.output
    assert "@" in policies or "choose from" in result.output
    assert not (tmp_path / "lat").exists()


def test_reference_mmr_agrees_with_langchain():
    pytest.importorskip("langchain_core", reason="install rankseam[bench-reference] to compare")
    from rankseam.plugins import get_registry

    if "mmr" not in get_registry().names("reranker"):
        pytest.skip("the mmr plugin (rankseam-mmr) is not installed")
    mmr = ComponentContext(Config()).reranker("mmr", {"lambda": 0.7, "relevance": "coarse"})
    out = reference_mmr(mmr, lam=0.7, counts=(20,), trials=5, repeats=2)
    assert out["by_candidates"]["20"]["agreement"] == 1.0
