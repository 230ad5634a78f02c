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

The modules: :mod:`.format` (names, version, id, checksums), :mod:`.export`, :mod:`.verify`
(reading and checking), :mod:`.importer`, :mod:`.reports`. Each operation takes the store
explicitly; the store's bulk API (:meth:`SQLiteStore.bulk_read`, :meth:`SQLiteStore.bulk_write`)
does every read and write of its tables.
"""

from rankseam.snapshot.export import export_snapshot
from rankseam.snapshot.format import FORMAT_NAME, FORMAT_VERSION, SnapshotError
from rankseam.snapshot.importer import import_snapshot
from rankseam.snapshot.reports import ExportReport, ImportReport, VerifyReport
from rankseam.snapshot.verify import verify_snapshot

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
