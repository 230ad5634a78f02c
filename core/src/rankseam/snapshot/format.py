"""The snapshot format: names, version, the snapshot id, checksums, and the error every
snapshot operation raises. See docs/snapshots.md."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rankseam.embedding import EmbedderDescriptor
from rankseam.errors import ValidationError

__all__ = [
    "DATA_NAME",
    "DATA_PATHS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MANIFEST",
    "MAX_GZIP_RATIO",
    "MAX_LINE_BYTES",
    "MAX_MANIFEST_BYTES",
    "MAX_MANIFEST_VALUES",
    "MAX_RECORD_DEPTH",
    "MAX_RECORD_VALUES",
    "MEMORY_KEYS",
    "MIN_REVISION_BYTES",
    "REVISION_KEYS",
    "REVISION_KEYS_V1",
    "SnapshotError",
    "canonical",
    "descriptor_of",
    "file_sha256",
    "snapshot_id",
]

FORMAT_NAME = "rankseam-snapshot"
#: Version 2 (rankseam 0.2): each revision carries ``thread``, ``position`` and
#: ``derived_from``. Version 1 snapshots (without them) still import, the fields empty.
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
DATA_NAME = "memories.jsonl"
#: The data file names a manifest may list, with their compression.
DATA_PATHS = {DATA_NAME: None, DATA_NAME + ".gz": "gzip"}
MEMORY_KEYS = frozenset({"namespace", "id", "deleted", "deleted_at", "revisions"})
#: The keys of a revision in a format-1 snapshot.
REVISION_KEYS_V1 = frozenset(
    {"revision", "seq", "text", "importance", "metadata", "created_at", "content_hash", "vectors"}
)
#: The keys of a revision (format 2): version 1's and the revision's structure.
REVISION_KEYS = REVISION_KEYS_V1 | {"thread", "position", "derived_from"}
#: Bytes per read when hashing or streaming a data file.
CHUNK = 1 << 20

# Caps on what a snapshot may make a reader spend (docs/snapshots.md, "Limits"). Each is
# checked before the memory or time it guards is spent; a snapshot over one is refused with
# a SnapshotError, never a MemoryError or a traceback.

#: Largest ``manifest.json`` read.
MAX_MANIFEST_BYTES = 32 * 1024 * 1024
#: Longest line of the data file, uncompressed: one memory with all its revisions. Export
#: refuses a memory whose line would be longer, so every export can be imported.
MAX_LINE_BYTES = 32 * 1024 * 1024
#: Deepest JSON nesting of a record line (a revision's metadata nests at most 32 levels).
MAX_RECORD_DEPTH = 40
#: Most JSON values in one record line (parsing costs a Python object per value: this bounds
#: a line's parse to about 150 MB, where 32 MiB of ``[{},{},...`` would take 800 MB).
MAX_RECORD_VALUES = 2_000_000
#: Most JSON values in ``manifest.json`` (about four per namespace).
MAX_MANIFEST_VALUES = 2_000_000
#: Fewest bytes one revision takes in its line (its keys and content hash alone take more):
#: a manifest may claim at most (uncompressed data bytes / this) revisions.
MIN_REVISION_BYTES = 100
#: Most bytes deflate can expand one byte into (its format's own limit, about 1032:1): the
#: uncompressed size a gzipped data file can have is at most this times its size.
MAX_GZIP_RATIO = 1032


class SnapshotError(ValidationError):
    """A snapshot cannot be written, verified or imported. ``reason`` is a short machine-readable
    cause: ``missing``, ``exists``, ``not_a_snapshot``, ``version``, ``manifest``, ``truncated``,
    ``checksum``, ``content``, ``limit`` (over one of the caps), ``target_not_empty``,
    ``tokenizer``, ``store``, ``io`` (a file cannot be read or written)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def canonical(value: Any) -> bytes:
    """The canonical JSON of ``value`` (sorted keys, no spaces, UTF-8): what ids hash."""
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    ).encode("utf-8")


def snapshot_id(manifest: Mapping[str, Any]) -> str:
    """``sha256:`` over the manifest's covered fields and the content hash of every file."""
    body = {key: manifest[key] for key in ("format", "format_version", "store", "spaces", "counts")}
    body["content"] = sorted([f["name"], f["content_sha256"]] for f in manifest["files"])
    return "sha256:" + hashlib.sha256(canonical(body)).hexdigest()


def file_sha256(path: Path) -> tuple[str, int]:
    """The sha256 and size of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def descriptor_of(entry: Mapping[str, Any]) -> EmbedderDescriptor:
    """The descriptor of a manifest's space entry (its key must match)."""
    desc = entry["descriptor"]
    fields = {k: desc[k] for k in ("name", "dimensions", "normalization", "revision")}
    descriptor = EmbedderDescriptor(**fields)
    if descriptor.key != entry["key"] or desc.get("key", descriptor.key) != descriptor.key:
        raise ValueError(f"space key {entry['key']!r} does not match its descriptor")
    return descriptor
