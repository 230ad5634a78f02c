"""Merging a snapshot into a non-empty store (never overwrites a newer revision), and the
``rankseam export / verify / import`` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rankseam.cli import cli
from rankseam.memory import open_memory
from rankseam.types import MemoryRef


def test_merge_adds_missing_fast_forwards_and_never_overwrites(tmp_path: Path) -> None:
    with open_memory(tmp_path / "a.sqlite3") as a:
        a.add("shared and never changed", memory_id="same")
        a.add("first words", memory_id="ahead")  # the snapshot will be ahead on this one
        a.update("ahead", "second words")
        a.add("old words", memory_id="behind")  # the target will be ahead on this one
        a.add("a's version", memory_id="split")  # diverged histories
        a.add("only in the snapshot", memory_id="new")
        a.add("deleted in the snapshot", memory_id="gone")
        a.delete("gone")
        a.export_snapshot(tmp_path / "snap")
    with open_memory(tmp_path / "b.sqlite3") as b:
        b.add("shared and never changed", memory_id="same")
        b.add("first words", memory_id="ahead")
        b.add("old words", memory_id="behind")
        b.update("behind", "newer words in the target")
        b.add("b's version", memory_id="split")
        b.add("deleted in the snapshot", memory_id="gone")
        b.add("only in the target", memory_id="mine")
        report = b.import_snapshot(tmp_path / "snap", merge=True)
        assert (report.added, report.updated, report.unchanged) == (1, 1, 1)
        # "behind" (target newer) and "gone" (same head revision, other tombstone state)
        assert (report.kept_newer, report.conflicts) == (2, 1)
        assert b.get("ahead").text == "second words" and b.get("ahead").ref.revision == 2
        assert b.get(MemoryRef("default", "ahead", 1)).text == "first words"
        assert b.get("behind").text == "newer words in the target"  # newer: kept
        assert b.get("split").text == "b's version"  # conflict: the target's is kept
        assert b.get("new").text == "only in the snapshot"
        assert b.get("mine").text == "only in the target"
        assert not b.get("gone").deleted  # the target's state of a revision it holds stays
        # search sees exactly the merged live state (FTS and vectors follow)
        live = {m.ref.memory_id: m.ref.revision for m in b.list()}
        assert live == {
            "same": 1, "ahead": 2, "behind": 2, "split": 1, "new": 1, "gone": 1, "mine": 1
        }  # fmt: skip
        hits = b.search("second words", 10).hits
        assert (hits[0].ref.memory_id, hits[0].ref.revision) == ("ahead", 2)
        assert all(h.ref.revision == live[h.ref.memory_id] for h in hits)
        assert "split" in {h.ref.memory_id for h in b.search("version", 10).hits}
        # merging the same snapshot again changes nothing
        again = b.import_snapshot(tmp_path / "snap", merge=True)
        assert (again.added, again.updated, again.revisions_written) == (0, 0, 0)


def test_import_note_when_the_active_embedder_has_no_vectors(tmp_path: Path) -> None:
    with open_memory(tmp_path / "a.sqlite3") as a:
        a.add("hello vectors")
        a.export_snapshot(tmp_path / "snap")
    manifest = json.loads((tmp_path / "snap" / "manifest.json").read_text())
    assert [s["vectors"] for s in manifest["spaces"]] == [1]
    with open_memory(tmp_path / "b.sqlite3") as b:
        report = b.import_snapshot(tmp_path / "snap")
        assert report.notes == ()
        assert report.vectors_written == 1


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_cli_export_verify_import(runner: CliRunner, tmp_path: Path) -> None:
    db, clone = str(tmp_path / "a.sqlite3"), str(tmp_path / "b.sqlite3")
    with open_memory(db) as memory:
        memory.ingest({"id": f"m{i}", "text": f"lantern river {i}"} for i in range(25))
    out = str(tmp_path / "snap")
    result = runner.invoke(cli, ["export", out, "--db", db, "--gzip", "--json"])
    assert result.exit_code == 0, result.output
    exported = json.loads(result.output)
    assert exported["memories"] == 25 and exported["gzip"] is True
    result = runner.invoke(cli, ["verify", out])
    assert result.exit_code == 0, result.output
    assert "ok: 25 memories" in result.output and exported["snapshot_id"] in result.output
    result = runner.invoke(cli, ["import", out, "--db", clone, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["added"] == 25
    # a second plain import is refused with the fix, a merge is fine
    result = runner.invoke(cli, ["import", out, "--db", clone])
    assert result.exit_code == 1 and "--merge" in result.output
    result = runner.invoke(cli, ["import", out, "--db", clone, "--merge"])
    assert result.exit_code == 0 and "unchanged 25" in result.output
    # export into an existing folder is refused
    result = runner.invoke(cli, ["export", out, "--db", db])
    assert result.exit_code == 1 and "already exists" in result.output


def test_cli_refuses_a_bad_snapshot_without_creating_the_target(
    runner: CliRunner, tmp_path: Path
) -> None:
    db = str(tmp_path / "a.sqlite3")
    with open_memory(db) as memory:
        memory.add("a memory to export")
    out = tmp_path / "snap"
    assert runner.invoke(cli, ["export", str(out), "--db", db]).exit_code == 0
    data = out / "memories.jsonl"
    data.write_bytes(data.read_bytes()[:-20])
    result = runner.invoke(cli, ["verify", str(out)])
    assert result.exit_code == 1 and "truncated" in result.output
    target = tmp_path / "new.sqlite3"
    result = runner.invoke(cli, ["import", str(out), "--db", str(target)])
    assert result.exit_code == 1 and "truncated" in result.output
    assert not target.exists()
