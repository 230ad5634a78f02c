"""Hostile snapshots meet a documented cap before they cost memory (docs/snapshots.md,
"Limits"): forged counts, a gzip bomb, deep JSON, huge numbers, lone surrogates, non-finite
vectors. Each is refused by ``verify`` and ``import`` with a SnapshotError, under a memory cap,
and a refused CLI import leaves no new store file behind."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from rankseam.cli import main
from rankseam.memory import open_memory
from rankseam.snapshot import SnapshotError, verify_snapshot
from rankseam.snapshot import export as export_module
from rankseam.snapshot.format import snapshot_id

linux_only = pytest.mark.skipif(
    sys.platform != "linux", reason="the memory cap (RLIMIT_AS over /proc) is Linux-only"
)

#: Address space a capped child may add after its imports: far below what the unfixed reader
#: allocated (1 GB for a forged count, twice a 200 MB line for the bomb).
CAP_MB = 256


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("base")
    with open_memory(root / "source.sqlite3") as memory:
        for i in range(5):
            memory.add(f"memory {i} about lanterns", memory_id=f"m{i}")
        memory.export_snapshot(root / "snap")
    return root / "snap"


def _lines(snap: Path) -> list[bytes]:
    return (snap / "memories.jsonl").read_bytes().splitlines(keepends=True)


def _encode(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def _forge(
    snap: Path,
    content: Iterable[bytes] | None = None,
    *,
    gz: bool = False,
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """What a forger does: write the data, fix every checksum and recompute the id."""
    manifest = json.loads((snap / "manifest.json").read_text())
    file = manifest["files"][0]
    if content is not None:
        (snap / file["path"]).unlink()
        name = "memories.jsonl.gz" if gz else "memories.jsonl"
        digest, lines = hashlib.sha256(), 0
        with (snap / name).open("wb") as raw:
            out: Any = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) if gz else raw
            for chunk in content:
                digest.update(chunk)
                lines += chunk.count(b"\n")
                out.write(chunk)
            if gz:
                out.close()
        data = (snap / name).read_bytes()
        file.update(
            path=name,
            compression="gzip" if gz else None,
            sha256=hashlib.sha256(data).hexdigest(),
            content_sha256=digest.hexdigest(),
            bytes=len(data),
            lines=lines,
        )
    if edit is not None:
        edit(manifest)
    manifest["snapshot_id"] = snapshot_id(manifest)
    (snap / "manifest.json").write_text(json.dumps(manifest))
    return snap


def _one_memory(manifest: dict[str, Any]) -> None:
    """Counts that agree with a data file of one memory of one revision without vectors."""
    per_ns = {"default": {"memories": 1, "deleted": 0, "revisions": 1}}
    manifest["counts"] = {"memories": 1, "deleted": 0, "revisions": 1, "live": 1}
    manifest["counts"]["namespaces"] = per_ns
    for space in manifest["spaces"]:
        space["vectors"] = 0


def _revisions(n: int) -> Callable[[Path], Path]:
    def forge(snap: Path) -> Path:
        return _forge(snap, edit=lambda m: m["counts"].update(revisions=n))

    return forge


def _gzip_bomb(snap: Path) -> Path:
    """About 200 kB of gzip holding one 200 MB line."""

    def content() -> Iterable[bytes]:
        yield b'{"id":"'
        block = b"a" * (1 << 20)
        for _ in range(200):
            yield block
        yield b'"}\n'

    return _forge(snap, content(), gz=True, edit=_one_memory)


def _many_values(snap: Path) -> Path:
    """About 140 kB of gzip holding one 30 MB line (under the line cap) of ten million empty
    objects: parsed, about 800 MB of Python objects."""

    def content() -> Iterable[bytes]:
        yield b"["
        block = b"{}," * (1 << 20)
        for _ in range(10):
            yield block
        yield b"{}]\n"

    return _forge(snap, content(), gz=True, edit=_one_memory)


def _deep_record(snap: Path) -> Path:
    return _forge(snap, [b"[" * 100_000 + b"]" * 100_000 + b"\n"], edit=_one_memory)


def _deep_manifest(snap: Path) -> Path:
    (snap / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    return snap


def _edit_first(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], Path]:
    def forge(snap: Path) -> Path:
        lines = _lines(snap)
        record = json.loads(lines[0])
        change(record)
        return _forge(snap, [_encode(record), *lines[1:]])

    return forge


def _huge_created_at(record: dict[str, Any]) -> None:
    record["revisions"][0]["created_at"] = 10**400


def _lone_surrogate_id(record: dict[str, Any]) -> None:
    record["id"] = "m0\ud800"  # still sorts first: the order check passes


def _nan_vector(record: dict[str, Any]) -> None:
    vectors = record["revisions"][0]["vectors"]
    key = next(iter(vectors))
    blob = base64.b64decode(vectors[key])
    vectors[key] = base64.b64encode(struct.pack("<f", float("nan")) + blob[4:]).decode()


def _surrogate_metadata(record: dict[str, Any]) -> None:
    record["revisions"][0]["metadata"] = {"note": "\udcff"}


def _deep_metadata(record: dict[str, Any]) -> None:
    value: Any = {}
    for _ in range(34):
        value = {"k": value}
    record["revisions"][0]["metadata"] = value


CASES: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "revisions-10**13": (_revisions(10**13), "manifest", "cannot fit in a data file"),
    "revisions-10**9": (_revisions(10**9), "manifest", "cannot fit in a data file"),
    "gzip-bomb": (_gzip_bomb, "limit", "longer than 33554432 bytes"),
    "many-values": (_many_values, "content", "more than 2000000 values"),
    "deep-record": (_deep_record, "content", "nested more than 40 levels"),
    "deep-manifest": (_deep_manifest, "manifest", "nested more than 64 levels"),
    "created_at-10**400": (_edit_first(_huge_created_at), "content", "must be a finite number"),
    "lone-surrogate-id": (_edit_first(_lone_surrogate_id), "content", "lone surrogate"),
    "lone-surrogate-metadata": (_edit_first(_surrogate_metadata), "content", "lone surrogate"),
    "deep-metadata": (_edit_first(_deep_metadata), "content", "more than 32 levels"),
    "nan-vector": (_edit_first(_nan_vector), "content", "NaN or infinite"),
}

# The child: imports first, then caps its address space at what it has + CAP_MB, then runs
# verify and the real CLI import of each snapshot, and reports what happened as JSON.
_CHILD = textwrap.dedent(
    """
    import json, os, resource, sys
    from rankseam.cli import main
    from rankseam.snapshot import SnapshotError, verify_snapshot

    cases, cap_mb = json.loads(sys.argv[1]), int(sys.argv[2])
    with open("/proc/self/status") as fh:
        size_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmSize:"))
    limit = (size_kb + cap_mb * 1024) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    report = {}
    for case, (snap, db) in cases.items():
        out = report[case] = {}
        try:
            verify_snapshot(snap)
            out["verify"] = "ok"
        except SnapshotError as exc:
            out["verify"] = exc.reason
            out["message"] = str(exc)
        except BaseException as exc:
            out["verify"] = "CRASH " + type(exc).__name__
        try:
            main(["import", snap, "--db", db])
        except SystemExit as exc:
            out["import_exit"] = exc.code
        except BaseException as exc:
            out["import_exit"] = "CRASH " + type(exc).__name__
        out["db_left"] = os.listdir(os.path.dirname(db))
    print(json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def capped(base: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case of CASES forged, then verified and imported in ONE capped child."""
    root = tmp_path_factory.mktemp("hostile")
    cases = {}
    for case, (forge, _reason, _words) in CASES.items():
        folder = root / case.replace("*", "^")
        snap = forge(Path(shutil.copytree(base, folder / "snap")))
        (folder / "new").mkdir()
        cases[case] = (str(snap), str(folder / "new" / "target.sqlite3"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")}
    env["XDG_CONFIG_HOME"] = str(root / "no-user-config")
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(cases), str(CAP_MB)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    report["stderr"] = done.stderr
    return report


@linux_only
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_snapshot_is_refused_under_a_memory_cap(
    capped: dict[str, Any], case: str
) -> None:
    _forge, reason, words = CASES[case]
    out = capped[case]
    assert out["verify"] == reason, out
    assert words in out["message"]
    assert out["import_exit"] == 1, out
    assert out["db_left"] == []  # the refused import created no store file
    assert "Traceback" not in capped["stderr"]


@pytest.mark.parametrize("case", ["lone-surrogate-id", "nan-vector", "created_at-10**400"])
def test_a_hostile_snapshot_leaves_an_existing_target_unchanged(
    base: Path, tmp_path: Path, case: str
) -> None:
    forge, reason, _words = CASES[case]
    snap = forge(Path(shutil.copytree(base, tmp_path / "snap")))
    with open_memory(tmp_path / "target.sqlite3") as target:
        target.add("kept", memory_id="keep", namespace="t")
        before = [m.to_dict() for m in target.list("t", include_deleted=True)]
        with pytest.raises(SnapshotError) as info:
            target.import_snapshot(snap, merge=True)
        assert info.value.reason == reason
        assert [m.to_dict() for m in target.list("t", include_deleted=True)] == before
        assert target.namespaces() == ["t"]


def test_a_failed_import_after_verify_removes_the_new_store(base: Path, tmp_path: Path) -> None:
    """The snapshot is sound but the import fails (its tokenizer differs from a new store's):
    the store file the command created for it is removed again."""
    with open_memory(tmp_path / "uni.sqlite3") as memory:
        memory.add("memory under another tokenizer")
    conn_path = tmp_path / "uni.sqlite3"
    conn = sqlite3.connect(conn_path)
    conn.execute("UPDATE meta SET value = 'unicode61' WHERE key = 'tokenizer'")
    conn.commit()
    conn.close()
    with open_memory(conn_path) as memory:
        memory.export_snapshot(tmp_path / "uni-snap")
    target = tmp_path / "new" / "target.sqlite3"
    with pytest.raises(SystemExit) as info:
        main(["import", str(tmp_path / "uni-snap"), "--db", str(target)])
    assert info.value.code == 1
    assert not target.exists() and not list(target.parent.glob("target*"))


def test_counts_must_agree_with_each_other(base: Path, tmp_path: Path) -> None:
    for edit, words in [
        (lambda m: m["counts"].update(live=99), "deleted + counts.live"),
        (lambda m: m["files"][0].update(lines=4), "is not counts.memories"),
        (lambda m: m["counts"].update(revisions=-1), "integer >= 0"),
    ]:
        snap = _forge(Path(shutil.copytree(base, tmp_path / "s")), edit=edit)
        with pytest.raises(SnapshotError, match="manifest was edited") as info:
            verify_snapshot(snap)
        assert words in str(info.value)
        shutil.rmtree(snap)


def test_export_refuses_a_memory_longer_than_a_line_may_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The line cap holds for what export writes too, so every export can be imported. (The
    cap is lowered here: a real 32 MiB memory would take long to build.)"""
    monkeypatch.setattr(export_module, "MAX_LINE_BYTES", 4000)
    with open_memory(tmp_path / "s.sqlite3") as memory:
        memory.add("short", memory_id="short")
        memory.add("x " * 1000, memory_id="long")
        memory.update("long", "y " * 1000)
        with pytest.raises(SnapshotError, match=r"\(4000 bytes,") as info:
            memory.export_snapshot(tmp_path / "snap")
    assert info.value.reason == "limit"
    assert not (tmp_path / "snap").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".snap")]
