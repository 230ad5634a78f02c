"""Reading and verification: a snapshot's manifest, checksums and every record checked;
:class:`RecordReader` streams the checked records (an import reads them the same way)."""

from __future__ import annotations

import base64
import binascii
import gzip as gzip_module
import hashlib
import io
import os
import time
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import attrs
import numpy as np

from rankseam.checks import is_int, is_real, parse_json
from rankseam.embedding import EmbedderDescriptor, unnormalised_row
from rankseam.errors import ValidationError
from rankseam.snapshot.feedback import read_feedback
from rankseam.snapshot.format import (
    CHUNK,
    DATA_NAME,
    DATA_PATHS,
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST,
    MAX_GZIP_RATIO,
    MAX_LINE_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_MANIFEST_VALUES,
    MAX_RECORD_DEPTH,
    MAX_RECORD_VALUES,
    MEMORY_KEYS,
    MIN_REVISION_BYTES,
    REVISION_KEYS,
    REVISION_KEYS_V1,
    SnapshotError,
    descriptor_of,
    file_sha256,
    snapshot_id,
)
from rankseam.snapshot.reports import VerifyReport
from rankseam.store.records import (
    MemoryRows,
    RevisionRow,
    check_derived_from,
    check_importance,
    check_memory_id,
    check_namespace,
    check_text,
    check_thread,
    content_hash,
    encode_metadata,
    placed,
)

__all__ = ["CheckedSnapshot", "RecordReader", "open_snapshot", "verify_snapshot"]


def _fail(message: str, reason: str) -> SnapshotError:
    return SnapshotError(message, reason=reason)


@attrs.frozen
class CheckedSnapshot:
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
    size = path.stat().st_size
    if size > MAX_MANIFEST_BYTES:
        raise _fail(
            f"{MANIFEST} of {str(folder)!r} is {size} bytes, more than the {MAX_MANIFEST_BYTES} "
            "a snapshot's manifest may have; it is not one `rankseam export` wrote",
            "limit",
        )
    try:
        manifest = parse_json(path.read_bytes(), max_values=MAX_MANIFEST_VALUES)
    except ValueError as exc:
        raise _fail(
            f"{MANIFEST} of {str(folder)!r} is {exc}; it was truncated or edited: export the "
            "store again",
            "manifest",
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise _fail(
            f"{str(folder)!r} is not a rankseam snapshot (format is not {FORMAT_NAME!r})",
            "not_a_snapshot",
        )
    version = manifest.get("format_version")
    if not is_int(version) or version < 1:
        raise _fail(f"snapshot format version {version!r} is not valid", "version")
    if version > FORMAT_VERSION:
        raise _fail(
            f"the snapshot has format version {version}, newer than this rankseam reads "
            f"({FORMAT_VERSION}); upgrade rankseam to import it",
            "version",
        )
    # every older version still imports (version 1: revisions without their structure)
    return manifest


def _check_manifest(manifest: dict[str, Any], folder: Path) -> CheckedSnapshot:
    edited = (
        "the manifest was edited or is damaged ({}); export the store again rather than "
        "editing a snapshot"
    )
    try:
        store = manifest["store"]
        if not isinstance(store.get("tokenizer"), str):
            raise ValueError("store.tokenizer is missing")
        if not isinstance(store.get("kind", "sqlite"), str):
            raise ValueError("store.kind is not a store name")
        spaces: dict[str, EmbedderDescriptor] = {}
        for entry in manifest["spaces"]:
            spaces[entry["key"]] = descriptor_of(entry)
        counts = manifest["counts"]
        for key in ("memories", "deleted", "revisions", "live"):
            if not is_int(counts[key]) or counts[key] < 0:
                raise ValueError(f"counts.{key} is not an integer >= 0")
        files = manifest["files"]
        if not isinstance(files, list) or len(files) != 1 or files[0].get("name") != DATA_NAME:
            raise ValueError(f"files must list exactly {DATA_NAME!r}")
        file = files[0]
        if file.get("path") not in DATA_PATHS:  # never follow a path out of the folder
            raise ValueError(f"unexpected data file {file.get('path')!r}")
        if file.get("compression") != DATA_PATHS[file["path"]]:
            raise ValueError("compression does not match the data file name")
        for key in ("bytes", "lines"):
            if not is_int(file.get(key)) or file[key] < 0:
                raise ValueError(f"files[0].{key} is not an integer >= 0")
        expected = snapshot_id(manifest)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _fail(edited.format(exc), "manifest") from None
    if manifest.get("snapshot_id") != expected:
        raise _fail(edited.format("its snapshot id does not match its content"), "manifest")
    try:
        _check_counts(counts, file)
    except ValueError as exc:
        raise _fail(edited.format(exc), "manifest") from None
    return CheckedSnapshot(folder, manifest, spaces, folder / file["path"], file["compression"])


def _check_counts(counts: Mapping[str, int], file: Mapping[str, Any]) -> None:
    """The counts must agree with each other and fit the data file's size, checked before
    anything is allocated for them (a forged ``revisions = 10**13`` costs nothing)."""
    memories, revisions = counts["memories"], counts["revisions"]
    if file["lines"] != memories:
        raise ValueError(f"files[0].lines ({file['lines']}) is not counts.memories ({memories})")
    if counts["deleted"] + counts["live"] != memories:
        raise ValueError("counts.deleted + counts.live is not counts.memories")
    if revisions < memories:
        raise ValueError("counts.revisions is smaller than counts.memories")
    ratio = MAX_GZIP_RATIO if file["compression"] == "gzip" else 1
    most = file["bytes"] * ratio // MIN_REVISION_BYTES
    if revisions > most:
        raise ValueError(
            f"counts.revisions ({revisions}) cannot fit in a data file of {file['bytes']} bytes "
            f"(at most {most})"
        )


def _check_files(snap: CheckedSnapshot) -> None:
    file = snap.file
    path = snap.data_path
    if not path.is_file():
        raise _fail(f"the snapshot lacks its data file {path.name!r}; copy it whole", "missing")
    sha, size = file_sha256(path)
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


def open_snapshot(path: str | os.PathLike[str]) -> CheckedSnapshot:
    folder = Path(path).expanduser()
    try:
        snap = _check_manifest(_load_manifest(folder), folder)
        _check_files(snap)
    except OSError as exc:
        raise _unreadable(folder, exc) from None
    return snap


def _unreadable(folder: Path, exc: OSError) -> SnapshotError:
    return _fail(
        f"cannot read the snapshot {str(folder)!r}: {exc.strerror or exc}; check the path and "
        "its permissions",
        "io",
    )


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


class RecordReader:
    """Streams and validates the records of a checked snapshot; :meth:`finish` checks totals."""

    def __init__(self, snap: CheckedSnapshot) -> None:
        self.snap = snap
        self._version = int(snap.manifest["format_version"])
        # one bit per revision (the count was checked against the data file's size)
        self._total = int(snap.counts["revisions"])
        self._seen = bytearray(self._total // 8 + 1)
        self.memories = self.deleted = self.revisions = self.live = 0
        self.vectors: dict[str, int] = {}
        self.per_ns: dict[str, dict[str, int]] = {}
        self._content = hashlib.sha256()
        self._lines = 0
        self._raw: _HashingReader | None = None

    def __iter__(self) -> Iterator[MemoryRows]:
        try:
            fh = self.snap.data_path.open("rb")
        except OSError as exc:
            raise _unreadable(self.snap.folder, exc) from None
        with fh:
            self._raw = _HashingReader(fh)
            buffered = io.BufferedReader(self._raw, CHUNK)
            stream: io.BufferedIOBase = (
                gzip_module.GzipFile(fileobj=buffered, mode="rb")
                if self.snap.compression == "gzip"
                else buffered
            )
            previous: tuple[str, str] | None = None
            declared = int(self.snap.file["lines"])
            try:
                # a line at a time, each read up to the cap: a long line (a gzip bomb) is
                # refused after MAX_LINE_BYTES, never held whole
                while line := stream.readline(MAX_LINE_BYTES + 1):
                    self._lines += 1
                    if len(line) > MAX_LINE_BYTES:
                        raise _fail(
                            f"line {self._lines} of {DATA_NAME} is longer than "
                            f"{MAX_LINE_BYTES} bytes, the most one memory's record may take; "
                            "the snapshot was edited or damaged: export the store again",
                            "limit",
                        )
                    if self._lines > declared:
                        raise self._content_error(
                            f"more lines than the {declared} {MANIFEST} declares"
                        )
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

    def _parse(self, line: bytes) -> MemoryRows:
        try:
            obj = parse_json(line, max_depth=MAX_RECORD_DEPTH, max_values=MAX_RECORD_VALUES)
        except ValueError as exc:
            raise self._content_error(str(exc)) from None
        try:
            return self._memory(obj)
        except ValidationError as exc:
            raise self._content_error(str(exc)) from None
        except ValueError as exc:
            raise self._content_error(str(exc)) from None
        except (KeyError, TypeError, AttributeError) as exc:
            raise self._content_error(f"malformed record ({type(exc).__name__}: {exc})") from None

    def _memory(self, obj: Any) -> MemoryRows:
        if not isinstance(obj, dict) or set(obj) != MEMORY_KEYS:
            raise ValueError(f"a memory record has exactly the keys {sorted(MEMORY_KEYS)}")
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
        return MemoryRows(ns, mid, deleted, deleted_at, revisions)

    def _revision(self, obj: Any, expected: int) -> RevisionRow:
        keys = REVISION_KEYS if self._version >= 2 else REVISION_KEYS_V1
        if not isinstance(obj, dict) or set(obj) != keys:
            raise ValueError(
                f"a revision of a format-{self._version} snapshot has exactly the keys "
                f"{sorted(keys)}"
            )
        if obj["revision"] != expected or isinstance(obj["revision"], bool):
            raise ValueError(f"revision {obj['revision']!r} found where {expected} belongs")
        seq = obj["seq"]
        if not is_int(seq) or not 1 <= seq <= self._total:
            raise ValueError(f"seq {seq!r} is outside 1..{self._total}")
        byte, bit = divmod(seq, 8)
        if self._seen[byte] >> bit & 1:
            raise ValueError(f"seq {seq} is used twice")
        self._seen[byte] |= 1 << bit
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
            values = np.frombuffer(blob, dtype="<f4")
            if not np.isfinite(values).all():
                raise ValueError(f"vector of space {key!r} holds NaN or infinite values")
            bad = unnormalised_row(values.reshape(1, -1), descriptor)
            if bad is not None:
                raise ValueError(
                    f"vector of space {key!r} has norm {bad[1]:.6g}, but the space is "
                    "L2-normalised (its vectors have norm 1: no store's index holds such a "
                    "vector); re-export from a store whose embedder normalises, or fix the "
                    "vectors"
                )
            vectors.append((key, blob))
            self.vectors[key] = self.vectors.get(key, 0) + 1
        created_at = _finite(obj["created_at"], "created_at")
        thread, position, source = None, None, None
        if self._version >= 2:
            thread = check_thread(obj["thread"])
            source = check_derived_from(obj["derived_from"])
            raw_position = obj["position"]
            if raw_position is not None:
                position = _finite(raw_position, "position")
            thread, position, source = placed((thread, position, source), created_at)
        return RevisionRow(
            revision=expected,
            seq=seq,
            text=text,
            importance=check_importance(obj["importance"]),
            metadata=encode_metadata(obj["metadata"]),
            created_at=created_at,
            content_hash=obj["content_hash"],
            vectors=tuple(vectors),
            thread=thread,
            position=position,
            derived_from=source,
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
        declared = {key: entry["vectors"] for key, entry in spaces_by_key(self.snap).items()}
        if declared != {key: self.vectors.get(key, 0) for key in declared}:
            problems.append("vector counts")
        if problems:
            raise _fail(
                f"the content of {DATA_NAME} does not match {MANIFEST} ({', '.join(problems)}); "
                "the snapshot was edited or damaged: export the store again",
                "content",
            )


def spaces_by_key(snap: CheckedSnapshot) -> dict[str, Mapping[str, Any]]:
    return {entry["key"]: entry for entry in snap.manifest["spaces"]}


def _finite(value: Any, what: str) -> float:
    if not is_real(value):
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise ValueError(f"{what!r} must be a finite number, got {shown}")
    return float(value)


def verify_snapshot(path: str | os.PathLike[str]) -> VerifyReport:
    """Check a snapshot completely (manifest, checksums, every record); raise
    :class:`SnapshotError` naming the first problem."""
    started = time.perf_counter()
    snap = open_snapshot(path)
    reader = RecordReader(snap)
    for _record in reader:
        pass
    reader.finish()
    read_feedback(snap.folder, snap.manifest)  # checked too, when it holds feedback
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
