"""Portable snapshots of a store: export, verify, import. See docs/snapshots.md.

A snapshot is a folder with two files:

- ``manifest.json``: format name and version, the store's FTS tokenizer, the embedder spaces
  (descriptor and vector count), counts, the sha256 of every data file (as stored and
  uncompressed) and the snapshot id;
- ``memories.jsonl`` (or ``memories.jsonl.gz`` with ``gzip=True``): one JSON object per memory,
  sorted by (namespace, memory id), holding every revision (text, importance, metadata,
  created_at, content hash, vectors as base64 little-endian float32 per space), the tombstone,
  and each revision's ``seq``: its position in the store's write order. A clean import uses
  ``seq`` as row key, so the clone is exact down to each channel's tie order.

The snapshot id is ``sha256:`` over the canonical JSON of the manifest's covered fields
(format, version, store, spaces, counts) and the uncompressed content hash of every file, so it
names the content: a plain and a gzipped export of one store share it, and any edit of the
manifest or of the data changes it.

An import is ONE write transaction: a truncated, tampered, wrong-version or hand-edited
snapshot raises :class:`SnapshotError` and leaves the target exactly as it was.
"""

from __future__ import annotations

import base64
import binascii
import gzip as gzip_module
import hashlib
import io
import json
import logging
import os
import shutil
import sqlite3
import tempfile
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import attrs
import numpy as np

from rankseam.checks import is_real
from rankseam.embedding import EmbedderDescriptor
from rankseam.errors import ValidationError
from rankseam.store.records import (
    check_importance,
    check_memory_id,
    check_namespace,
    check_text,
    content_hash,
    encode_metadata,
)
from rankseam.store.schema import SCHEMA_VERSION
from rankseam.store.sqlite import SQLiteStore

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "ExportReport",
    "ImportReport",
    "SnapshotError",
    "VerifyReport",
    "export_snapshot",
    "import_snapshot",
    "verify_snapshot",
]

log = logging.getLogger("rankseam.snapshot")

FORMAT_NAME = "rankseam-snapshot"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DATA_NAME = "memories.jsonl"
_DATA_PATHS = {DATA_NAME: None, DATA_NAME + ".gz": "gzip"}
_MEMORY_KEYS = frozenset({"namespace", "id", "deleted", "deleted_at", "revisions"})
_REVISION_KEYS = frozenset(
    {"revision", "seq", "text", "importance", "metadata", "created_at", "content_hash", "vectors"}
)
_BATCH = 2000
_CHUNK = 1 << 20
_GZIP_LEVEL = 6  # level 9 took ~7x as long here for 1.5 % less size


class SnapshotError(ValidationError):
    """A snapshot cannot be written, verified or imported. ``reason`` is a short machine-readable
    cause: ``missing``, ``exists``, ``not_a_snapshot``, ``version``, ``manifest``, ``truncated``,
    ``checksum``, ``content``, ``target_not_empty``, ``tokenizer``, ``store``."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


# -- reports -------------------------------------------------------------------------------


def _rate(count: int, seconds: float) -> float | None:
    return round(count / seconds, 1) if seconds > 0 else None


@attrs.frozen
class ExportReport:
    path: str
    snapshot_id: str
    gzip: bool
    memories: int
    revisions: int
    vectors: int
    bytes: int
    seconds: float

    @property
    def memories_per_second(self) -> float | None:
        return _rate(self.memories, self.seconds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "snapshot_id": self.snapshot_id,
            "gzip": self.gzip,
            "memories": self.memories,
            "revisions": self.revisions,
            "vectors": self.vectors,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "memories_per_second": self.memories_per_second,
        }


@attrs.frozen
class VerifyReport:
    path: str
    snapshot_id: str
    format_version: int
    gzip: bool
    tokenizer: str
    namespaces: tuple[str, ...]
    memories: int
    deleted: int
    revisions: int
    vectors: int
    spaces: tuple[str, ...]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "path": self.path,
            "snapshot_id": self.snapshot_id,
            "format_version": self.format_version,
            "gzip": self.gzip,
            "tokenizer": self.tokenizer,
            "namespaces": list(self.namespaces),
            "memories": self.memories,
            "deleted": self.deleted,
            "revisions": self.revisions,
            "vectors": self.vectors,
            "spaces": list(self.spaces),
            "seconds": round(self.seconds, 3),
        }


@attrs.frozen
class ImportReport:
    """What an import did. Merge counters: ``added`` (new memory), ``updated`` (the snapshot
    held newer revisions of a memory whose history matches), ``unchanged`` (identical),
    ``kept_newer`` (the target's head revision is as new or newer: left alone) and ``conflicts``
    (the histories differ at a revision both hold: the target's is kept)."""

    path: str
    snapshot_id: str
    merge: bool
    memories: int
    added: int
    updated: int
    unchanged: int
    kept_newer: int
    conflicts: int
    revisions_written: int
    vectors_written: int
    seconds: float
    notes: tuple[str, ...] = ()

    @property
    def memories_per_second(self) -> float | None:
        return _rate(self.memories, self.seconds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "snapshot_id": self.snapshot_id,
            "merge": self.merge,
            "memories": self.memories,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "kept_newer": self.kept_newer,
            "conflicts": self.conflicts,
            "revisions_written": self.revisions_written,
            "vectors_written": self.vectors_written,
            "seconds": round(self.seconds, 3),
            "memories_per_second": self.memories_per_second,
            "notes": list(self.notes),
        }


# -- helpers -------------------------------------------------------------------------------


def _canonical(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode("utf-8")


def _store_of(source: Any) -> SQLiteStore:
    store = getattr(source, "store", source)
    if not isinstance(store, SQLiteStore):
        raise TypeError(f"expected a rankseam Memory or SQLiteStore, got {type(source).__name__}")
    return store


def _active_space(source: Any) -> EmbedderDescriptor | None:
    embedder = getattr(source, "embedder", None)
    descriptor = getattr(embedder, "descriptor", None)
    return descriptor if isinstance(descriptor, EmbedderDescriptor) else None


@contextmanager
def _read_transaction(store: SQLiteStore) -> Iterator[sqlite3.Connection]:
    """One read transaction: the export sees one consistent state while writers carry on."""
    conn = store._conn()  # the snapshot belongs to the store package
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def _snapshot_id(manifest: Mapping[str, Any]) -> str:
    body = {key: manifest[key] for key in ("format", "format_version", "store", "spaces", "counts")}
    body["content"] = sorted([f["name"], f["content_sha256"]] for f in manifest["files"])
    return "sha256:" + hashlib.sha256(_canonical(body)).hexdigest()


def _file_sha256(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def _descriptor(entry: Mapping[str, Any]) -> EmbedderDescriptor:
    desc = entry["descriptor"]
    fields = {k: desc[k] for k in ("name", "dimensions", "normalization", "revision")}
    descriptor = EmbedderDescriptor(**fields)
    if descriptor.key != entry["key"] or desc.get("key", descriptor.key) != descriptor.key:
        raise ValueError(f"space key {entry['key']!r} does not match its descriptor")
    return descriptor


# -- export --------------------------------------------------------------------------------


def _prepare_out(out: Path) -> None:
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        raise SnapshotError(
            f"{str(out)!r} already exists; export into a new folder (or remove it first)",
            reason="exists",
        )
    out.parent.mkdir(parents=True, exist_ok=True)


def _check_store(conn: sqlite3.Connection, spaces: Sequence[str]) -> None:
    marks = ",".join("?" * len(spaces))
    stray = conn.execute(
        f"SELECT count(*) FROM vectors WHERE space NOT IN ({marks})"
        if spaces
        else "SELECT count(*) FROM vectors",
        tuple(spaces),
    ).fetchone()[0]
    if stray:
        raise SnapshotError(
            f"the store holds {stray} vector(s) of an unregistered embedder space; run "
            "`rankseam reembed` with that embedder (which registers it) and export again",
            reason="store",
        )


def _seq_of(conn: sqlite3.Connection) -> tuple[np.ndarray | None, int]:
    """rid -> write-order position 1..N. None means rids are already dense (seq == rid)."""
    n, lo, hi = conn.execute("SELECT count(*), min(rid), max(rid) FROM revisions").fetchone()
    if n == 0 or (lo == 1 and hi == n):
        return None, int(n)
    rids = np.fromiter(
        (r for (r,) in conn.execute("SELECT rid FROM revisions ORDER BY rid")),
        dtype=np.int64,
        count=n,
    )
    return rids, int(n)


def export_snapshot(
    source: Any, out: str | os.PathLike[str], *, gzip: bool = False
) -> ExportReport:
    """Write a snapshot of ``source`` (a :class:`~rankseam.memory.Memory` or a
    :class:`SQLiteStore`) into the new folder ``out``. The store is read in one read
    transaction (writers are not blocked); the folder appears complete or not at all."""
    started = time.perf_counter()
    store = _store_of(source)
    out_path = Path(out).expanduser()
    _prepare_out(out_path)
    tmp = Path(
        tempfile.mkdtemp(prefix=f".{out_path.name}.", suffix=".partial", dir=out_path.parent)
    )
    data_path = tmp / (DATA_NAME + (".gz" if gzip else ""))
    try:
        with _read_transaction(store) as conn:
            spaces = [
                (key, json.loads(desc))
                for key, desc in conn.execute("SELECT key, descriptor FROM spaces ORDER BY key")
            ]
            _check_store(conn, [key for key, _d in spaces])
            with data_path.open("wb") as raw:
                stream: io.BufferedIOBase = (
                    gzip_module.GzipFile(
                        filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=_GZIP_LEVEL
                    )
                    if gzip
                    else raw
                )
                try:
                    counts, vectors, content_sha, lines = _write_records(conn, stream, spaces)
                finally:
                    if stream is not raw:
                        stream.close()
        stored_sha, size = _file_sha256(data_path)
        manifest: dict[str, Any] = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "store": {"schema_version": SCHEMA_VERSION, "tokenizer": store.tokenizer},
            "spaces": [
                {"key": key, "descriptor": desc, "vectors": vectors.get(key, 0)}
                for key, desc in spaces
            ],
            "counts": counts,
            "files": [
                {
                    "name": DATA_NAME,
                    "path": data_path.name,
                    "compression": "gzip" if gzip else None,
                    "bytes": size,
                    "sha256": stored_sha,
                    "content_sha256": content_sha,
                    "lines": lines,
                }
            ],
        }
        manifest["snapshot_id"] = _snapshot_id(manifest)
        manifest["exported_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        manifest["created_by"] = _created_by()
        (tmp / MANIFEST).write_text(
            json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
        if out_path.exists():
            out_path.rmdir()  # empty (checked above)
        tmp.rename(out_path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report = ExportReport(
        path=str(out_path),
        snapshot_id=manifest["snapshot_id"],
        gzip=gzip,
        memories=counts["memories"],
        revisions=counts["revisions"],
        vectors=sum(vectors.values()),
        bytes=size,
        seconds=time.perf_counter() - started,
    )
    log.info(
        "snapshot exported",
        extra={"event": "snapshot.export", "memories": report.memories, "gzip": gzip},
    )
    return report


def _created_by() -> str:
    from rankseam.version import __version__

    return f"rankseam {__version__}"


def _write_records(
    conn: sqlite3.Connection, stream: io.BufferedIOBase, spaces: Sequence[tuple[str, Any]]
) -> tuple[dict[str, Any], dict[str, int], str, int]:
    seq_rids, total_revisions = _seq_of(conn)
    joins = "".join(
        f" LEFT JOIN vectors v{i} ON v{i}.space = ? AND v{i}.rid = r.rid"
        for i in range(len(spaces))
    )
    vector_cols = "".join(f", v{i}.vector" for i in range(len(spaces)))
    cursor = conn.execute(
        "SELECT m.namespace, m.memory_id, m.deleted, m.deleted_at, m.head_revision, r.rid, "
        "r.revision, r.text, r.importance, r.metadata, r.created_at, r.content_hash, r.live"
        f"{vector_cols} FROM memories m JOIN revisions r ON r.namespace = m.namespace AND "
        f"r.memory_id = m.memory_id{joins} ORDER BY m.namespace, m.memory_id, r.revision",
        [key for key, _d in spaces],
    )
    keys = [key for key, _d in spaces]
    digest = hashlib.sha256()
    per_ns: dict[str, dict[str, int]] = {}
    vectors: dict[str, int] = {}
    totals = {"memories": 0, "deleted": 0, "revisions": 0, "live": 0}
    current: dict[str, Any] | None = None
    lines = 0

    def flush(record: dict[str, Any] | None) -> None:
        nonlocal lines
        if record is None:
            return
        head = record.pop("_head")
        if [r["revision"] for r in record["revisions"]] != list(range(1, head + 1)):
            raise SnapshotError(
                f"memory {record['id']!r} in namespace {record['namespace']!r} has a gap in its "
                "revisions; the store is inconsistent (restore it from a backup)",
                reason="store",
            )
        line = _canonical(record) + b"\n"
        digest.update(line)
        stream.write(line)
        lines += 1

    for row in cursor:
        ns, mid, deleted, deleted_at, head, rid, rev, text, imp, meta, created, chash, live = row[
            :13
        ]
        if current is None or current["namespace"] != ns or current["id"] != mid:
            flush(current)
            current = {
                "namespace": ns,
                "id": mid,
                "deleted": bool(deleted),
                "deleted_at": deleted_at if deleted else None,
                "revisions": [],
                "_head": head,
            }
            counts = per_ns.setdefault(ns, {"memories": 0, "deleted": 0, "revisions": 0})
            counts["memories"] += 1
            counts["deleted"] += int(bool(deleted))
            totals["memories"] += 1
            totals["deleted"] += int(bool(deleted))
        expect_live = rev == head and not deleted
        if bool(live) != expect_live:
            raise SnapshotError(
                f"revision {rev} of memory {mid!r} in namespace {ns!r} has an inconsistent live "
                "flag; the store is inconsistent (restore it from a backup)",
                reason="store",
            )
        vecs = {}
        for key, blob in zip(keys, row[13:], strict=True):
            if blob is not None:
                vecs[key] = base64.b64encode(blob).decode("ascii")
                vectors[key] = vectors.get(key, 0) + 1
        seq = rid if seq_rids is None else int(np.searchsorted(seq_rids, rid)) + 1
        current["revisions"].append(
            {
                "revision": rev,
                "seq": seq,
                "text": text,
                "importance": imp,
                "metadata": json.loads(meta),
                "created_at": created,
                "content_hash": chash,
                "vectors": vecs,
            }
        )
        per_ns[ns]["revisions"] += 1
        totals["revisions"] += 1
        totals["live"] += int(expect_live)
    flush(current)
    if totals["revisions"] != total_revisions:
        raise SnapshotError(
            f"the store holds {total_revisions} revisions but only {totals['revisions']} belong "
            "to a memory; the store is inconsistent (restore it from a backup)",
            reason="store",
        )
    counts_out: dict[str, Any] = {**totals, "namespaces": per_ns}
    return counts_out, vectors, digest.hexdigest(), lines


# -- reading and verification --------------------------------------------------------------


def _fail(message: str, reason: str) -> SnapshotError:
    return SnapshotError(message, reason=reason)


@attrs.frozen
class _Revision:
    revision: int
    seq: int
    text: str
    importance: float
    metadata: str  # canonical JSON, as the store keeps it
    created_at: float
    content_hash: str
    vectors: tuple[tuple[str, bytes], ...]


@attrs.frozen
class _Memory:
    namespace: str
    memory_id: str
    deleted: bool
    deleted_at: float | None
    revisions: tuple[_Revision, ...]


@attrs.frozen
class _Snapshot:
    """A snapshot whose manifest and file checksums were checked."""

    folder: Path
    manifest: Mapping[str, Any]
    spaces: Mapping[str, EmbedderDescriptor]
    data_path: Path
    compression: str | None

    @property
    def snapshot_id(self) -> str:
        return str(self.manifest["snapshot_id"])

    @property
    def counts(self) -> Mapping[str, Any]:
        return self.manifest["counts"]  # type: ignore[no-any-return]

    @property
    def file(self) -> Mapping[str, Any]:
        return self.manifest["files"][0]  # type: ignore[no-any-return]


def _load_manifest(folder: Path) -> dict[str, Any]:
    if not folder.exists():
        raise _fail(f"no snapshot at {str(folder)!r}; check the path", "missing")
    path = folder / MANIFEST
    if not folder.is_dir() or not path.is_file():
        raise _fail(
            f"{str(folder)!r} is not a rankseam snapshot (no {MANIFEST}); pass the folder that "
            "`rankseam export` wrote",
            "not_a_snapshot",
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail(
            f"{MANIFEST} of {str(folder)!r} is not valid JSON ({exc}); it was truncated or "
            "edited: export the store again",
            "manifest",
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise _fail(
            f"{str(folder)!r} is not a rankseam snapshot (format is not {FORMAT_NAME!r})",
            "not_a_snapshot",
        )
    version = manifest.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise _fail(f"snapshot format version {version!r} is not valid", "version")
    if version > FORMAT_VERSION:
        raise _fail(
            f"the snapshot has format version {version}, newer than this rankseam reads "
            f"({FORMAT_VERSION}); upgrade rankseam to import it",
            "version",
        )
    if version != FORMAT_VERSION:  # pragma: no cover - no older version exists yet
        raise _fail(f"snapshot format version {version} is no longer supported", "version")
    return manifest


def _check_manifest(manifest: dict[str, Any], folder: Path) -> _Snapshot:
    edited = (
        "the manifest was edited or is damaged ({}); export the store again rather than "
        "editing a snapshot"
    )
    try:
        store = manifest["store"]
        if not isinstance(store.get("tokenizer"), str):
            raise ValueError("store.tokenizer is missing")
        spaces: dict[str, EmbedderDescriptor] = {}
        for entry in manifest["spaces"]:
            spaces[entry["key"]] = _descriptor(entry)
        counts = manifest["counts"]
        for key in ("memories", "deleted", "revisions", "live"):
            if isinstance(counts[key], bool) or not isinstance(counts[key], int):
                raise ValueError(f"counts.{key} is not an integer")
        files = manifest["files"]
        if not isinstance(files, list) or len(files) != 1 or files[0].get("name") != DATA_NAME:
            raise ValueError(f"files must list exactly {DATA_NAME!r}")
        file = files[0]
        if file.get("path") not in _DATA_PATHS:  # never follow a path out of the folder
            raise ValueError(f"unexpected data file {file.get('path')!r}")
        if file.get("compression") != _DATA_PATHS[file["path"]]:
            raise ValueError("compression does not match the data file name")
        for key in ("bytes", "lines"):
            if isinstance(file.get(key), bool) or not isinstance(file.get(key), int):
                raise ValueError(f"files[0].{key} is not an integer")
        expected = _snapshot_id(manifest)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _fail(edited.format(exc), "manifest") from None
    if manifest.get("snapshot_id") != expected:
        raise _fail(edited.format("its snapshot id does not match its content"), "manifest")
    return _Snapshot(folder, manifest, spaces, folder / file["path"], file["compression"])


def _check_files(snap: _Snapshot) -> None:
    file = snap.file
    path = snap.data_path
    if not path.is_file():
        raise _fail(f"the snapshot lacks its data file {path.name!r}; copy it whole", "missing")
    sha, size = _file_sha256(path)
    if size < file["bytes"]:
        raise _fail(
            f"{path.name} is truncated ({size} of {file['bytes']} bytes); copy the snapshot "
            "again or export it again",
            "truncated",
        )
    if size != file["bytes"] or sha != file["sha256"]:
        raise _fail(
            f"{path.name} does not match its checksum in {MANIFEST} (sha256 {sha[:12]}..., "
            f"expected {str(file['sha256'])[:12]}...); the file was modified or damaged: "
            "export the store again",
            "checksum",
        )


def _open_snapshot(path: str | os.PathLike[str]) -> _Snapshot:
    folder = Path(path).expanduser()
    snap = _check_manifest(_load_manifest(folder), folder)
    _check_files(snap)
    return snap


class _HashingReader(io.RawIOBase):
    def __init__(self, inner: IO[bytes]) -> None:
        self._inner = inner
        self.digest = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._inner.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.digest.update(data)
        self.size += n
        return n


class _RecordReader:
    """Streams and validates the records of a checked snapshot; :meth:`finish` checks totals."""

    def __init__(self, snap: _Snapshot) -> None:
        self.snap = snap
        total = snap.counts["revisions"]
        self._seen = bytearray(total + 1)
        self.memories = self.deleted = self.revisions = self.live = 0
        self.vectors: dict[str, int] = {}
        self.per_ns: dict[str, dict[str, int]] = {}
        self._content = hashlib.sha256()
        self._lines = 0
        self._raw: _HashingReader | None = None

    def __iter__(self) -> Iterator[_Memory]:
        with self.snap.data_path.open("rb") as fh:
            self._raw = _HashingReader(fh)
            buffered = io.BufferedReader(self._raw, _CHUNK)
            stream: io.BufferedIOBase = (
                gzip_module.GzipFile(fileobj=buffered, mode="rb")
                if self.snap.compression == "gzip"
                else buffered
            )
            previous: tuple[str, str] | None = None
            try:
                for line in stream:
                    self._lines += 1
                    self._content.update(line)
                    if not line.endswith(b"\n"):
                        raise _fail(
                            f"line {self._lines} of {DATA_NAME} is cut short; the snapshot is "
                            "truncated: copy or export it again",
                            "truncated",
                        )
                    record = self._parse(line)
                    key = (record.namespace, record.memory_id)
                    if previous is not None and key <= previous:
                        raise self._content_error("memories are out of order or repeated")
                    previous = key
                    yield record
            except (EOFError, gzip_module.BadGzipFile, zlib.error, OSError) as exc:
                raise _fail(
                    f"{self.snap.data_path.name} cannot be decompressed ({exc}); the snapshot "
                    "is truncated or damaged: export it again",
                    "truncated",
                ) from None

    def _content_error(self, what: str) -> SnapshotError:
        return _fail(
            f"line {self._lines} of {DATA_NAME}: {what}; the snapshot was edited or damaged: "
            "export the store again",
            "content",
        )

    def _parse(self, line: bytes) -> _Memory:
        try:
            obj = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self._content_error(f"not valid JSON ({exc})") from None
        try:
            return self._memory(obj)
        except ValidationError as exc:
            raise self._content_error(str(exc)) from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._content_error(f"malformed record ({exc!r})") from None

    def _memory(self, obj: Any) -> _Memory:
        if not isinstance(obj, dict) or set(obj) != _MEMORY_KEYS:
            raise ValueError(f"a memory record has exactly the keys {sorted(_MEMORY_KEYS)}")
        ns = check_namespace(obj["namespace"])
        mid = check_memory_id(obj["id"])
        deleted = obj["deleted"]
        if not isinstance(deleted, bool):
            raise ValueError("'deleted' must be true or false")
        deleted_at = obj["deleted_at"]
        if deleted:
            deleted_at = _finite(deleted_at, "deleted_at")
        elif deleted_at is not None:
            raise ValueError("'deleted_at' must be null for a memory that is not deleted")
        revs = obj["revisions"]
        if not isinstance(revs, list) or not revs:
            raise ValueError("a memory needs at least one revision")
        revisions = tuple(self._revision(r, i) for i, r in enumerate(revs, start=1))
        counts = self.per_ns.setdefault(ns, {"memories": 0, "deleted": 0, "revisions": 0})
        counts["memories"] += 1
        counts["deleted"] += int(deleted)
        counts["revisions"] += len(revisions)
        self.memories += 1
        self.deleted += int(deleted)
        self.revisions += len(revisions)
        self.live += int(not deleted)
        return _Memory(ns, mid, deleted, deleted_at, revisions)

    def _revision(self, obj: Any, expected: int) -> _Revision:
        if not isinstance(obj, dict) or set(obj) != _REVISION_KEYS:
            raise ValueError(f"a revision has exactly the keys {sorted(_REVISION_KEYS)}")
        if obj["revision"] != expected or isinstance(obj["revision"], bool):
            raise ValueError(f"revision {obj['revision']!r} found where {expected} belongs")
        seq = obj["seq"]
        if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq < len(self._seen):
            raise ValueError(f"seq {seq!r} is outside 1..{len(self._seen) - 1}")
        if self._seen[seq]:
            raise ValueError(f"seq {seq} is used twice")
        self._seen[seq] = 1
        text = check_text(obj["text"])
        if content_hash(text) != obj["content_hash"]:
            raise ValueError("the text does not match its content_hash")
        vectors = []
        raw_vectors = obj["vectors"]
        if not isinstance(raw_vectors, dict):
            raise ValueError("'vectors' must be an object")
        for key in sorted(raw_vectors):
            descriptor = self.snap.spaces.get(key)
            if descriptor is None:
                raise ValueError(f"vector of unknown space {key!r}")
            try:
                blob = base64.b64decode(raw_vectors[key], validate=True)
            except (binascii.Error, TypeError):
                raise ValueError(f"vector of space {key!r} is not valid base64") from None
            if len(blob) != descriptor.dimensions * 4:
                raise ValueError(
                    f"vector of space {key!r} has {len(blob)} bytes, expected "
                    f"{descriptor.dimensions * 4} (float32 x {descriptor.dimensions})"
                )
            vectors.append((key, blob))
            self.vectors[key] = self.vectors.get(key, 0) + 1
        return _Revision(
            revision=expected,
            seq=seq,
            text=text,
            importance=check_importance(obj["importance"]),
            metadata=encode_metadata(obj["metadata"]),
            created_at=_finite(obj["created_at"], "created_at"),
            content_hash=obj["content_hash"],
            vectors=tuple(vectors),
        )

    def finish(self) -> None:
        """Check the totals and hashes of the pass that just ended (raises SnapshotError)."""
        file = self.snap.file
        assert self._raw is not None
        if self._raw.digest.hexdigest() != file["sha256"]:
            raise _fail(
                f"{self.snap.data_path.name} changed while it was read; try again",
                "checksum",
            )
        problems = []
        if self._content.hexdigest() != file["content_sha256"] or self._lines != file["lines"]:
            problems.append("content hash or line count")
        counts = self.snap.counts
        mine = {
            "memories": self.memories,
            "deleted": self.deleted,
            "revisions": self.revisions,
            "live": self.live,
            "namespaces": self.per_ns,
        }
        problems += [k for k, v in mine.items() if counts.get(k) != v]
        declared = {key: entry["vectors"] for key, entry in _spaces_by_key(self.snap).items()}
        if declared != {key: self.vectors.get(key, 0) for key in declared}:
            problems.append("vector counts")
        if problems:
            raise _fail(
                f"the content of {DATA_NAME} does not match {MANIFEST} ({', '.join(problems)}); "
                "the snapshot was edited or damaged: export the store again",
                "content",
            )


def _spaces_by_key(snap: _Snapshot) -> dict[str, Mapping[str, Any]]:
    return {entry["key"]: entry for entry in snap.manifest["spaces"]}


def _finite(value: Any, what: str) -> float:
    if not is_real(value):
        raise ValueError(f"{what!r} must be a finite number, got {value!r}")
    return float(value)


def verify_snapshot(path: str | os.PathLike[str]) -> VerifyReport:
    """Check a snapshot completely (manifest, checksums, every record); raise
    :class:`SnapshotError` naming the first problem."""
    started = time.perf_counter()
    snap = _open_snapshot(path)
    reader = _RecordReader(snap)
    for _record in reader:
        pass
    reader.finish()
    return VerifyReport(
        path=str(snap.folder),
        snapshot_id=snap.snapshot_id,
        format_version=int(snap.manifest["format_version"]),
        gzip=snap.compression == "gzip",
        tokenizer=str(snap.manifest["store"]["tokenizer"]),
        namespaces=tuple(sorted(reader.per_ns)),
        memories=reader.memories,
        deleted=reader.deleted,
        revisions=reader.revisions,
        vectors=sum(reader.vectors.values()),
        spaces=tuple(sorted(snap.spaces)),
        seconds=time.perf_counter() - started,
    )


# -- import --------------------------------------------------------------------------------


class _Writer:
    """Batched inserts of one import transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.revisions: list[tuple[Any, ...]] = []
        self.fts: list[tuple[int, str]] = []
        self.vectors: list[tuple[str, int, bytes]] = []
        self.memories: list[tuple[Any, ...]] = []
        self.revisions_written = 0
        self.vectors_written = 0

    def insert_clean(self, mem: _Memory) -> None:
        """Clean target: rid = seq, so search tie-breaks follow the source's write order."""
        last = len(mem.revisions)
        for rev in mem.revisions:
            live = rev.revision == last and not mem.deleted
            self.revisions.append(_revision_row(mem, rev, live, rid=rev.seq))
            if live:
                self.fts.append((rev.seq, rev.text))
            self.vectors.extend((key, rev.seq, blob) for key, blob in rev.vectors)
        head = mem.revisions[-1]
        self.memories.append(
            (mem.namespace, mem.memory_id, head.seq, last, int(mem.deleted), mem.deleted_at)
        )
        if len(self.revisions) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        c = self.conn
        c.executemany(
            "INSERT INTO revisions(rid, namespace, memory_id, revision, text, importance, "
            "metadata, created_at, content_hash, live) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self.revisions,
        )
        c.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", self.fts)
        c.executemany("INSERT INTO vectors(space, rid, vector) VALUES (?, ?, ?)", self.vectors)
        c.executemany(
            "INSERT INTO memories(namespace, memory_id, head_rid, head_revision, deleted, "
            "deleted_at) VALUES (?, ?, ?, ?, ?, ?)",
            self.memories,
        )
        self.revisions_written += len(self.revisions)
        self.vectors_written += len(self.vectors)
        self.revisions.clear()
        self.fts.clear()
        self.vectors.clear()
        self.memories.clear()

    def append(self, mem: _Memory, revisions: Sequence[_Revision]) -> int:
        """Merge: insert ``revisions`` (the newest part of ``mem``) with fresh rids; set the
        memory row to the snapshot's head and tombstone. Returns the head rid."""
        last = len(mem.revisions)
        rid = 0
        for rev in revisions:
            live = rev.revision == last and not mem.deleted
            cur = self.conn.execute(
                "INSERT INTO revisions(namespace, memory_id, revision, text, importance, "
                "metadata, created_at, content_hash, live) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                _revision_row(mem, rev, live)[1:],
            )
            rid = int(cur.lastrowid or 0)
            if live:
                self.conn.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (rid, rev.text))
            self.conn.executemany(
                "INSERT INTO vectors(space, rid, vector) VALUES (?, ?, ?)",
                [(key, rid, blob) for key, blob in rev.vectors],
            )
            self.revisions_written += 1
            self.vectors_written += len(rev.vectors)
        self.conn.execute(
            "INSERT INTO memories(namespace, memory_id, head_rid, head_revision, deleted, "
            "deleted_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(namespace, memory_id) DO UPDATE "
            "SET head_rid = excluded.head_rid, head_revision = excluded.head_revision, "
            "deleted = excluded.deleted, deleted_at = excluded.deleted_at",
            (mem.namespace, mem.memory_id, rid, last, int(mem.deleted), mem.deleted_at),
        )
        return rid


def _revision_row(mem: _Memory, rev: _Revision, live: bool, rid: int = 0) -> tuple[Any, ...]:
    return (
        rid,
        mem.namespace,
        mem.memory_id,
        rev.revision,
        rev.text,
        rev.importance,
        rev.metadata,
        rev.created_at,
        rev.content_hash,
        int(live),
    )


@attrs.define
class _MergeCounts:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    kept_newer: int = 0
    conflicts: int = 0


def _merge_one(conn: sqlite3.Connection, writer: _Writer, mem: _Memory, n: _MergeCounts) -> bool:
    """Merge one memory; never overwrite a revision the target holds. True when written."""
    head = conn.execute(
        "SELECT head_rid, head_revision, deleted FROM memories WHERE namespace = ? AND "
        "memory_id = ?",
        (mem.namespace, mem.memory_id),
    ).fetchone()
    if head is None:
        writer.append(mem, mem.revisions)
        n.added += 1
        return True
    head_rid, head_rev, head_deleted = head
    theirs = conn.execute(
        "SELECT revision, content_hash, importance, metadata FROM revisions WHERE namespace = ? "
        "AND memory_id = ? AND revision <= ? ORDER BY revision",
        (mem.namespace, mem.memory_id, min(head_rev, len(mem.revisions))),
    ).fetchall()
    ours = [(r.revision, r.content_hash, r.importance, r.metadata) for r in mem.revisions]
    if [tuple(t) for t in theirs] != ours[: len(theirs)]:
        n.conflicts += 1
        return False
    if head_rev >= len(mem.revisions):
        if head_rev == len(mem.revisions) and bool(head_deleted) == mem.deleted:
            n.unchanged += 1
        else:
            n.kept_newer += 1
        return False
    if not head_deleted:  # retire the target's live head: the snapshot's is newer
        SQLiteStore._retire(conn, head_rid)
    writer.append(mem, mem.revisions[head_rev:])
    n.updated += 1
    return True


def import_snapshot(
    target: Any, path: str | os.PathLike[str], *, merge: bool = False
) -> ImportReport:
    """Hydrate ``target`` (a :class:`~rankseam.memory.Memory` or :class:`SQLiteStore`) from a
    snapshot in ONE write transaction. The target must hold no memories unless ``merge=True``;
    a merge adds what the target lacks and never overwrites a revision it holds. Any problem
    raises :class:`SnapshotError` and leaves the target exactly as it was."""
    started = time.perf_counter()
    store = _store_of(target)
    snap = _open_snapshot(path)
    tokenizer = snap.manifest["store"]["tokenizer"]
    if tokenizer != store.tokenizer:
        raise _fail(
            f"the snapshot comes from a store with FTS tokenizer {tokenizer!r}, the target uses "
            f"{store.tokenizer!r}; lexical scores would differ: import into a store created "
            f"with tokenizer {tokenizer!r}",
            "tokenizer",
        )
    counts = _MergeCounts()
    reader = _RecordReader(snap)
    touched: set[str] = set()
    with store._write() as conn:  # one transaction: all or nothing
        existing = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        stray = conn.execute("SELECT count(*) FROM revisions").fetchone()[0]
        if (existing or stray) and not merge:
            raise _fail(
                f"the target store already holds {existing} memories; import into a new "
                "database (--db NEW), or merge into this one (--merge / merge=True)",
                "target_not_empty",
            )
        for key in _spaces_by_key(snap):
            conn.execute(
                "INSERT OR IGNORE INTO spaces(key, descriptor) VALUES (?, ?)",
                (key, json.dumps(snap.spaces[key].to_dict(), sort_keys=True)),
            )
        writer = _Writer(conn)
        for mem in reader:
            if not merge:
                writer.insert_clean(mem)
                touched.add(mem.namespace)
            elif _merge_one(conn, writer, mem, counts):
                touched.add(mem.namespace)
        writer.flush()
        reader.finish()
        for ns in sorted(touched):
            # A new version (retired rows drop out of other processes' caches) and a new
            # vector epoch (vectors were written for revisions that may be cached elsewhere).
            SQLiteStore._bump(conn, ns)
            conn.execute(
                "UPDATE namespaces SET vector_epoch = vector_epoch + 1 WHERE name = ?", (ns,)
            )
    if not merge:
        counts.added = reader.memories
    notes = []
    active = _active_space(target)
    if active is not None and reader.memories and active.key not in snap.spaces:
        notes.append(
            f"the snapshot holds no vectors of the active embedder space {active.key!r}; run "
            "`rankseam reembed` so that vector search covers the imported memories"
        )
    report = ImportReport(
        path=str(snap.folder),
        snapshot_id=snap.snapshot_id,
        merge=merge,
        memories=reader.memories,
        added=counts.added,
        updated=counts.updated,
        unchanged=counts.unchanged,
        kept_newer=counts.kept_newer,
        conflicts=counts.conflicts,
        revisions_written=writer.revisions_written,
        vectors_written=writer.vectors_written,
        seconds=time.perf_counter() - started,
        notes=tuple(notes),
    )
    log.info(
        "snapshot imported",
        extra={"event": "snapshot.import", "memories": report.memories, "merge": merge},
    )
    return report
