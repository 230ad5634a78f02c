"""``rankseam train`` as a user runs it (the registered command, in-process): the report, the
model file written only when the model does not lose to the default, ``--force``, and the
usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from training_stores import open_store, query, topic_records, write_judgements

from rankseam.testing import invoke_cli
from rankseam_learned.model import load

#: Boosting rounds for these small stores (the pattern is one split deep).
TREES = ["--trees", "25"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "store.sqlite3"
    open_store(path, range(40)).close()
    return path


def test_train_writes_a_model_that_wins(store: Path, tmp_path: Path) -> None:
    judged = write_judgements(
        tmp_path / "j.jsonl",
        ({"query": query(i), "relevant": [f"d{i}b"], "thread": f"t{i % 3}"} for i in range(30)),
    )
    out = tmp_path / "model.json"
    result = invoke_cli(
        ["train", "--judgements", str(judged), "--db", str(store), "--out", str(out), *TREES]
    )
    assert result.exit_code == 0, result.output
    assert "30 queries" in result.stdout and "in 3 folds" in result.stdout
    assert "nDCG@10  default" in result.stdout and "wins /" in result.stdout
    assert f"wrote {out}" in result.stdout
    assert "cross-validation" in result.stderr  # progress, on stderr
    model = load(out)
    assert model.summary["loses_to_default"] is False
    searched = invoke_cli(
        [
            "search",
            query(35),
            "--db",
            str(store),
            "--rerank",
            "learned",
            "--learned-model",
            str(out),
            "--limit",
            "1",
            "--json",
        ]
    )
    assert searched.exit_code == 0, searched.output
    assert json.loads(searched.stdout)["hits"][0]["memory_id"] == "d35b"


def test_train_refuses_a_model_that_loses_unless_forced(store: Path, tmp_path: Path) -> None:
    # Thread A's answer is the counted memory (second in the coarse order), thread B's the
    # first: what one thread teaches is wrong for the other, and the folds leave one out.
    lines = [{"query": query(i), "relevant": [f"d{i}b"], "thread": "A"} for i in range(15)]
    lines += [{"query": query(i), "relevant": [f"d{i}a"], "thread": "B"} for i in range(15, 30)]
    judged = write_judgements(tmp_path / "j.jsonl", lines)
    out = tmp_path / "model.json"
    args = ["train", "--judgements", str(judged), "--db", str(store), "--out", str(out), *TREES]
    result = invoke_cli(args)
    assert result.exit_code == 1, result.output
    assert "loses to the default search" in result.output
    assert "--force" in result.output
    assert not out.exists()
    forced = invoke_cli([*args, "--force", "--json"])
    assert forced.exit_code == 0, forced.output
    report = json.loads(forced.stdout)
    assert report["loses_to_default"] is True and report["model_file"] == str(out)
    assert report["folds"] == 2
    assert out.exists()


def test_train_refuses_a_model_that_adds_nothing_unless_forced(store: Path, tmp_path: Path) -> None:
    # the answer is the coarse first every time: the model can only agree with the default,
    # every weight ties, and the lowest (0: the default's order) is chosen
    judged = write_judgements(
        tmp_path / "j.jsonl",
        ({"query": query(i), "relevant": [f"d{i}a"], "thread": f"t{i % 3}"} for i in range(30)),
    )
    out = tmp_path / "model.json"
    args = ["train", "--judgements", str(judged), "--db", str(store), "--out", str(out), *TREES]
    result = invoke_cli(args)
    assert result.exit_code == 1, result.output
    assert "adds nothing to the default search" in result.output
    assert "weight 0" in result.output and "--force" in result.output
    assert not out.exists()
    forced = invoke_cli([*args, "--force", "--json"])
    assert forced.exit_code == 0, forced.output
    report = json.loads(forced.stdout)
    assert report["model_weight"] == 0.0 and report["fold_model_weights"] == [0.0] * 3
    assert report["loses_to_default"] is False
    assert load(out).model_weight == 0.0


def test_train_learns_from_a_bench_data_set(tmp_path: Path) -> None:
    # a BEIR folder (the layout of `rankseam bench quality --dataset beir:PATH@SPLIT`) whose
    # qrels name the counted memory of each topic
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    topics = range(40)
    docs = [
        {"_id": r["id"], "title": "", "text": r["text"]} for i in topics for r in topic_records(i)
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [{"_id": f"q{i}", "text": query(i)} for i in topics]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "dev.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}b\t1\n" for i in topics)
    )
    out = tmp_path / "model.json"
    result = invoke_cli(
        ["train", "--dataset", f"beir:{folder}@dev", "--out", str(out), "--json", *TREES]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["source"] == f"dataset beir:{folder}@dev"
    assert report["queries"] == 40 and report["folds"] == 5  # 40 independent queries
    assert (
        report["cross_validated"]["nDCG@10"]["model"]
        > report["cross_validated"]["nDCG@10"]["default"]
    )
    assert report["model_weight"] > 0.5  # the model's order, not the default's
    assert load(out).model_weight == report["model_weight"]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--feedback", "--dataset", "locomo"],
        ["--dataset", "locomo", "--db", "x.sqlite3"],
    ],
)
def test_train_says_what_to_learn_from(args: list[str], tmp_path: Path) -> None:
    result = invoke_cli(["train", *args, "--out", str(tmp_path / "m.json")])
    assert result.exit_code == 2
    assert (
        "--judgements FILE" in result.output or "--dataset builds its own stores" in result.output
    )
