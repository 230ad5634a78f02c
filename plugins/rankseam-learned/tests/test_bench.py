"""The learned reranker and the decision backend as rows of ``rankseam bench quality``."""

from __future__ import annotations

import json
from pathlib import Path

from rankseam.testing import invoke_cli
from rankseam_learned.stagecost import measure

DOCS = {
    "lasagna": "Alice cooked lasagna for the party",
    "date": "The party is on Saturday at Alice's house",
    "hike": "Bob went hiking in the Alps last summer",
    "cat": "Carol adopted a grey cat named Pixel",
    "soup": "Dave cooked tomato soup for lunch",
}
QUERIES = {
    "q1": ("what did alice cook for the party", "lasagna"),
    "q2": ("when is the party", "date"),
}


def beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in DOCS.items())
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": q}) + "\n" for k, (q, _) in QUERIES.items())
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{k}\t{d}\t1\n" for k, (_, d) in QUERIES.items())
    )
    return folder


def test_quality_rows_for_the_reranker_and_the_decision_backend(
    tmp_path: Path, model_file: Path
) -> None:
    data = beir(tmp_path / "tiny")
    out = tmp_path / "report"
    result = invoke_cli(
        [
            "bench", "quality", "--dataset", f"beir:{data}@test", "--limit", "3",
            "--rerank", "none,learned,decision",
            "--option", f"learned.model={model_file}",
            "--option", "decision.backend=learned",
            "--option", f"decision_backends.learned.model={model_file}",
            # a yes threshold no candidate reaches and a no threshold some stay under: the
            # decision reranker keeps the abstentions and drops the noes
            "--option", "decision_backends.learned.yes_threshold=0.99",
            "--option", "decision_backends.learned.no_threshold=0.5",
            "--out", str(out), "--no-plot",
        ]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(next(out.rglob("*.json")).read_text())
    # a column's label is its spec with the options it was given (learned:model=...)
    label = {name.split(":")[0]: name for name in report["policies"]}
    assert set(label) == {"none", "learned", "decision"}
    details = {name: report["details"][label[name]] for name in label}
    assert details["learned"]["policy_id"].startswith("rankseam.rerank.learned.v1+sha256:")
    assert details["none"]["kept_share"] == 1.0
    assert details["learned"]["kept_share"] == 1.0
    assert 0 < details["decision"]["kept_share"] < 1.0


def test_stage_cost_times_each_search_of_the_learned_reranker(
    tmp_path: Path, model_file: Path
) -> None:
    data = beir(tmp_path / "tiny")
    report = measure(f"beir:{data}@test", str(model_file), queries=5, pool=4, warmup=0)
    assert report["searches"] == len(QUERIES)  # every question of the set, none more
    assert report["model_bytes"] == model_file.stat().st_size
    assert 0 < report["stage_cpu_ms"]["p50"] <= report["stage_cpu_ms"]["p95"]
