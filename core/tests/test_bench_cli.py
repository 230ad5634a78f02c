"""`rankseam bench quality` end to end on tiny datasets made here (real stores in tmp dirs)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from click.testing import CliRunner
from test_bench_datasets import _tiny_beir, _tiny_locomo

from rankseam.bench.quality import POLICY_KEYS
from rankseam.cli import cli

PNG = b"\x89PNG\r\n\x1a\n"
#: report.png needs the bench extra (matplotlib); without it the commands run with --no-plot.
PLOT = importlib.util.find_spec("matplotlib") is not None
PLOT_FLAG = "--plot" if PLOT else "--no-plot"


def _run(*args: str) -> None:
    result = CliRunner().invoke(cli, ["bench", "quality", "--no-progress", PLOT_FLAG, *args])
    assert result.exit_code == 0, result.output


def test_quality_on_tiny_locomo_writes_json_png_markdown(tmp_path):
    data = _tiny_locomo(tmp_path / "l.json")
    out = tmp_path / "out"
    _run(
        "--dataset",
        f"locomo:{data}",
        "--rerank",
        "none,identity",
        "--limit",
        "5",
        "--pool",
        "10",
        "--out",
        str(out),
    )
    report = json.loads((out / "report.json").read_text())
    assert set(report["policies"]) == {"none", "identity"}
    for flat in report["policies"].values():
        assert tuple(flat) == POLICY_KEYS
        assert all(0.0 <= v <= 1.0 for k, v in flat.items() if k != "calls_per_query")
    # identity keeps the coarse order: same figures as no rerank
    assert report["policies"]["identity"] == report["policies"]["none"]
    assert report["details"]["identity"]["status_counts"] == {"ok": 3}
    assert report["details"]["none"]["status_counts"] == {"skipped": 3}
    assert report["details"]["none"]["queries"] == 2  # categories 1-4
    assert report["category_5"]["none"]["queries"] == 1
    assert report["dataset"]["dropped_evidence_ids"] == 2
    assert report["configuration"]["limit"] == 5 and report["configuration"]["pool"] == 10
    # a 6-memory store with pool 10: the pool holds every matching memory; "What pet?" finds D1:1
    assert report["by_category"]["none"]["4"]["pool_recall"] == 1.0
    assert (out / "report.png").exists() == PLOT
    if PLOT:
        assert (out / "report.png").read_bytes().startswith(PNG)
    md = (out / "report.md").read_text()
    assert "| none |" in md
    # HotMem's MMR gate, read off the coarse column (the one without a reranker)
    coarse = report["policies"]["none"]["dup_slot@5"]
    assert report["mmr_gate"] == {
        "metric": "dup_slot@5",
        "threshold": 0.2,
        "coarse": {"none": {"dup_slot@5": coarse, "mmr_advised": coarse > 0.2}},
    }
    verdict = "MMR advised" if coarse > 0.2 else "MMR not advised"
    assert f"coarse dup-slot@5 {coarse:.3f} vs HotMem's 20% gate: {verdict}." in md


def test_quality_on_tiny_beir_reports_recall_at_100(tmp_path):
    folder = _tiny_beir(tmp_path / "tiny")
    out = tmp_path / "out"
    _run("--dataset", f"beir:{folder}", "--rerank", "none", "--out", str(out))
    report = json.loads((out / "report.json").read_text())
    assert report["configuration"]["limit"] == 100 and report["configuration"]["pool"] == 100
    assert report["details"]["none"]["recall@100"] == 1.0  # 3 documents: all are returned
    assert tuple(report["policies"]["none"]) == POLICY_KEYS
    assert "Recall@100" in (out / "report.md").read_text()
    # with a limit under 100 a search returns at most `limit` hits: the column says Recall@limit
    _run(
        "--dataset",
        f"beir:{folder}",
        "--rerank",
        "none",
        "--limit",
        "10",
        "--pool",
        "30",
        "--out",
        str(tmp_path / "out10"),
    )
    text = (tmp_path / "out10" / "report.md").read_text()
    assert "Recall@10 |" in text and "Recall@100" not in text


def test_unknown_reranker_fails_before_ingest_with_a_fix(tmp_path):
    data = _tiny_locomo(tmp_path / "l.json")
    result = CliRunner().invoke(
        cli, ["bench", "quality", PLOT_FLAG, "--dataset", f"locomo:{data}", "--rerank", "nosuch"]
    )
    assert result.exit_code == 1
    assert "Error: no reranker named 'nosuch'" in result.output


def test_plot_without_matplotlib_says_how_to_fix(tmp_path):
    if PLOT:
        pytest.skip("matplotlib is installed here; this checks the error without it")
    data = _tiny_locomo(tmp_path / "l.json")
    result = CliRunner().invoke(cli, ["bench", "quality", "--dataset", f"locomo:{data}"])
    assert result.exit_code == 1
    assert "pip install 'rankseam[bench]'" in result.output


def test_quality_on_a_beir_train_split(tmp_path):
    folder = _tiny_beir(tmp_path / "tiny")
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td2\t1\n")
    out = tmp_path / "out"
    _run("--dataset", f"beir:{folder}", "--split", "train", "--rerank", "none", "--out", str(out))
    report = json.loads((out / "report.json").read_text())
    assert report["dataset"]["split"] == "train" and report["dataset"]["queries"] == 1
    assert report["details"]["none"]["queries"] == 1


def test_search_variants_run_side_by_side_over_the_same_stores(tmp_path):
    data = _tiny_locomo(tmp_path / "l.json")
    out = tmp_path / "out"
    _run(
        "--dataset",
        f"locomo:{data}",
        "--rerank",
        "none",
        "--search",
        "default",
        "--search",
        "fusion=rrf",
        "--search",
        "lexical-only==sources=lexical",
        "--search",
        "weights.vector=0.2:scales.vector=max:sources.lexical.max_df=0.5",
        "--out",
        str(out),
    )
    report = json.loads((out / "report.json").read_text())
    labels = list(report["policies"])
    assert labels == [
        "default/none",
        "fusion=rrf/none",
        "lexical-only/none",
        "scale.vector=max:w.vector=0.2:lexical.max_df=0.5/none",
    ]
    by_variant = report["configuration"]["search_by_variant"]
    assert by_variant["default/fusion=rrf"]["fusion"] == "rrf"
    assert by_variant["default/lexical-only"]["sources"] == ["lexical"]
    tuned = by_variant["default/scale.vector=max:w.vector=0.2:lexical.max_df=0.5"]
    assert tuned["weights"] == {"vector": 0.2} and tuned["scales"] == {"vector": "max"}
    assert report["configuration"]["search"]["fusion"] == "convex"
    assert report["details"]["lexical-only/none"]["search"] == "lexical-only"


def test_a_bad_search_variant_fails_before_ingest(tmp_path):
    data = _tiny_locomo(tmp_path / "l.json")
    for variant, message in [
        ("fusion=nope", "search.fusion must be one of"),
        ("sources=lexical+nope", "no candidate source named 'nope'"),
        ("sources.lexical.stem=true", "stem"),
        ("colour=blue", "unknown key 'colour'"),
    ]:
        result = CliRunner().invoke(
            cli,
            ["bench", "quality", "--no-plot", "--dataset", f"locomo:{data}", "--search", variant],
        )
        assert result.exit_code == 1
        assert message in result.output, (variant, result.output)


def test_kept_stores_are_reused_and_checked(tmp_path):
    folder = _tiny_beir(tmp_path / "tiny")
    stores = tmp_path / "stores"
    first, second = tmp_path / "a", tmp_path / "b"
    _run(
        "--dataset",
        f"beir:{folder}",
        "--rerank",
        "none",
        "--stores",
        str(stores),
        "--out",
        str(first),
    )
    kept = sorted(p.name for p in stores.iterdir() if p.suffix in (".sqlite3", ".json"))
    assert kept == ["beir-tiny-default.json", "beir-tiny-default.sqlite3"]
    _run(
        "--dataset",
        f"beir:{folder}",
        "--rerank",
        "none",
        "--stores",
        str(stores),
        "--out",
        str(second),
    )
    a, b = (json.loads((d / "report.json").read_text()) for d in (first, second))
    assert a["policies"] == b["policies"]
    # another corpus under the same name is refused, with the fix
    with (folder / "corpus.jsonl").open("a") as fh:
        fh.write(json.dumps({"_id": "d9", "title": "", "text": "Birds sing."}) + "\n")
    result = CliRunner().invoke(
        cli,
        ["bench", "quality", "--no-plot", "--dataset", f"beir:{folder}", "--stores", str(stores)],
    )
    assert result.exit_code == 1
    assert "does not hold this collection's memories" in result.output


def test_store_url_builds_the_stores_on_that_backend(tmp_path):
    """`--store-url` puts every store at that URL (here the SQLite store's own sqlite:///
    form), each under a fresh {name}; the figures equal those of the scratch stores."""
    folder = _tiny_beir(tmp_path / "tiny")
    where = tmp_path / "elsewhere"
    where.mkdir()
    scratch, placed = tmp_path / "a", tmp_path / "b"
    _run("--dataset", f"beir:{folder}", "--rerank", "none", "--out", str(scratch))
    _run(
        "--dataset",
        f"beir:{folder}",
        "--rerank",
        "none",
        "--store-url",
        f"sqlite://{where}/{{name}}.sqlite3",
        "--out",
        str(placed),
    )
    built = [p.name for p in where.iterdir() if p.suffix == ".sqlite3"]
    assert len(built) == 1 and built[0].startswith("q")
    a, b = (json.loads((d / "report.json").read_text()) for d in (scratch, placed))
    assert a["policies"] == b["policies"]
    assert b["configuration"]["store_url"] == f"sqlite://{where}/{{name}}.sqlite3"
    result = CliRunner().invoke(
        cli, ["bench", "quality", "--no-plot", "--dataset", f"beir:{folder}", "--store-url", "x"]
    )
    assert result.exit_code == 1 and "{name}" in result.output
