"""The vector file of an ANN index (:mod:`rankseam.sqlite.ann`): a memory-mapped copy of the
stored float32 vectors of a namespace × space, in row-key order, for the searches the graph
cannot serve — a filtered search compares the memories that pass its filter exactly, and at
a million memories reading their ten thousand vectors from the database one row key at a
time took about 110 ms (docs/benchmarks.md, "A filtered search").

- **What it holds.** The vectors of the revisions live at ``version`` with a row key up to
  ``max_rid``, of one vector ``epoch``: ``count × dims`` little-endian float32, then the
  ``count`` row keys (little-endian int64, ascending). A stored vector of a row key never
  changes within an epoch (a vector written for an existing revision starts a new one), so
  the file is a cache of the database: a row it holds is the stored vector, bit for bit, and
  a row key it lacks (written since, or retired before it was written) is read from the
  database. A file of another epoch is never used.
- **On demand.** A store writes one only once a filtered search of a namespace × space that
  has an ANN index asked for it (:meth:`~rankseam.sqlite.ann.AnnIndexes.want_vectors`); from
  then on every maintenance of the index writes it again with the new base. It costs the
  disk the raw bytes of the vectors.
- **Published like a base**: written to a temporary file, flushed and renamed, then named by
  its own small manifest (``<slug>.vectors.json``), replaced atomically; a hard delete
  removes both with the index (:meth:`~rankseam.sqlite.ann.AnnIndexes.discard`).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import uuid
from pathlib import Path

import attrs
import numpy as np

from rankseam.sqlite import ann_files
from rankseam.sqlite.ann_files import FORMAT, AnnManifest

__all__ = [
    "VectorFile",
    "load",
    "manifest_path",
    "write",
    "write_unless_current",
]

_STORED = np.dtype("<f4")
_KEYS = np.dtype("<i8")
#: Rows read from the database per block while a file is written.
_BLOCK = 8192


def _state(manifest: AnnManifest) -> tuple[int, int, int, int]:
    """What makes two vector files hold the same rows: dims, epoch, version and max_rid."""
    return (manifest.dims, manifest.epoch, manifest.version, manifest.max_rid)


@attrs.frozen(eq=False)
class VectorFile:
    """A loaded vector file: its manifest, its row keys (in memory) and a read-only memory
    map of its vectors (the pages a search touches are read, nothing else)."""

    manifest: AnnManifest
    rids: np.ndarray  # int64, ascending, shape (count,)
    matrix: np.ndarray  # float32, shape (count, dims)
    stamp: tuple[int, int]  # the manifest file's (mtime_ns, size) when loaded

    def take(self, rids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For ``rids`` (ascending): the row keys the file holds, their vectors (a copy, in
        the same order) and the row keys it lacks (to read from the database)."""
        at = np.searchsorted(self.rids, rids)
        inside = at < self.rids.shape[0]
        held = np.zeros(rids.shape[0], dtype=bool)
        held[inside] = self.rids[at[inside]] == rids[inside]
        return rids[held], np.asarray(self.matrix[at[held]], dtype=np.float32), rids[~held]


def manifest_path(folder: Path, slug: str) -> Path:
    return folder / f"{slug}.vectors.json"


def load(
    folder: Path, slug: str, namespace: str, space: str, cached: VectorFile | None
) -> VectorFile | None:
    """The vector file the manifest of ``slug`` names (``cached`` again when the manifest did
    not change), or ``None`` when there is none or it is not whole (the reads go to the
    database then)."""
    path = manifest_path(folder, slug)
    try:
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size)
        if cached is not None and cached.stamp == stamp:
            return cached
        manifest = AnnManifest(**json.loads(path.read_text()))
        if manifest.format != FORMAT or (manifest.namespace, manifest.space) != (namespace, space):
            return None
        file = folder / manifest.file
        expected = manifest.count * (manifest.dims * _STORED.itemsize + _KEYS.itemsize)
        if manifest.bytes != expected or file.stat().st_size != expected:
            return None
        if manifest.count == 0:
            empty = np.zeros((0, manifest.dims), dtype=np.float32)
            return VectorFile(manifest, np.zeros(0, dtype=np.int64), empty, stamp)
        matrix = np.memmap(file, dtype=_STORED, mode="r", shape=(manifest.count, manifest.dims))
        # the row keys are read into memory (8 bytes a vector: every search looks them all
        # up); the vectors stay mapped, only the pages of the rows a search takes are read
        rids = np.fromfile(
            file,
            dtype=_KEYS,
            count=manifest.count,
            offset=manifest.count * manifest.dims * _STORED.itemsize,
        ).astype(np.int64, copy=False)
        if rids.shape[0] != manifest.count:
            return None
    except (OSError, ValueError, TypeError, json.JSONDecodeError):
        return None  # absent, being replaced, or damaged: the database answers
    return VectorFile(manifest, rids, matrix, stamp)


def write_unless_current(
    conn: sqlite3.Connection,
    folder: Path,
    slug: str,
    manifest: AnnManifest,
    current: VectorFile | None,
) -> bool:
    """:func:`write` unless ``current`` holds the rows ``manifest`` describes already;
    whether it wrote."""
    if current is not None and _state(current.manifest) == _state(manifest):
        return False
    write(conn, folder, slug, manifest)
    return True


def write(
    conn: sqlite3.Connection,
    folder: Path,
    slug: str,
    manifest: AnnManifest,
) -> AnnManifest:
    """Write the vector file ``manifest`` describes (its ``count``, ``file`` and ``bytes``
    filled in here) from ``conn``'s open read transaction, publish it, and remove the file it
    replaced. A failed write leaves no file and raises the ANN index's
    :class:`~rankseam.errors.StoreError` in the user's words."""
    dims, namespace = manifest.dims, manifest.namespace
    name = f"{slug}.{uuid.uuid4().hex[:12]}.vectors"
    tmp = folder / (name + ".tmp")
    cur = conn.execute(
        "SELECT r.rid, v.vector FROM revisions r JOIN vectors v ON v.space = ? AND "
        "v.rid = r.rid WHERE r.namespace = ? AND r.live = 1 AND r.rid <= ? "
        "AND length(v.vector) = ? ORDER BY r.rid",
        (manifest.space, namespace, manifest.max_rid, dims * 4),
    )
    keys: list[int] = []
    needed = 0
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            while True:
                rows = cur.fetchmany(_BLOCK)
                if not rows:
                    break
                keys.extend(r for r, _v in rows)
                fh.write(b"".join(v for _r, v in rows))
                needed = len(keys) * (dims * 4 + 8)
                free = shutil.disk_usage(folder).free
                if free < 2**20:  # never the disk's last bytes: the file is only a cache
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder))
            fh.write(np.asarray(keys, dtype=_KEYS).tobytes())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, folder / name)
    except OSError as exc:
        ann_files.discard(tmp)
        raise ann_files.save_error(exc, folder, namespace, needed) from None
    written = attrs.evolve(manifest, count=len(keys), file=name, bytes=needed)
    target = manifest_path(folder, slug)
    replaced = None
    try:
        replaced = json.loads(target.read_text()).get("file")
    except (OSError, ValueError, AttributeError):
        pass
    try:
        ann_files.write_manifest(
            written.to_dict(), folder, f"{slug}.{uuid.uuid4().hex[:12]}.json.tmp", target, namespace
        )
    except Exception:
        ann_files.discard(folder / name)  # no manifest will name it
        raise
    ann_files.sweep(folder, slug, keep=name, replaced=replaced, patterns=(f"{slug}.*.vectors*",))
    return written
