"""A memory's thread, position and derived_from (docs/store.md, "Threads, positions and
sources"): checked on the host, kept by updates that leave them out, carried by hits and by
every candidate a reranker sees, with neighbours read from the search's own snapshot; stores
and snapshots written before they existed still open and import."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import rankseam
from rankseam.errors import ValidationError
from rankseam.sqlite.reader import NEIGHBOURS_AFTER, NEIGHBOURS_BEFORE
from rankseam.sqlite.schema import SCHEMA_VERSION
from rankseam.types import RerankDecision

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def memory(tmp_path: Path) -> Any:
    with rankseam.open_memory(tmp_path / "m.sqlite3", reranker=None) as m:
        yield m


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"thread": ""}, "thread"),
        ({"thread": " padded "}, "thread"),
        ({"thread": "x" * 513}, "thread"),
        ({"thread": "a\x00b"}, "thread"),
        ({"thread": 7}, "thread"),
        ({"derived_from": ""}, "derived_from"),
        ({"derived_from": "y" * 600}, "derived_from"),
        ({"derived_from": "self"}, "itself"),
        ({"position": float("nan")}, "position"),
        ({"position": float("inf")}, "position"),
        ({"position": True}, "position"),
        ({"position": 2**60}, r"2\*\*53"),
        ({"position": "soon"}, "position"),
        ({"position": [1]}, "position"),
    ],
)
def test_bad_structure_is_refused_naming_the_field(
    memory: Any, kwargs: dict[str, Any], names: str
) -> None:
    with pytest.raises(ValidationError, match=names):
        memory.add("text", memory_id="self", **kwargs)
    assert list(memory.list()) == []


def test_fields_round_trip_and_datetime_positions(memory: Any) -> None:
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    memory.add("turn", memory_id="a", thread="s1", position=when, derived_from="src")
    memory.add("iso", memory_id="b", thread="s1", position="2023-05-08T13:57:00+00:00")
    memory.add("int", memory_id="c", thread="s2", position=2**53)
    got = memory.get("a")
    assert (got.thread, got.position, got.derived_from) == ("s1", when.timestamp(), "src")
    assert memory.get("b").position == when.timestamp() + 60
    assert memory.get("c").position == float(2**53)
    assert got.to_dict()["thread"] == "s1" and got.to_dict()["derived_from"] == "src"


def test_update_keeps_what_it_leaves_out_and_replaces_what_it_gives(memory: Any) -> None:
    memory.add("v1", memory_id="m", thread="t", position=1, derived_from="s", metadata={"k": 1})
    memory.update("m", "v2")
    got = memory.get("m")
    assert (got.thread, got.position, got.derived_from, dict(got.metadata)) == (
        "t",
        1.0,
        "s",
        {"k": 1},
    )
    memory.update("m", "v3", position=2.5, derived_from="s2")
    got = memory.get("m")
    assert (got.thread, got.position, got.derived_from) == ("t", 2.5, "s2")
    # a re-add of the same memory is idempotent only when the structure is the same too
    memory.add("x", memory_id="n", thread="t", position=4)
    assert memory.add("x", memory_id="n", thread="t", position=4).unchanged
    assert memory.add("x", memory_id="n", thread="t").unchanged  # placed before: the same
    with pytest.raises(ValidationError, match="thread, position or derived_from"):
        memory.add("x", memory_id="n", thread="t", position=5)


def test_ingest_reads_the_jsonl_keys(memory: Any, tmp_path: Path) -> None:
    lines = [
        {"id": "t1", "text": "hi", "thread": "s", "position": 1},
        {"id": "t2", "text": "hello back", "thread": "s", "position": 2},
        {"id": "f1", "text": "a fact", "derived_from": "t1"},
    ]
    report = memory.ingest(lines)
    assert report.added == 3
    assert memory.get("f1").derived_from == "t1"
    with pytest.raises(ValidationError, match="record 1: .*position"):
        memory.ingest([{"id": "z", "text": "bad", "position": "never"}])


def test_async_twins_carry_the_fields(memory: Any) -> None:
    async def run() -> tuple[Any, Any]:
        await memory.aadd("a", memory_id="a", thread="t", position=1, derived_from="x")
        await memory.aupdate("a", "b", position=3)
        return memory.get("a"), memory.get(rankseam.MemoryRef("default", "a", 1))

    now, first = asyncio.run(run())
    assert (now.thread, now.position, now.derived_from) == ("t", 3.0, "x")
    assert first.position == 1.0


class _Looking:
    """A reranker that records what it sees (its candidates and their neighbours) and, while
    it runs, writes a new turn into the thread (after the search's snapshot)."""

    policy_id = "test.looking.v1"
    needs_event_loop = False

    def __init__(self, memory: Any, **needs: Any) -> None:
        self.memory = memory
        self.seen: list[Any] = []
        self.around: list[Any] = []
        for name, value in needs.items():
            setattr(self, name, value)

    def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
        self.memory.add("turn 2.5 written during the rerank", thread="s", position=2.5)
        self.seen = list(candidates)
        if getattr(self, "needs_neighbours", None):
            self.around = [candidates.neighbours(i) for i in range(len(candidates))]
        return RerankDecision(tuple(range(1, limit + 1)))


def _conversation(memory: Any) -> None:
    memory.ingest(
        [
            {"id": f"t{i}", "text": f"turn {i} of the ferry talk", "thread": "s", "position": i}
            for i in range(5)
        ]
        + [
            {"id": "f", "text": "the ferry fact", "derived_from": "t2", "metadata": {"k": "v"}},
        ]
    )


def test_candidates_carry_structure_and_metadata_only_when_asked(memory: Any) -> None:
    _conversation(memory)
    plain = _Looking(memory)
    result = memory.search("ferry", limit=6, reranker=plain)
    by_id = {c.ref.memory_id: c for c in plain.seen}
    assert (by_id["t3"].thread, by_id["t3"].position) == ("s", 3.0)
    assert by_id["f"].derived_from == "t2" and by_id["f"].metadata is None
    hits = {h.ref.memory_id: h for h in result}
    assert hits["f"].derived_from == "t2" and hits["t1"].position == 1.0
    assert hits["t1"].to_dict()["thread"] == "s"
    asking = _Looking(memory, needs_metadata=True)
    memory.search("ferry", limit=6, reranker=asking)
    assert dict({c.ref.memory_id: c for c in asking.seen}["f"].metadata) == {"k": "v"}
    with pytest.raises(rankseam.RerankError, match="declares needs_neighbours"):
        memory.search("ferry", limit=6, reranker=_NoDeclaration())


class _NoDeclaration:
    policy_id = "test.undeclared.v1"
    needs_event_loop = False

    def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
        candidates.neighbours(0)  # not declared: refused
        return RerankDecision((1,))


def test_neighbours_come_from_the_searchs_snapshot(memory: Any) -> None:
    _conversation(memory)
    looking = _Looking(memory, needs_neighbours=(2, 1))
    memory.search("ferry", limit=6, reranker=looking)
    around = {c.ref.memory_id: n for c, n in zip(looking.seen, looking.around, strict=True)}
    assert [(n.offset, n.ref.memory_id) for n in around["t2"]] == [
        (-2, "t0"),
        (-1, "t1"),
        (1, "t3"),  # not the turn at 2.5 the reranker wrote after the snapshot
    ]
    assert around["t2"][0].text == "turn 0 of the ferry talk"
    assert around["f"] == ()  # no thread
    assert [n.offset for n in around["t0"]] == [1]
    later = _Looking(memory, needs_neighbours=1)
    memory.search("ferry", limit=7, reranker=later)
    around = {c.ref.memory_id: n for c, n in zip(later.seen, later.around, strict=True)}
    assert [n.text for n in around["t2"]][-1] == "turn 2.5 written during the rerank"


@pytest.mark.parametrize("bad", [-1, 21, (1,), (1, 2, 3), "1", 1.5, (1, -1)])
def test_a_bad_neighbour_declaration_is_named(memory: Any, bad: object) -> None:
    _conversation(memory)
    with pytest.raises(ValidationError, match="needs_neighbours"):
        memory.search("ferry", limit=3, reranker=_Looking(memory, needs_neighbours=bad))


def test_thread_lookups_are_index_ranges(memory: Any) -> None:
    """The neighbours, a thread between two positions and the memories derived from one
    are index lookups (the plans docs/store.md shows)."""
    _conversation(memory)
    conn = sqlite3.connect(memory.path)

    def plan(sql: str, args: tuple[Any, ...]) -> str:
        return " | ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, args))

    for sql in (NEIGHBOURS_BEFORE, NEIGHBOURS_AFTER):
        got = plan(sql, ("default", "s", 2.0, 3, 2))
        assert "USING COVERING INDEX revisions_thread" in got and "SCAN" not in got, got
    window = plan(
        "SELECT rid FROM revisions WHERE namespace = ? AND thread = ? AND live = 1 "
        "AND position BETWEEN ? AND ? ORDER BY position, rid",
        ("default", "s", 1.0, 3.0),
    )
    assert "USING COVERING INDEX revisions_thread" in window and "SCAN" not in window, window
    derived = plan(
        "SELECT rid FROM revisions WHERE namespace = ? AND derived_from = ? AND live = 1",
        ("default", "t2"),
    )
    assert "USING COVERING INDEX revisions_derived" in derived, derived
    conn.close()


def test_a_store_written_by_a93b0df_opens_and_migrates(tmp_path: Path) -> None:
    """core/tests/fixtures/store-a93b0df.sqlite3 was written by rankseam at a93b0df (schema
    3; make_a93b0df.py): it opens, migrates to the current schema with the fields empty,
    answers as before and takes memories in threads."""
    path = tmp_path / "old.sqlite3"
    shutil.copy(FIXTURES / "store-a93b0df.sqlite3", path)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("3",)
    conn.close()
    with rankseam.open_memory(path, reranker=None) as m:
        assert m.store.schema_version == SCHEMA_VERSION  # every migration ran
        stored = {s.ref.memory_id: s for s in m.list()}
        assert sorted(stored) == ["t1", "t2"]
        assert stored["t2"].ref.revision == 2
        assert all((s.thread, s.position, s.derived_from) == (None,) * 3 for s in stored.values())
        assert m.get("t3").deleted
        hits = m.search("Melanie painted a sunrise", limit=1)
        assert hits[0].ref.memory_id == "t2" and hits[0].thread is None
        m.add("a turn", memory_id="t4", thread="s", position=1)
        m.add("the next", memory_id="t5", thread="s", position=2)
        with m.store.read() as reader:
            key = reader.resolve(m.get("t4").ref)
            assert key is not None
            (after,) = reader.neighbours([key], 1, 1)[key].after
            assert reader.memories([after])[after].ref.memory_id == "t5"
    conn = sqlite3.connect(path)
    indexes = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    assert {"revisions_thread", "revisions_derived"} <= indexes
    conn.close()


def test_a_format_1_snapshot_imports_with_the_fields_empty(tmp_path: Path) -> None:
    """core/tests/fixtures/snapshot-v1 was exported by rankseam at a93b0df (format 1)."""
    manifest = json.loads((FIXTURES / "snapshot-v1" / "manifest.json").read_text())
    assert manifest["format_version"] == 1
    assert rankseam.Memory.verify_snapshot(FIXTURES / "snapshot-v1").format_version == 1
    with rankseam.open_memory(tmp_path / "new.sqlite3", reranker=None) as m:
        report = m.import_snapshot(FIXTURES / "snapshot-v1")
        assert report.memories == 4
        got = m.get("t2")
        assert (got.ref.revision, got.thread, got.position, got.derived_from) == (
            2,
            None,
            None,
            None,
        )
        assert m.get("o1", namespace="other").text == "A memory in another namespace."
        out = tmp_path / "again"
        m.export_snapshot(out)
    again = json.loads((out / "manifest.json").read_text())
    assert again["format_version"] == 2


def test_the_fields_round_trip_through_a_snapshot(memory: Any, tmp_path: Path) -> None:
    _conversation(memory)
    memory.update("t1", "turn 1, edited", position=1.5)
    memory.export_snapshot(tmp_path / "snap")
    line = (tmp_path / "snap" / "memories.jsonl").read_text().splitlines()[0]
    assert {"thread", "position", "derived_from"} <= set(json.loads(line)["revisions"][0])
    with rankseam.open_memory(tmp_path / "clone.sqlite3", reranker=None) as clone:
        clone.import_snapshot(tmp_path / "snap")
        for mine in memory.list():
            theirs = clone.get(mine.ref)
            assert (theirs.thread, theirs.position, theirs.derived_from) == (
                mine.thread,
                mine.position,
                mine.derived_from,
            )
        assert clone.get(rankseam.MemoryRef("default", "t1", 1)).position == 1.0
        # a merge compares the structure too: the same history is unchanged
        assert clone.import_snapshot(tmp_path / "snap", merge=True).unchanged == 6
