"""Training through the API (rankseam_learned.training, .judgements): judgements files and
recorded feedback over real stores, pools from real searches, the model used by the reranker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from training_stores import open_store, query, write_judgements

from rankseam.errors import ConfigurationError
from rankseam_learned.judgements import feedback_judgements, read_judgements
from rankseam_learned.model import loads
from rankseam_learned.reranker import LearnedReranker
from rankseam_learned.training import record_pools, train

TOPICS = range(40)
#: Fewer, smaller trees than the command's: the pattern here is one split deep.
FAST = {"max_iter": 25, "min_samples_leaf": 20}


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = open_store(tmp_path_factory.mktemp("store") / "store.sqlite3", range(60))
    yield store
    store.close()


def counted_judgements(path: Path) -> Path:
    """The counted memory (``d{i}b``, second in the coarse order) is the relevant one."""
    return write_judgements(
        path,
        ({"query": query(i), "relevant": [f"d{i}b"], "thread": f"t{i % 4}"} for i in TOPICS),
    )


def test_a_judgements_file_trains_a_model_that_beats_the_coarse_order(
    memory: Any, tmp_path: Path
) -> None:
    stores = read_judgements(counted_judgements(tmp_path / "j.jsonl"), memory)
    report = train(stores, source="test judgements", params=FAST)
    assert report.queries == len(TOPICS)
    assert report.folds == 4 and report.groups == 4  # one fold per thread
    r5, ndcg = report.comparisons
    assert (r5.metric, ndcg.metric) == ("R@5", "nDCG@10")
    assert ndcg.default < 0.7 < ndcg.model  # second of three -> first
    assert ndcg.wins == len(TOPICS) and ndcg.losses == 0
    assert not report.loses
    # the model file is the one the reranker loads, with the report as its summary
    model = loads(report.model_bytes)
    assert model.summary["cross_validated"]["nDCG@10"]["wins"] == len(TOPICS)
    assert model.decision is not None
    fresh = 45  # a topic no judgement named
    hits = memory.search(query(fresh), limit=3, reranker=LearnedReranker(model)).hits
    assert hits[0].ref.memory_id == f"d{fresh}b"
    assert memory.search(query(fresh), limit=3).hits[0].ref.memory_id == f"d{fresh}a"


def test_pools_are_the_default_search_and_labels_follow_groups(memory: Any, tmp_path: Path) -> None:
    stores = read_judgements(counted_judgements(tmp_path / "j.jsonl"), memory)
    examples = record_pools(stores, pool=30, limit=10)
    first = examples[0]
    expected = [h.ref.memory_id for h in memory.search(query(0), limit=10, pool=30).hits]
    assert list(first.default_groups) == expected
    assert list(first.pool.memory_ids[:10]) == expected
    assert first.labels.tolist().count(1.0) == 1
    assert first.groups[int(first.labels.argmax())] == "d0b"


def test_a_model_trained_on_feedback_moves_the_used_memory_up(tmp_path: Path) -> None:
    memory = open_store(tmp_path / "fb.sqlite3", range(60))
    try:
        for i in TOPICS:
            result = memory.search(query(i), limit=5)
            memory.feedback(result, used=[f"d{i}b"])
        empty = memory.search(query(0), limit=5)
        memory.feedback(empty, used=[])  # used nothing: skipped and counted
        stores = feedback_judgements(memory)
        assert stores[0].skipped_queries == 1
        report = train(stores, source="feedback", params=FAST)
        assert report.queries == len(TOPICS)
        assert not report.loses
        model = loads(report.model_bytes)
        for fresh in (47, 52):
            before = [h.ref.memory_id for h in memory.search(query(fresh), limit=3).hits]
            after = [
                h.ref.memory_id
                for h in memory.search(query(fresh), limit=3, reranker=LearnedReranker(model)).hits
            ]
            assert after.index(f"d{fresh}b") < before.index(f"d{fresh}b")
    finally:
        memory.close()


def test_no_feedback_is_a_clear_error(tmp_path: Path) -> None:
    memory = open_store(tmp_path / "none.sqlite3", range(3))
    try:
        with pytest.raises(ConfigurationError, match="no feedback is recorded"):
            feedback_judgements(memory)
    finally:
        memory.close()


def test_judgements_name_their_mistakes(memory: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "q", "relevant": ["d1a"]}\n{"query": "q", "relevant": []}\n')
    with pytest.raises(ConfigurationError, match=r"bad.jsonl:2: .*non-empty list of memory ids"):
        read_judgements(bad, memory)
    bad.write_text('{"query": "q", "relevant": ["d1a"], "grade": {"d1a": 2}}\n')
    with pytest.raises(ConfigurationError, match=r"bad.jsonl:1: unknown key\(s\) \['grade'\]"):
        read_judgements(bad, memory)
    bad.write_text('{"query": "q", "relevant": ["d1a"], "grades": {"d1b": 2}}\n')
    with pytest.raises(ConfigurationError, match='"grades" must map ids listed in "relevant"'):
        read_judgements(bad, memory)
    bad.write_text("not json\n")
    with pytest.raises(ConfigurationError, match="bad.jsonl:1: not valid JSON"):
        read_judgements(bad, memory)
    with pytest.raises(ConfigurationError, match="does not exist"):
        read_judgements(tmp_path / "missing.jsonl", memory)


def test_unknown_ids_are_dropped_and_grades_kept(memory: Any, tmp_path: Path) -> None:
    path = write_judgements(
        tmp_path / "j.jsonl",
        [
            {"query": query(1), "relevant": ["d1b", "nope"], "grades": {"d1b": 3}, "id": "x"},
            {"query": query(2), "relevant": ["gone"]},
        ],
    )
    (store,) = read_judgements(path, memory)
    assert store.dropped_ids == 2 and store.skipped_queries == 1
    (judgement,) = store.judgements
    assert judgement.id == "x" and dict(judgement.relevance) == {"d1b": 3.0}
