"""Bad snapshots are refused with a clear error and leave the target untouched (one
transaction): truncated, tampered (checksum), wrong version, hand-edited manifest or data."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rankseam.memory import Memory, open_memory
from rankseam.snapshot import (
    SnapshotError,
    import_snapshot,
    verify_snapshot,
)
from rankseam.snapshot.format import snapshot_id


def _fill(memory: Memory) -> None:
    memory.ingest(
        [{"id": f"m{i}", "text": f"memory number {i} about lanterns and rivers"} for i in range(40)]
    )
    memory.update("m1", "memory one, second revision", metadata={"k": "v"})
    memory.delete("m2")


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    with open_memory(tmp_path / "source.sqlite3") as memory:
        _fill(memory)
        memory.export_snapshot(tmp_path / "snap")
    return tmp_path / "snap"


def _state(memory: Memory) -> Any:
    """Everything a target holds that an import could change."""
    out = {
        ns: [m.to_dict() for m in memory.list(ns, include_deleted=True)]
        for ns in memory.namespaces()
    }
    stats = memory.stats()
    return out, stats["namespaces"], stats["vectors_by_space"]


def _target(tmp_path: Path) -> Memory:
    memory = open_memory(tmp_path / "target.sqlite3")
    memory.add("a memory that must survive a refused import", memory_id="keep", namespace="t")
    return memory


def _manifest(snap: Path) -> dict[str, Any]:
    return json.loads((snap / "manifest.json").read_text())


def _write_manifest(snap: Path, manifest: dict[str, Any]) -> None:
    (snap / "manifest.json").write_text(json.dumps(manifest, indent=2))


def _rehash(snap: Path) -> None:
    """What a careful hand-editor does: fix the file checksums in the manifest."""
    manifest = _manifest(snap)
    data = (snap / "memories.jsonl").read_bytes()
    f = manifest["files"][0]
    f["sha256"] = f["content_sha256"] = hashlib.sha256(data).hexdigest()
    f["bytes"] = len(data)
    _write_manifest(snap, manifest)


def _forge_id(snap: Path) -> None:
    """What a forger does on top: recompute the snapshot id of the edited manifest."""
    manifest = _manifest(snap)
    manifest["snapshot_id"] = snapshot_id(manifest)
    _write_manifest(snap, manifest)


def _truncate(snap: Path) -> None:
    data = snap / "memories.jsonl"
    data.write_bytes(data.read_bytes()[:-500])


def _tamper(snap: Path) -> None:
    data = snap / "memories.jsonl"
    raw = bytearray(data.read_bytes())
    at = raw.index(b"lanterns")
    raw[at : at + 8] = b"LANTERNS"  # same length: only the checksum can tell
    data.write_bytes(bytes(raw))


def _newer_version(snap: Path) -> None:
    manifest = _manifest(snap)
    manifest["format_version"] = 99
    _write_manifest(snap, manifest)


def _edited_counts(snap: Path) -> None:
    manifest = _manifest(snap)
    manifest["counts"]["memories"] += 1
    _write_manifest(snap, manifest)


def _edited_text_rehashed(snap: Path) -> None:
    data = snap / "memories.jsonl"
    data.write_bytes(data.read_bytes().replace(b"lanterns", b"LANTERNS", 1))
    _rehash(snap)


def _edited_text_and_hash(snap: Path) -> None:
    """Edit a text and fix its content hash too: the snapshot id still gives it away."""
    lines = (snap / "memories.jsonl").read_bytes().splitlines(keepends=True)
    record = json.loads(lines[5])
    rev = record["revisions"][0]
    rev["text"] = "an injected memory"
    rev["content_hash"] = "sha256:" + hashlib.sha256(b"an injected memory").hexdigest()
    lines[5] = json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    (snap / "memories.jsonl").write_bytes(b"".join(lines))
    _rehash(snap)


def _dropped_line_rehashed(snap: Path) -> None:
    lines = (snap / "memories.jsonl").read_bytes().splitlines(keepends=True)
    (snap / "memories.jsonl").write_bytes(b"".join(lines[:-1]))
    _rehash(snap)


def _edited_text_forged(snap: Path) -> None:
    _edited_text_rehashed(snap)
    _forge_id(snap)


def _dropped_line_forged(snap: Path) -> None:
    _dropped_line_rehashed(snap)
    _forge_id(snap)


def _path_escape(snap: Path) -> None:
    manifest = _manifest(snap)
    manifest["files"][0]["path"] = "../source.sqlite3"
    _write_manifest(snap, manifest)


def _missing_data(snap: Path) -> None:
    (snap / "memories.jsonl").unlink()


def _manifest_garbage(snap: Path) -> None:
    (snap / "manifest.json").write_text('{"format": "rankseam-snapshot", "format_vers')


CASES: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "truncated": (_truncate, "truncated", "truncated"),
    "tampered": (_tamper, "checksum", "checksum"),
    "wrong-version": (_newer_version, "version", "upgrade rankseam"),
    "edited-manifest": (_edited_counts, "manifest", "snapshot id does not match"),
    "edited-text": (_edited_text_rehashed, "manifest", "snapshot id does not match"),
    "edited-text-forged-id": (_edited_text_forged, "content", "content_hash"),
    "dropped-line-forged-id": (_dropped_line_forged, "content", "does not match manifest.json"),
    "edited-text-and-hash": (_edited_text_and_hash, "manifest", "snapshot id does not match"),
    "dropped-line": (_dropped_line_rehashed, "manifest", "snapshot id does not match"),
    "path-escape": (_path_escape, "manifest", "unexpected data file"),
    "missing-data": (_missing_data, "missing", "lacks its data file"),
    "garbage-manifest": (_manifest_garbage, "manifest", "not valid JSON"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_snapshot_is_refused_and_target_untouched(
    snapshot: Path, tmp_path: Path, case: str
) -> None:
    damage, reason, words = CASES[case]
    assert verify_snapshot(snapshot).memories == 40
    damage(snapshot)
    with pytest.raises(SnapshotError) as verify_error:
        verify_snapshot(snapshot)
    assert verify_error.value.reason == reason
    assert words in str(verify_error.value)
    # a clean target (plain import) and a non-empty one (merge): both stay as they were
    with open_memory(tmp_path / "clean.sqlite3") as clean:
        with pytest.raises(SnapshotError) as import_error:
            clean.import_snapshot(snapshot)
        assert import_error.value.reason == reason
        assert clean.stats()["memories"] == 0 and clean.namespaces() == []
    with _target(tmp_path) as target:
        before = _state(target)
        with pytest.raises(SnapshotError) as import_error:
            target.import_snapshot(snapshot, merge=True)
        assert import_error.value.reason == reason
        assert _state(target) == before
        assert [h.ref.memory_id for h in target.search("survive", namespace="t").hits] == ["keep"]


def test_truncated_gzip_is_refused(tmp_path: Path) -> None:
    with open_memory(tmp_path / "s.sqlite3") as memory:
        _fill(memory)
        memory.export_snapshot(tmp_path / "snap", gzip=True)
    data = tmp_path / "snap" / "memories.jsonl.gz"
    data.write_bytes(data.read_bytes()[:-40])
    with pytest.raises(SnapshotError, match="truncated") as err:
        verify_snapshot(tmp_path / "snap")
    assert err.value.reason == "truncated"


def test_content_error_midway_rolls_back_everything(tmp_path: Path) -> None:
    """A bad record deep in the file, after whole batches were already inserted: nothing
    stays (the import is one transaction)."""
    with open_memory(tmp_path / "s.sqlite3") as memory:
        memory.ingest({"id": f"n{i}", "text": f"note {i} on rivers"} for i in range(2100))
        memory.export_snapshot(tmp_path / "snap")
    snap = tmp_path / "snap"
    lines = (snap / "memories.jsonl").read_bytes().splitlines(keepends=True)
    record = json.loads(lines[-3])
    record["revisions"][0]["importance"] = 7  # out of range, deep in the file
    lines[-3] = json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    (snap / "memories.jsonl").write_bytes(b"".join(lines))
    _rehash(snap)
    _forge_id(snap)  # a forger who recomputes the snapshot id still meets record validation
    with open_memory(tmp_path / "clean.sqlite3") as clean:
        with pytest.raises(SnapshotError, match="importance") as err:
            clean.import_snapshot(snap)
        assert err.value.reason == "content"
        assert clean.namespaces() == []
        assert clean.stats()["memories"] == 0


def test_not_a_snapshot(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="no snapshot") as err:
        verify_snapshot(tmp_path / "nowhere")
    assert err.value.reason == "missing"
    (tmp_path / "folder").mkdir()
    with pytest.raises(SnapshotError, match="not a rankseam snapshot") as err:
        verify_snapshot(tmp_path / "folder")
    assert err.value.reason == "not_a_snapshot"
    (tmp_path / "folder" / "manifest.json").write_text('{"format": "something-else"}')
    with pytest.raises(SnapshotError, match="not a rankseam snapshot"):
        verify_snapshot(tmp_path / "folder")


def test_clean_import_refuses_a_non_empty_target(snapshot: Path, tmp_path: Path) -> None:
    with _target(tmp_path) as target:
        before = _state(target)
        with pytest.raises(SnapshotError, match="--merge") as err:
            target.import_snapshot(snapshot)
        assert err.value.reason == "target_not_empty"
        assert _state(target) == before


def test_export_refuses_an_existing_folder(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "something").write_text("x")
    with open_memory(tmp_path / "s.sqlite3") as memory:
        memory.add("hello world")
        with pytest.raises(SnapshotError, match="already exists") as err:
            memory.export_snapshot(tmp_path / "out")
        assert err.value.reason == "exists"
        # an empty folder is fine, and no partial folder is left behind
        (tmp_path / "empty").mkdir()
        memory.export_snapshot(tmp_path / "empty")
    assert sorted(p.name for p in tmp_path.iterdir() if "partial" in p.name) == []
    assert verify_snapshot(tmp_path / "empty").memories == 1


def test_tokenizer_mismatch_is_refused(snapshot: Path, tmp_path: Path) -> None:
    from rankseam.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "u.sqlite3", tokenizer="unicode61")
    try:
        with pytest.raises(SnapshotError, match="tokenizer") as err:
            import_snapshot(store, snapshot)
        assert err.value.reason == "tokenizer"
    finally:
        store.close()


def test_gzip_member_is_plain_gzip(tmp_path: Path) -> None:
    """The documented layout: any gzip tool reads the data file."""
    with open_memory(tmp_path / "s.sqlite3") as memory:
        _fill(memory)
        memory.export_snapshot(tmp_path / "z", gzip=True)
        memory.export_snapshot(tmp_path / "p")
    unpacked = gzip.decompress((tmp_path / "z" / "memories.jsonl.gz").read_bytes())
    assert unpacked == (tmp_path / "p" / "memories.jsonl").read_bytes()
