"""The vector cache: one float32 matrix per (namespace, embedder space), refreshed on write.

The matrix holds the vectors of the *live* revisions of a namespace in one embedder space, with
the revision row keys (``rid``) alongside, in rid order. Its ``version`` is the namespace's
write counter at load time. A reader whose snapshot shows a newer version refreshes it inside
its own read transaction, so cached vectors and the rows a search reads always come from one
snapshot: incrementally (drop revisions retired since, append revisions added since: rids only
grow) while the namespace's ``vector_epoch`` is unchanged, else by a full reload.
Cosine is one matrix-vector product; there is no per-row Python loop on the search path.
Vectors of another space are never loaded into the matrix (the mixed-space guard).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

import attrs
import numpy as np

from rankseam.sqlite.blas import matvec
from rankseam.store.readers import ScoredKeys

__all__ = [
    "VectorCache",
    "VectorMatrix",
    "decode_vectors",
    "encode_vector",
    "top_k",
]

#: How vectors are stored: little-endian float32, whatever the machine.
_STORED = np.dtype("<f4")
#: Decoding is a zero-copy view where the machine's float32 is the stored format.
_NATIVE = _STORED == np.dtype(np.float32)


def encode_vector(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=_STORED).tobytes()


def decode_vectors(
    blobs: Sequence[bytes | None], dims: int
) -> np.ndarray | list[np.ndarray | None]:
    """The float32 vectors stored in ``blobs``, decoded in one go (no copy where the machine's
    float32 is the stored format), read-only.

    When every blob holds ``dims`` values: the ``len(blobs) × dims`` matrix itself (row ``i``
    is blob ``i``'s vector). Otherwise a list with ``None`` for each missing blob or one of
    another size, and rows of one matrix for the others.
    """
    size = dims * 4
    good = [i for i, blob in enumerate(blobs) if blob is not None and len(blob) == size]
    if not good or dims == 0:
        return [None] * len(blobs)
    joined = b"".join(blobs[i] for i in good)  # type: ignore[misc]
    matrix = np.frombuffer(joined, dtype=_STORED).reshape(len(good), dims)
    if not _NATIVE:
        matrix = matrix.astype(np.float32)
        matrix.setflags(write=False)
    if len(good) == len(blobs):
        return matrix
    out: list[np.ndarray | None] = [None] * len(blobs)
    for row, i in enumerate(good):
        out[i] = matrix[row]
    return out


@attrs.frozen(eq=False)
class VectorMatrix:
    """One snapshot of a namespace's vectors in one space.

    ``rids``/``matrix`` are views of the first rows of growable buffers (appends after a write
    fill the spare rows in place; rows an older snapshot can see never change). ``alive`` is
    ``None`` when every row is live, else a private mask of rows retired since the last
    compaction.
    """

    version: int
    epoch: int
    max_rid: int  # the highest revision row key that existed when this was read
    rids: np.ndarray  # int64, shape (n,)
    matrix: np.ndarray  # float32, shape (n, dims)
    alive: np.ndarray | None = None
    rid_buffer: np.ndarray | None = None
    matrix_buffer: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        rb = self.rid_buffer if self.rid_buffer is not None else self.rids
        mb = self.matrix_buffer if self.matrix_buffer is not None else self.matrix
        return int(rb.nbytes + mb.nbytes + (self.alive.nbytes if self.alive is not None else 0))

    def scores(self, query: np.ndarray) -> np.ndarray:
        scores = matvec(self.matrix, query)
        if self.alive is not None:
            scores = np.where(self.alive, scores, -np.inf).astype(np.float32)
        return scores


def top_k(scores: np.ndarray, rids: np.ndarray, k: int) -> ScoredKeys:
    """The ``k`` best (rid, score), score descending, ties by rid ascending."""
    n = scores.shape[0]
    if n == 0 or k <= 0:
        return ScoredKeys.empty()
    k = min(k, n)
    if k < n:
        part = np.argpartition(-scores, k - 1)
        idx, rest = part[:k], part[k:]
        # a row left out with the k-th best score competes for its place by rid
        tied = rest[scores[rest] == scores[part[k - 1]]]
        if tied.size:
            idx = np.concatenate([idx, tied])
    else:
        idx = np.arange(n)
    order = np.lexsort((rids[idx], -scores[idx]))[:k]
    idx = idx[order]
    top = scores[idx]
    keep = top != -np.inf  # rows retired since the last compaction
    return ScoredKeys(rids[idx][keep], top[keep])


@attrs.frozen
class _Wanted:
    """The matrix a reader asks for: ``namespace``'s live vectors in ``space`` (``dims``
    wide) at the namespace's ``version`` and vector ``epoch``, of the revisions after
    ``min_rid``."""

    namespace: str
    space: str
    dims: int
    version: int
    epoch: int
    min_rid: int


class VectorCache:
    """Matrices per (namespace, space key), reloaded when the namespace's version moved."""

    CHUNK = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str, int], VectorMatrix] = {}

    def get(
        self,
        conn: sqlite3.Connection,
        namespace: str,
        space: str,
        dims: int,
        version: int,
        epoch: int,
        min_rid: int = 0,
    ) -> VectorMatrix:
        """The live vectors of ``namespace`` in ``space`` at ``version``; with ``min_rid``
        only those of revisions after it (the delta of an ANN index)."""
        key = (namespace, space, min_rid)
        entry = self._entries.get(key)
        if entry is not None and entry.version == version and entry.epoch == epoch:
            return entry
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.version == version and entry.epoch == epoch:
                return entry
            wanted = _Wanted(namespace, space, dims, version, epoch, min_rid)
            if entry is not None and entry.epoch == epoch and entry.version < version:
                fresh = self._refresh(conn, entry, wanted)
            else:
                fresh = self._load(conn, wanted)
            if entry is None or (entry.epoch, entry.version) <= (epoch, version):
                for other in [k for k in self._entries if k[:2] == key[:2] and k != key]:
                    del self._entries[other]  # a matrix for another ANN base is obsolete
                self._entries[key] = fresh
            return fresh

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def nbytes(self) -> int:
        return sum(e.nbytes for e in list(self._entries.values()))

    @staticmethod
    def _max_rid(conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT coalesce(max(rid), 0) FROM revisions").fetchone()[0])

    def _rows(
        self, conn: sqlite3.Connection, where: str, args: tuple[object, ...], dims: int
    ) -> tuple[np.ndarray, np.ndarray]:
        n = conn.execute(f"SELECT count(*) {where}", args).fetchone()[0]
        rids = np.empty(n, dtype=np.int64)
        matrix = np.empty((n, dims), dtype=np.float32)
        cur = conn.execute(f"SELECT r.rid, v.vector {where} ORDER BY r.rid", args)
        at = 0
        while True:
            rows = cur.fetchmany(self.CHUNK)
            if not rows:
                break
            m = min(len(rows), n - at)  # the snapshot is fixed; this is only a guard
            rids[at : at + m] = [row[0] for row in rows[:m]]
            block = np.frombuffer(b"".join(row[1] for row in rows[:m]), dtype=_STORED)
            matrix[at : at + m] = block.reshape(m, dims)
            at += m
        return rids[:at], matrix[:at]

    _WHERE = (
        "FROM revisions r JOIN vectors v ON v.space = ? AND v.rid = r.rid "
        "WHERE r.namespace = ? AND r.live = 1 AND length(v.vector) = ? AND r.rid > ?"
    )

    def _load(self, conn: sqlite3.Connection, wanted: _Wanted) -> VectorMatrix:
        max_rid = self._max_rid(conn)
        args = (wanted.space, wanted.namespace, wanted.dims * 4, wanted.min_rid)
        rids, matrix = self._rows(conn, self._WHERE, args, wanted.dims)
        return VectorMatrix(wanted.version, wanted.epoch, max_rid, rids, matrix)

    def _refresh(
        self, conn: sqlite3.Connection, entry: VectorMatrix, wanted: _Wanted
    ) -> VectorMatrix:
        namespace, dims, version = wanted.namespace, wanted.dims, wanted.version
        max_rid = self._max_rid(conn)
        retired = np.fromiter(
            (
                row[0]
                for row in conn.execute(
                    "SELECT rid FROM revisions WHERE namespace = ? AND retired_version > ? "
                    "AND rid <= ?",
                    (namespace, entry.version, entry.max_rid),
                )
            ),
            dtype=np.int64,
        )
        new_rids, new_matrix = self._rows(
            conn,
            self._WHERE,
            (wanted.space, namespace, dims * 4, max(entry.max_rid, wanted.min_rid)),
            dims,
        )
        n, m = entry.rids.shape[0], new_rids.shape[0]
        alive = entry.alive
        if retired.size:
            gone = np.isin(entry.rids, retired)
            if gone.any():
                alive = np.ones(n, dtype=bool) if alive is None else alive.copy()
                alive[gone] = False
        rid_buf = entry.rid_buffer if entry.rid_buffer is not None else entry.rids
        mat_buf = entry.matrix_buffer if entry.matrix_buffer is not None else entry.matrix
        if m:
            if n + m > rid_buf.shape[0]:
                capacity = int((n + m) * 1.25) + 64  # the cache stays within 1.25x + slack
                grown_rids = np.empty(capacity, dtype=np.int64)
                grown_rids[:n] = entry.rids
                grown = np.empty((capacity, dims), dtype=np.float32)
                grown[:n] = entry.matrix
                rid_buf, mat_buf = grown_rids, grown
            rid_buf[n : n + m] = new_rids  # rows no existing snapshot can see
            mat_buf[n : n + m] = new_matrix
            if alive is not None:
                alive = np.concatenate([alive, np.ones(m, dtype=bool)])
        rids, matrix = rid_buf[: n + m], mat_buf[: n + m]
        if alive is not None and np.count_nonzero(~alive) * 4 > alive.shape[0]:
            rids, matrix = rids[alive].copy(), matrix[alive].copy()  # compact
            rid_buf, mat_buf, alive = rids, matrix, None
        return VectorMatrix(version, entry.epoch, max_rid, rids, matrix, alive, rid_buf, mat_buf)
