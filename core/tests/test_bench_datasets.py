"""LoCoMo and BEIR loaders, on tiny files made here (and the real LoCoMo file when present)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rankseam.bench.datasets import load_dataset, load_locomo
from rankseam.errors import ConfigurationError


def _tiny_locomo(path: Path) -> Path:
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:00 pm on 1 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice!", "blip_caption": "a cat"},
            ],
            "session_2_date_time": "2:00 pm on 2 May, 2023",
            "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "The cat is called Tom."}],
            "session_3_date_time": "no session with this date",
        },
        "observation": {
            "session_1_observation": {
                "Ann": [["Ann has a cat.", "D1:1"], ["Ann likes cats.", "D1:1"]]
            },
            "session_2_observation": {"Ann": [["Ann's cat is Tom.", "D2:1"]]},
        },
        "qa": [
            {"question": "What pet?", "answer": "a cat", "evidence": ["D1:1"], "category": 4},
            {"question": "Cat name?", "answer": 7, "evidence": ["D2:1", "D9:99"], "category": 1},
            {"question": "Only bad ids", "answer": "x", "evidence": ["D8:6; D9:17"], "category": 2},
            {"question": "No evidence", "answer": "x", "evidence": [], "category": 3},
            {"question": "Trick?", "adversarial_answer": "y", "evidence": ["D1:2"], "category": 5},
        ],
    }
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def test_locomo_memories_groups_and_dropped_evidence(tmp_path):
    data = load_locomo(_tiny_locomo(tmp_path / "l.json"))
    (coll,) = data.collections
    ids = [r.id for r in coll.records]
    assert ids == ["D1:1", "D1:2", "D2:1", "D1:1/obs1", "D1:1/obs2", "D2:1/obs1"]
    groups = coll.group_of()
    assert groups["D1:1/obs2"] == "D1:1" and groups["D2:1"] == "D2:1"
    turn = coll.records[1]
    assert "Bo:" in turn.text and "a cat" in turn.text and turn.kind == "turn"
    assert [q.text for q in coll.queries] == ["What pet?", "Cat name?", "Trick?"]
    assert dict(coll.queries[1].relevance) == {"D2:1": 1.0}
    assert [q.category for q in coll.queries] == [4, 1, 5]
    assert data.stats["dropped_evidence_ids"] == 2
    assert data.stats["skipped_queries_no_evidence"] == 2
    assert data.stats["turns"] == 3 and data.stats["observations"] == 3
    assert coll.records[3].to_ingest()["metadata"] == {"group": "D1:1", "kind": "observation"}


def test_dataset_spec_and_errors(tmp_path):
    path = _tiny_locomo(tmp_path / "l.json")
    assert load_dataset(f"locomo:{path}").query_count == 3
    with pytest.raises(ConfigurationError, match="unknown dataset"):
        load_dataset("msmarco")
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_dataset(f"locomo:{tmp_path / 'missing.json'}")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigurationError, match="JSON list"):
        load_locomo(tmp_path / "bad.json")
    with pytest.raises(ConfigurationError, match="not a BEIR folder"):
        load_dataset(f"beir:{tmp_path}")


def _data_dir() -> Path | None:
    env = os.environ.get("RANKSEAM_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "data")
    for folder in candidates:
        if (folder / "locomo-dev.json").is_file():
            return folder
    return None


def test_real_locomo_file_quirks():
    folder = _data_dir()
    if folder is None:
        pytest.skip("locomo-dev.json not found: set RANKSEAM_DATA to ../shared/data to run this")
    data = load_locomo(folder / "locomo-dev.json")
    assert data.stats["conversations"] == 5
    assert data.stats["turns"] == 2760
    assert data.stats["dropped_evidence_ids"] >= 1
    assert data.stats["skipped_queries_no_evidence"] >= 1
    assert data.query_count + data.stats["skipped_queries_no_evidence"] == 999
    for coll in data.collections:
        groups = coll.group_of()
        turn_ids = {r.id for r in coll.records if r.kind == "turn"}
        assert all(g in turn_ids for g in groups.values())
        for q in coll.queries:
            assert q.relevance and set(q.relevance) <= turn_ids


def _tiny_beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "d1", "title": "Cats", "text": "Cats purr."},
        {"_id": "d2", "title": "", "text": "Dogs bark."},
        {"_id": "d3", "title": "Empty", "text": ""},
        {"_id": "d4", "title": "", "text": ""},
    ]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(c) for c in corpus) + "\n\n")
    queries = [
        {"_id": "q1", "text": "do cats purr"},
        {"_id": "q2", "text": "barking"},
        {"_id": "q3", "text": "nothing relevant"},
        {"_id": "q4", "text": "unknown doc"},
    ]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq2\td2\t1\nq3\td1\t0\nq4\tdX\t1\n"
    )
    return root


def test_beir_loader(tmp_path):
    data = load_dataset(f"beir:{_tiny_beir(tmp_path / 'tiny')}")
    assert data.kind == "beir" and data.name == "beir:tiny"
    (coll,) = data.collections
    assert [r.id for r in coll.records] == ["d1", "d2", "d3"]  # d4 has no text
    assert coll.records[0].text == "Cats\nCats purr."
    assert coll.group_of() == {"d1": "d1", "d2": "d2", "d3": "d3"}
    by_id = {q.id: q for q in coll.queries}
    assert set(by_id) == {"q1", "q2"}
    assert dict(by_id["q1"].relevance) == {"d1": 2.0, "d3": 1.0}
    assert by_id["q1"].category is None
    assert data.stats["dropped_qrels_unknown_document"] == 1
    assert data.stats["skipped_queries_no_relevant"] == 2  # q3 (grade 0), q4 (unknown doc)


def _two_splits(root: Path) -> Path:
    """The tiny BEIR folder plus a train split: q3 judged relevant to d2, q1 to d1."""
    _tiny_beir(root)
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq3\td2\t1\nq1\td1\t1\n")
    return root


def test_beir_split_chooses_qrels_and_queries(tmp_path):
    folder = _two_splits(tmp_path / "tiny")
    test = load_dataset(f"beir:{folder}")
    train = load_dataset(f"beir:{folder}@train")
    assert test.stats["split"] == "test" and train.stats["split"] == "train"
    assert train.name == "beir:tiny@train" and test.name == "beir:tiny"
    (coll,) = train.collections
    assert {q.id: dict(q.relevance) for q in coll.queries} == {"q1": {"d1": 1.0}, "q3": {"d2": 1.0}}
    # the corpus is the same whatever the split
    assert [r.id for r in coll.records] == [r.id for r in test.collections[0].records]
    # --split says the same as @train; giving it twice consistently is fine
    assert load_dataset(f"beir:{folder}", split="train").collections == train.collections
    assert load_dataset(f"beir:{folder}@train", split="train").name == "beir:tiny@train"


def test_beir_split_errors_say_how_to_fix(tmp_path):
    folder = tmp_path / "only-train"
    _two_splits(folder)
    (folder / "qrels" / "test.tsv").unlink()
    with pytest.raises(ConfigurationError, match=r"split\(s\) train: pass beir:.*@train"):
        load_dataset(f"beir:{folder}")
    with pytest.raises(ConfigurationError, match="names split 'train' but --split says 'dev'"):
        load_dataset(f"beir:{folder}@train", split="dev")
    with pytest.raises(ConfigurationError, match="applies to BEIR folders only"):
        load_dataset("locomo", split="train")
    with pytest.raises(ConfigurationError, match="not a split name"):
        load_dataset(f"beir:{folder}", split="../x")


def test_beir_folder_whose_name_holds_an_at_sign(tmp_path):
    folder = _tiny_beir(tmp_path / "corpus@v2")
    assert load_dataset(f"beir:{folder}").stats["split"] == "test"


def test_real_scifact_train_split():
    folder = _data_dir()
    if folder is None or not (folder / "scifact-train" / "qrels" / "train.tsv").is_file():
        pytest.skip("scifact-train not found: set RANKSEAM_DATA to ../shared/data to run this")
    data = load_dataset(f"beir:{folder / 'scifact-train'}@train")
    assert data.stats["documents"] == 5183
    assert data.query_count == 809


def test_locomo_structure_threads_positions_sources_and_dates(tmp_path):
    """A turn's thread is its session, its position its place there, its created_at the
    session's date; an observation is derived from its source turn (issue #36's loader)."""
    (coll,) = load_locomo(_tiny_locomo(tmp_path / "l.json")).collections
    by_id = {r.id: r for r in coll.records}
    may_1 = datetime(2023, 5, 1, 13, 0, tzinfo=UTC).timestamp()
    assert (by_id["D1:1"].thread, by_id["D1:1"].position, by_id["D1:1"].created_at) == (
        "session_1",
        0.0,
        may_1,
    )
    assert (by_id["D1:2"].thread, by_id["D1:2"].position) == ("session_1", 1.0)
    assert (by_id["D2:1"].thread, by_id["D2:1"].position) == ("session_2", 0.0)
    assert by_id["D2:1"].created_at == datetime(2023, 5, 2, 14, 0, tzinfo=UTC).timestamp()
    assert by_id["D1:1/obs2"].derived_from == "D1:1" and by_id["D1:1/obs2"].thread is None
    ingest = by_id["D1:2"].to_ingest()
    assert (ingest["thread"], ingest["position"], ingest["created_at"]) == ("session_1", 1.0, may_1)
    assert by_id["D1:1/obs1"].to_ingest()["derived_from"] == "D1:1"


def test_real_locomo_structure():
    folder = _data_dir()
    if folder is None:
        pytest.skip("locomo-dev.json not found: set RANKSEAM_DATA to ../shared/data to run this")
    data = load_locomo(folder / "locomo-dev.json")
    for coll in data.collections:
        turns = [r for r in coll.records if r.kind == "turn"]
        assert all(r.thread and r.thread.startswith("session_") for r in turns)
        assert all(r.created_at is not None for r in turns)  # every session has its date
        places = {}
        for r in turns:
            places.setdefault(r.thread, []).append(r.position)
        assert all(p == [float(i) for i in range(len(p))] for p in places.values())
        turn_ids = {r.id for r in turns}
        observations = [r for r in coll.records if r.kind == "observation"]
        assert all(r.derived_from in turn_ids for r in observations if r.derived_from)
        assert sum(r.derived_from is not None for r in observations) == len(observations) - sum(
            r.group not in turn_ids for r in observations
        )
