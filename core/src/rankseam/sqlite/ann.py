"""The approximate nearest-neighbour (ANN) index of the vector channel, for large namespaces.

One HNSW graph (usearch) per namespace × embedder space, in files next to the database
(``<db>.ann/``). The database stays the only source of truth; the index only proposes
candidates:

- **Base + delta.** The persisted index (the *base*) holds the vectors of the revisions that
  were live when it was built (its ``version``), up to its ``max_rid``. Revisions written
  since (``rid > max_rid``) are searched exactly (the vector cache, restricted to them); the
  ones retired since are filtered out (the ANN search over-fetches by their number). So a
  write costs the index nothing, and a search always sees the reader's snapshot.
- **Exact scores from the database.** Candidates of the graph are re-scored with their stored
  float32 vectors of the searched space, read inside the search's read transaction: the
  graph's own (bfloat16) vectors never reach a result, so a stale or damaged index can
  lose recall but never serve a wrong score, a retired revision or a vector of another space.
- **Maintenance** (:meth:`AnnIndexes.maintain`) merges the delta into a new base: it loads
  the base, adds the new vectors, removes the retired ones and saves a new file. A rebuild
  from the database happens only when there is no usable base (first build, a reembed that
  rewrote vectors, a missing or damaged file).
- **Crash safety.** A new base is written to a temporary file, flushed, renamed, and only then
  published by atomically replacing the small JSON manifest that names it. A process killed at
  any moment leaves the old manifest and file (still valid) or the new ones; stray files are
  removed by the next maintenance. A manifest whose file is missing, has the wrong size or
  does not load is ignored: searches are exact until the index is rebuilt.
- **Opening does not stall.** The base is memory-mapped (``view``), not read: opening a store
  of a million memories and searching it touches only the pages a search visits.
- **In the background** (:mod:`.ann_background`): a search that finds an index due starts
  its maintenance in a thread; closing the store, or the process exiting, stops it at its
  next slice; after a failure it waits for a back-off. A save that fails (a full disk)
  leaves no file and says why in the user's words (:mod:`.ann_files`).

The index is used for a namespace × space once it holds at least ``min_vectors`` vectors
(:data:`MIN_VECTORS`); below that the exact matrix-vector product is as fast and exact.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from rankseam.checks import decimal_int
from rankseam.errors import ConfigurationError, StoreError
from rankseam.sqlite import ann_files, ann_vectors
from rankseam.sqlite.ann_background import Background, MaintenanceCancelled
from rankseam.sqlite.ann_files import FORMAT, AnnManifest

__all__ = [
    "EXPANSION_SEARCH",
    "MIN_VECTORS",
    "AnnIndexes",
    "AnnManifest",
    "MaintenanceCancelled",
    "setting_from_env",
]

log = logging.getLogger("rankseam.sqlite.ann")

#: Namespaces × spaces with at least this many live vectors are searched through the index.
MIN_VECTORS = 20_000
#: HNSW parameters (chosen by measurement on LoCoMo-derived stores; docs/store.md and
#: docs/benchmarks.md, "ANN build"): the same graph in bfloat16 (AVX-512 BF16 dot products
#: where the CPU has them) is built and searched for about 0.7 of the half-precision graph's CPU
#: with the same recall@30 (0.992 at 100 000); a sparser build (expansion 64) costs 0.4 but
#: needs a search at 1024 (1.4x the search CPU) to hold recall@30 at 0.99, and 8-bit vectors
#: lost the order of the channel's list (recall@120 0.93; the scale tests' top 3 changed).
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 512
#: Stored precision of the graph's vectors (candidates are re-scored exactly). A base built
#: earlier keeps its own precision until it is rebuilt (a merge adds to a copy of it).
DTYPE = "bf16"
#: Threads of one add: one thread costs less CPU per vector than two (a build is background
#: work; docs/benchmarks.md, "ANN build").
ADD_THREADS = 1
#: A base is merged with its delta once the delta holds this share of it (or MERGE_MIN rows).
MERGE_SHARE = 0.05
MERGE_MIN = 2_000
#: At most this many retired revisions are filtered by over-fetching; beyond, searches are
#: exact until maintenance has merged them.
MAX_RETIRED = 20_000
#: Vectors added to a graph between two checks for a close (a close waits for one slice).
ADD_SLICE = 2_000


def setting_from_env(environ: Mapping[str, str] | None = None) -> bool | int:
    """``RANKSEAM_ANN``: unset or ``auto`` = an index from :data:`MIN_VECTORS` vectors on;
    ``off`` = never (always exact); an integer N = an index from N vectors on."""
    value = (os.environ if environ is None else environ).get("RANKSEAM_ANN", "auto").strip()
    if value.lower() in ("", "auto"):
        return True
    if value.lower() == "off":
        return False
    threshold = decimal_int(value)  # ASCII digits only: int() also reads '1_0' and '٥'
    if threshold is None or threshold < 1:
        raise ConfigurationError(
            f"RANKSEAM_ANN={value!r}: use 'auto', 'off' or a number of vectors >= 1 written "
            "in the digits 0-9, from which a namespace is searched through its ANN index"
        )
    return threshold


def _slug(namespace: str, space: str) -> str:
    return hashlib.sha256(f"{namespace}\x00{space}".encode()).hexdigest()[:24]


@attrs.define(eq=False)
class _Base:
    manifest: AnnManifest
    index: Any  # usearch.index.Index (memory-mapped view)
    stamp: tuple[int, int]  # the manifest file's (mtime_ns, size) when loaded


class AnnIndexes:
    """The ANN bases of one store (see the module docstring). Thread-safe."""

    def __init__(
        self,
        db_path: str,
        *,
        min_vectors: int = MIN_VECTORS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.folder = Path(db_path + ".ann")
        self.min_vectors = min_vectors
        self._lock = threading.Lock()
        self._bases: dict[tuple[str, str], _Base | None] = {}
        self._paths: dict[tuple[str, str], Path] = {}
        # one maintenance at a time per index in this process: a caller's maintain waits for
        # a background one (and then usually finds nothing left to merge)
        self._maintain_locks: dict[tuple[str, str], threading.Lock] = {}
        # the vector files (:mod:`.ann_vectors`) loaded, and the indexes a filtered search
        # asked to keep one for
        self._vector_files: dict[tuple[str, str], ann_vectors.VectorFile | None] = {}
        self._wanted: set[tuple[str, str]] = set()
        #: background maintenance: its threads, its stop, its back-off (and that one's clock)
        self.background = Background(clock)

    # -- reading ---------------------------------------------------------------------------

    def _manifest_path(self, namespace: str, space: str) -> Path:
        path = self._paths.get((namespace, space))
        if path is None:  # a search asks every time: the hash and the join are kept
            if len(self._paths) > 4096:
                self._paths.clear()
            path = self._paths[(namespace, space)] = self.folder / f"{_slug(namespace, space)}.json"
        return path

    def base(self, namespace: str, space: str) -> _Base | None:
        """The current base of ``namespace`` × ``space`` (reloaded when its manifest was
        replaced), or ``None``."""
        path = self._manifest_path(namespace, space)
        try:
            st = os.stat(path)
        except OSError:
            self._bases.pop((namespace, space), None)
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        cached = self._bases.get((namespace, space))
        if cached is not None and cached.stamp == stamp:
            return cached
        with self._lock:
            cached = self._bases.get((namespace, space))
            if cached is not None and cached.stamp == stamp:
                return cached
            base = self._load(path, stamp, namespace, space)
            self._bases[(namespace, space)] = base
            return base

    def _load(self, path: Path, stamp: tuple[int, int], namespace: str, space: str) -> _Base | None:
        try:
            manifest = AnnManifest(**json.loads(path.read_text()))
            if manifest.format != FORMAT or (manifest.namespace, manifest.space) != (
                namespace,
                space,
            ):
                raise ValueError("the manifest names another index")
            file = self.folder / manifest.file
            if file.stat().st_size != manifest.bytes:
                raise ValueError(
                    f"{file.name} has {file.stat().st_size} bytes, not {manifest.bytes}"
                )
            from usearch.index import Index

            # searches need no key -> node table: building it for a million keys took half
            # of the time to open the view (maintenance loads a copy of its own)
            index = Index.restore(str(file), view=True, enable_key_lookups=False)
            if index is None or len(index) != manifest.count or index.ndim != manifest.dims:
                raise ValueError(f"{file.name} does not hold the {manifest.count} vectors listed")
        except (OSError, ValueError, TypeError, RuntimeError, json.JSONDecodeError) as exc:
            log.warning(
                "ignoring the ANN index %s (%s); searches are exact until it is rebuilt",
                path,
                exc,
                extra={"event": "ann.unusable"},
            )
            return None
        return _Base(manifest, index, stamp)

    def search(
        self,
        base: _Base,
        query: np.ndarray,
        k: int,
        retired: int,
    ) -> np.ndarray:
        """Candidate row keys of the base for ``query`` (``k`` plus ``retired`` of them)."""
        count = min(k + retired, base.manifest.count)
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        base.index.expansion_search = max(EXPANSION_SEARCH, count)
        matches = base.index.search(query, count, threads=1)
        return np.asarray(matches.keys, dtype=np.int64)

    def vectors(self, namespace: str, space: str) -> ann_vectors.VectorFile | None:
        """The vector file of ``namespace`` × ``space`` (:mod:`.ann_vectors`: the stored
        vectors, memory-mapped in row-key order), reloaded when its manifest was replaced, or
        ``None``."""
        key = (namespace, space)
        cached = self._vector_files.get(key)
        found = ann_vectors.load(self.folder, _slug(namespace, space), namespace, space, cached)
        if found is not cached:
            with self._lock:
                self._vector_files[key] = found
        return found

    def want_vectors(self, namespace: str, space: str) -> bool:
        """Ask maintenance to keep a vector file for ``namespace`` × ``space`` from now on;
        ``True`` the first time (the caller schedules the maintenance that writes it)."""
        key = (namespace, space)
        if key in self._wanted:
            return False
        with self._lock:
            first = key not in self._wanted
            self._wanted.add(key)
        return first

    # -- maintenance -----------------------------------------------------------------------

    def needs_maintenance(self, base: _Base | None, live: int, delta: int, retired: int) -> bool:
        if base is None:
            return live >= self.min_vectors
        limit = max(MERGE_MIN, int(base.manifest.count * MERGE_SHARE))
        return delta + retired > limit

    def schedule(self, namespace: str, space: str, work: Callable[[], object]) -> None:
        """Run ``work`` (a :meth:`maintain` call) in a background thread, once at a time per
        namespace × space, and not before the back-off of its last failure has passed
        (:class:`~rankseam.sqlite.ann_background.Background`)."""
        self.background.schedule((namespace, space), work)

    def wait(self) -> None:
        """Wait for background maintenance to finish."""
        self.background.wait()

    def retry_in(self, namespace: str, space: str) -> float:
        """Seconds before a search may start the next maintenance of ``namespace`` × ``space``
        after failures (0 when the last one did not fail)."""
        return self.background.retry_in((namespace, space))

    def discard(self, namespace: str, spaces: Sequence[str]) -> None:
        """Remove the index files of ``namespace`` in each of ``spaces`` (a hard delete's: the
        graph holds the forgotten vectors; the namespace's new vector epoch already makes
        every search ignore it). Searches are exact until maintenance builds a new one; an
        index another process publishes from an older snapshot carries the older epoch and
        is never used either."""
        with self._lock:
            for space in spaces:
                self._bases.pop((namespace, space), None)
                self._vector_files.pop((namespace, space), None)
                slug = _slug(namespace, space)
                ann_files.discard(self._manifest_path(namespace, space))
                ann_files.discard(ann_vectors.manifest_path(self.folder, slug))
                if self.folder.is_dir():
                    for pattern in (f"{slug}.*.usearch", f"{slug}.*.vectors"):
                        for path in self.folder.glob(pattern):
                            ann_files.discard(path)

    def close(self) -> None:
        self.background.stop()  # a running maintenance stops at its next slice
        with self._lock:
            self._bases.clear()

    def maintain(
        self,
        conn: sqlite3.Connection,
        namespace: str,
        space: str,
        dims: int,
        normalized: bool,
        *,
        force: bool = False,
    ) -> AnnManifest | None:
        """Bring the base of ``namespace`` × ``space`` up to the database's current state:
        merge the delta into a new base (or build one from the database), save it and publish
        it. ``conn`` must be a connection of this thread with no open transaction. Returns the
        new manifest, or ``None`` when the namespace is too small for an index (unless
        ``force``)."""
        key = (namespace, space)
        with self._lock:
            lock = self._maintain_locks.setdefault(key, threading.Lock())
        with lock:
            try:
                manifest = self._maintain(conn, namespace, space, dims, normalized, force=force)
            except MaintenanceCancelled:
                raise
            except Exception as exc:
                delay = self.background.failed(key)
                if isinstance(exc, StoreError):  # the disk: said in the user's words
                    log.warning(
                        "%s (next try in %.0f s)",
                        exc,
                        delay,
                        extra={
                            "event": "ann.save_failed",
                            "reason": exc.reason,
                            "retry_in_s": delay,
                        },
                    )
                raise
            self.background.succeeded(key)
            return manifest

    def _maintain(
        self,
        conn: sqlite3.Connection,
        namespace: str,
        space: str,
        dims: int,
        normalized: bool,
        *,
        force: bool,
    ) -> AnnManifest | None:
        from usearch.index import Index

        from rankseam.sqlite.rows import vector_state

        old = self.base(namespace, space)
        conn.execute("BEGIN")
        try:
            version, epoch = vector_state(conn, namespace, space)
            max_rid = int(conn.execute("SELECT coalesce(max(rid), 0) FROM revisions").fetchone()[0])
            usable = old is not None and old.manifest.epoch == epoch and old.manifest.dims == dims
            # the state a vector file written now holds (:mod:`.ann_vectors`)
            state = AnnManifest(
                namespace, space, dims, normalized, epoch, version, max_rid, 0, "", 0
            )
            if (
                usable
                and old is not None
                and (old.manifest.version, old.manifest.max_rid)
                == (
                    version,
                    max_rid,
                )
            ):
                self._keep_vectors(conn, state)
                return old.manifest  # nothing was written since
            if usable:
                assert old is not None
                index: Any = Index.restore(str(self.folder / old.manifest.file))  # a copy
                if index is None:
                    raise RuntimeError(f"cannot load the ANN index {old.manifest.file}")
                # the file keeps the graph's connectivity and precision, not its expansion:
                # a restored index adds at usearch's default (128) unless told
                index.expansion_add = EXPANSION_ADD
                retired = [
                    r
                    for (r,) in conn.execute(
                        "SELECT rid FROM revisions WHERE namespace = ? AND retired_version > ? "
                        "AND rid <= ?",
                        (namespace, old.manifest.version, old.manifest.max_rid),
                    )
                ]
                if retired:
                    index.remove(np.asarray(retired, dtype=np.uint64))
                since = old.manifest.max_rid
            else:
                index = Index(
                    ndim=dims,
                    metric="ip" if normalized else "cos",
                    dtype=DTYPE,
                    connectivity=CONNECTIVITY,
                    expansion_add=EXPANSION_ADD,
                    expansion_search=EXPANSION_SEARCH,
                )
                since = 0
                if not force:
                    live = conn.execute(
                        "SELECT count(*) FROM revisions r JOIN vectors v ON v.space = ? AND "
                        "v.rid = r.rid WHERE r.namespace = ? AND r.live = 1",
                        (space, namespace),
                    ).fetchone()[0]
                    if live < self.min_vectors:
                        return None
            cur = conn.execute(
                "SELECT r.rid, v.vector FROM revisions r JOIN vectors v ON v.space = ? AND "
                "v.rid = r.rid WHERE r.namespace = ? AND r.live = 1 AND r.rid > ? "
                "AND length(v.vector) = ? ORDER BY r.rid",
                (space, namespace, since, dims * 4),
            )
            while True:
                rows = cur.fetchmany(20_000)
                if not rows:
                    break
                keys = np.fromiter((r for r, _v in rows), dtype=np.uint64, count=len(rows))
                block = np.frombuffer(b"".join(v for _r, v in rows), dtype="<f4")
                block = block.reshape(len(rows), dims)
                # added in slices, so that a close stops the work within one slice
                for start in range(0, len(rows), ADD_SLICE):
                    self.background.check_running()
                    end = start + ADD_SLICE
                    index.add(keys[start:end], block[start:end], threads=ADD_THREADS)
            self.background.check_running()
            self._keep_vectors(conn, state)
        finally:
            conn.execute("COMMIT")
        return self._publish(
            index,
            namespace,
            space,
            dims,
            normalized,
            epoch,
            version,
            max_rid,
            None if old is None else old.manifest.file,
        )

    def _keep_vectors(self, conn: sqlite3.Connection, state: AnnManifest) -> None:
        """Write the vector file of ``state``'s namespace × space at this snapshot (``conn``'s
        read transaction; ``state`` names no file yet) when a filtered search asked for one or
        one is kept already."""
        current = self.vectors(state.namespace, state.space)
        if current is None and (state.namespace, state.space) not in self._wanted:
            return
        slug = _slug(state.namespace, state.space)
        if ann_vectors.write_unless_current(conn, self.folder, slug, state, current):
            self.vectors(state.namespace, state.space)  # loaded now, not by the next search

    def _publish(
        self,
        index: Any,
        namespace: str,
        space: str,
        dims: int,
        normalized: bool,
        epoch: int,
        version: int,
        max_rid: int,
        replaced: str | None,
    ) -> AnnManifest:
        """Save ``index`` and publish it (:mod:`.ann_files`; a failed save leaves no file and
        raises a :class:`StoreError` in the user's words)."""
        slug = _slug(namespace, space)
        name = f"{slug}.{uuid.uuid4().hex[:12]}.usearch"
        size = ann_files.write_base(index, self.folder, name, namespace)
        manifest = AnnManifest(
            namespace=namespace,
            space=space,
            dims=dims,
            normalized=normalized,
            epoch=epoch,
            version=version,
            max_rid=max_rid,
            count=len(index),
            file=name,
            bytes=size,
        )
        # a name of its own: another process may be publishing this index at the same time
        try:
            ann_files.write_manifest(
                manifest.to_dict(),
                self.folder,
                f"{slug}.{uuid.uuid4().hex[:12]}.json.tmp",
                self._manifest_path(namespace, space),
                namespace,
            )
        except StoreError:
            ann_files.discard(self.folder / name)  # no manifest will name it
            raise
        ann_files.sweep(self.folder, slug, keep=name, replaced=replaced)
        log.info(
            "ANN index saved",
            extra={"event": "ann.saved", "vectors": manifest.count, "version": version},
        )
        return manifest
