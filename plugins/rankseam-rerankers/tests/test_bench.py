"""`rankseam bench quality --rerank none,rerankers:model=...` runs the user's own model next to
the coarse order (here the tiny cross-encoder, on a tiny BEIR folder written by the test)."""

from __future__ import annotations

import json
from pathlib import Path

from rankseam.testing import invoke_cli

DOCS = {
    "d1": "alice booked a flight to lisbon for the conference in may",
    "d2": "bob adopted a grey cat named pixel",
    "d3": "the team moved standup to nine thirty",
    "d4": "the spare key is under the blue flowerpot",
}
QUERIES = {"q1": "when is the conference in lisbon", "q2": "where is the spare key"}
QRELS = [("q1", "d1", 1), ("q2", "d4", 1)]


def write_beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as f:
        for doc_id, text in DOCS.items():
            f.write(json.dumps({"_id": doc_id, "title": "", "text": text}) + "\n")
    with (root / "queries.jsonl").open("w") as f:
        for qid, text in QUERIES.items():
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
    lines = ["query-id\tcorpus-id\tscore", *(f"{q}\t{d}\t{s}" for q, d, s in QRELS)]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return root


def test_bench_quality_runs_the_users_model_next_to_none(tiny_model: Path, tmp_path: Path) -> None:
    beir = write_beir(tmp_path / "beir")
    out = tmp_path / "report"
    spec = f"none,rerankers:model={tiny_model}:model_type=cross-encoder"
    args = ["bench", "quality", "--dataset", f"beir:{beir}", "--rerank", spec, "--limit", "4"]
    result = invoke_cli(
        [*args, "--no-plot", "--no-progress", "--out", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    label = f"rerankers:model={tiny_model}:model_type=cross-encoder"
    assert set(report["policies"]) == {"none", label}, list(report["policies"])
    assert 0.0 <= report["policies"][label]["recall@5"] <= 1.0
    column = report["details"][label]
    assert column["policy_id"] == "rankseam.rerank.rerankers.v1"
    assert column["descriptor"]["ranker"] == "TransformerRanker"
    assert column["status_counts"] == {"ok": 2}
