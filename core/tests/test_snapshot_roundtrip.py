"""Clone equivalence: export a store, import it into a clean database, and every search answers
identically (same ids, order, revisions and scores to 6 decimals), with and without a reranker,
from a plain and from a gzipped snapshot. docs/snapshots.md."""

from __future__ import annotations

import importlib.util
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rankseam.bench.datasets import LOCOMO_FILE, load_locomo
from rankseam.memory import Memory, open_memory
from rankseam.snapshot import verify_snapshot
from rankseam.types import MemoryRef

HAVE_MMR = importlib.util.find_spec("rankseam_mmr") is not None
RERANKERS: list[str | None] = [None, "identity"]


def _signature(memory: Memory, query: str, namespace: str, reranker: str | None) -> list[Any]:
    result = memory.search(query, 10, namespace=namespace, reranker=reranker)
    return [
        (h.ref.namespace, h.ref.memory_id, h.ref.revision, f"{h.score:.6f}", h.text)
        for h in result.hits
    ]


def _answers(
    memory: Memory, questions: list[tuple[str, str]], rerankers: list[str | None]
) -> dict[tuple[str, str, str | None], list[Any]]:
    return {(ns, q, r): _signature(memory, q, ns, r) for ns, q in questions for r in rerankers}


# -- a generated corpus (always available) ------------------------------------------------

_WORDS = (
    "river stone lantern orchard copper violin harbor meadow thunder pepper garden marble "
    "falcon ember willow canyon silver compass saffron glacier beacon tundra quartz nectar"
).split()


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12)))


def _build_generated(memory: Memory) -> list[tuple[str, str]]:
    """Three namespaces; updates (several revisions), deletes, re-adds after a delete, exact
    duplicate texts (score ties resolved by write order), metadata and importance."""
    rng = random.Random(20240601)
    for ns in ("alpha", "beta", "gamma"):
        records = []
        for i in range(120):
            text = _text(rng) if i % 10 else "river stone lantern duplicate"
            records.append(
                {
                    "id": f"{ns}-{i:03d}",
                    "text": text,
                    "importance": round(rng.random(), 3),
                    "metadata": {"i": i, "tag": rng.choice(["x", "y"]), "w": rng.random()},
                    "created_at": 1_700_000_000 + i * 3.25,
                }
            )
        memory.ingest(records, namespace=ns, batch_size=50)
    for ns in ("alpha", "beta"):
        for i in range(0, 120, 7):
            memory.update(f"{ns}-{i:03d}", _text(rng), namespace=ns, importance=0.9)
        for i in range(3, 120, 11):
            memory.delete(f"{ns}-{i:03d}", namespace=ns)
    memory.add("river garden revived", namespace="alpha", memory_id="alpha-003")  # after delete
    memory.update("alpha-000", "copper violin harbor", namespace="alpha", metadata={"v": 3})
    qrng = random.Random(7)
    questions = [("gamma", "river stone lantern duplicate")]
    for ns in ("alpha", "beta", "gamma"):
        questions += [(ns, " ".join(qrng.sample(_WORDS, 3))) for _ in range(12)]
    return questions


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Memory, Any, Path]]:
    root = tmp_path_factory.mktemp("generated")
    memory = open_memory(root / "source.sqlite3")
    questions = _build_generated(memory)
    yield memory, questions, root
    memory.close()


@pytest.mark.parametrize("use_gzip", [False, True], ids=["plain", "gzip"])
def test_generated_store_answers_identically_after_import(
    generated: tuple[Memory, list[tuple[str, str]], Path], use_gzip: bool
) -> None:
    source, questions, root = generated
    rerankers = RERANKERS + (["mmr"] if HAVE_MMR else [])
    expected = _answers(source, questions, rerankers)
    out = root / f"snap-{'gz' if use_gzip else 'plain'}"
    exported = source.export_snapshot(out, gzip=use_gzip)
    assert (out / ("memories.jsonl.gz" if use_gzip else "memories.jsonl")).is_file()
    assert verify_snapshot(out).snapshot_id == exported.snapshot_id
    with open_memory(root / f"clone-{use_gzip}.sqlite3") as clone:
        report = clone.import_snapshot(out)
        assert report.memories == exported.memories == 3 * 120
        assert report.revisions_written == exported.revisions
        got = _answers(clone, questions, rerankers)
        assert got == expected
        assert any(expected.values())  # the questions do find something
        # everything comes across, not only what search sees
        assert clone.stats()["namespaces"] == source.stats()["namespaces"]
        for ns in ("alpha", "beta", "gamma"):
            assert [m.to_dict() for m in clone.list(ns, include_deleted=True)] == [
                m.to_dict() for m in source.list(ns, include_deleted=True)
            ]
        old = MemoryRef("alpha", "alpha-000", 1)
        assert clone.get(old).to_dict() == source.get(old).to_dict()
        # an imported store exports to the very same snapshot (the id names the content)
        again = clone.export_snapshot(root / f"again-{use_gzip}")
        assert again.snapshot_id == exported.snapshot_id


def test_plain_and_gzip_exports_share_the_snapshot_id(
    generated: tuple[Memory, list[tuple[str, str]], Path],
) -> None:
    source, _questions, root = generated
    plain = source.export_snapshot(root / "id-plain")
    packed = source.export_snapshot(root / "id-gzip", gzip=True)
    assert plain.snapshot_id == packed.snapshot_id
    assert packed.bytes < plain.bytes
    # exports are byte-for-byte reproducible (gzip without a timestamp)
    again = source.export_snapshot(root / "id-gzip-2", gzip=True)
    assert (root / "id-gzip-2" / "memories.jsonl.gz").read_bytes() == (
        root / "id-gzip" / "memories.jsonl.gz"
    ).read_bytes()
    assert again.snapshot_id == packed.snapshot_id


def test_a_write_changes_the_snapshot_id(tmp_path: Path) -> None:
    with open_memory(tmp_path / "s.sqlite3") as memory:
        memory.add("one memory", memory_id="a")
        first = memory.export_snapshot(tmp_path / "one")
        memory.update("a", "one memory, edited")
        second = memory.export_snapshot(tmp_path / "two")
    assert first.snapshot_id != second.snapshot_id


def test_an_empty_store_round_trips(tmp_path: Path) -> None:
    with open_memory(tmp_path / "s.sqlite3") as memory:
        exported = memory.export_snapshot(tmp_path / "snap")
    assert exported.memories == 0
    with open_memory(tmp_path / "t.sqlite3") as clone:
        assert clone.import_snapshot(tmp_path / "snap").memories == 0
        assert clone.namespaces() == []


# -- LoCoMo (skips where the data is absent) ----------------------------------------------


def _locomo_path() -> Path | None:
    env = os.environ.get("RANKSEAM_DATA")
    candidates = [Path(env) / LOCOMO_FILE] if env else []
    here = Path(__file__).resolve()
    candidates += [p / "shared" / "data" / LOCOMO_FILE for p in here.parents]
    return next((p for p in candidates if p.is_file()), None)


def _pool_signature(memory: Memory, query: str, namespace: str) -> list[Any]:
    """One search with the identity reranker answers both ways: its hits are the reranked
    answer and its trace holds the whole coarse pool, which is exactly the no-reranker order
    (docs/snapshots.md); the plain no-reranker path is also checked directly on a sample."""
    result = memory.search(query, 10, namespace=namespace, reranker="identity")
    hits = [(h.ref, f"{h.score:.6f}", h.text) for h in result.hits]
    coarse = [(c.ref, f"{c.score:.6f}", c.matched_by) for c in result.trace.coarse]
    return [hits, coarse]


def test_locomo_store_answers_every_question_identically_after_import(tmp_path: Path) -> None:
    path = _locomo_path()
    if path is None:
        pytest.skip(
            f"LoCoMo data not found: set RANKSEAM_DATA to the folder holding {LOCOMO_FILE} "
            "(or keep ../shared/data next to the checkout)"
        )
    dataset = load_locomo(path)
    questions = [(c.name, q.text) for c in dataset.collections for q in c.queries]
    sample = questions[::10]  # the plain path (and the gzip clone) on a deterministic tenth
    mmr_sample = questions[::25]  # mmr costs several plain searches
    others: list[str | None] = [None]
    with open_memory(tmp_path / "locomo.sqlite3") as source:
        for collection in dataset.collections:
            source.ingest((r.to_ingest() for r in collection.records), namespace=collection.name)
        expected = {(ns, q): _pool_signature(source, q, ns) for ns, q in questions}
        expected_sample = _answers(source, sample, others)
        expected_mmr = _answers(source, mmr_sample, ["mmr"]) if HAVE_MMR else {}
        plain = source.export_snapshot(tmp_path / "plain")
        packed = source.export_snapshot(tmp_path / "packed", gzip=True)
    assert plain.memories == dataset.record_count
    assert plain.snapshot_id == packed.snapshot_id
    with open_memory(tmp_path / "clone.sqlite3") as clone:
        clone.import_snapshot(tmp_path / "plain")
        assert {(ns, q): _pool_signature(clone, q, ns) for ns, q in questions} == expected
        assert _answers(clone, sample, others) == expected_sample
        if HAVE_MMR:
            assert _answers(clone, mmr_sample, ["mmr"]) == expected_mmr
    with open_memory(tmp_path / "clone-gz.sqlite3") as clone:
        clone.import_snapshot(tmp_path / "packed")
        # the gzip clone holds the same content (same snapshot id again) and answers the same
        assert clone.export_snapshot(tmp_path / "again").snapshot_id == plain.snapshot_id
        assert _answers(clone, sample, others) == expected_sample
        assert {(ns, q): _pool_signature(clone, q, ns) for ns, q in sample} == {
            k: expected[k] for k in sample
        }
