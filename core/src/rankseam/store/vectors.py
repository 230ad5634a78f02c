"""The vector cache: one float32 matrix per (namespace, embedder space), refreshed on write.

The matrix holds the vectors of the *live* revisions of a namespace in one embedder space, with
the revision row keys (``rid``) alongside. Its ``version`` is the namespace's write counter at
load time; a reader whose snapshot shows another version reloads it inside its own read
transaction, so cached vectors and the rows a search reads always come from one snapshot.
Cosine is one matrix-vector product; there is no per-row Python loop on the search path.
Vectors of another space are never loaded into the matrix (the mixed-space guard).
"""

from __future__ import annotations

import sqlite3
import threading

import attrs
import numpy as np

__all__ = ["VectorCache", "VectorMatrix", "decode_vector", "encode_vector", "top_k"]


def encode_vector(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def decode_vector(blob: bytes, dims: int) -> np.ndarray | None:
    if len(blob) != dims * 4:
        return None
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


@attrs.frozen(eq=False)
class VectorMatrix:
    version: int
    rids: np.ndarray  # int64, shape (n,)
    matrix: np.ndarray  # float32, shape (n, dims)

    @property
    def nbytes(self) -> int:
        return int(self.rids.nbytes + self.matrix.nbytes)


def top_k(scores: np.ndarray, rids: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best (rid, score), score descending, ties by rid ascending."""
    n = scores.shape[0]
    if n == 0 or k <= 0:
        return []
    k = min(k, n)
    if k < n:
        idx = np.argpartition(-scores, k - 1)[:k]
    else:
        idx = np.arange(n)
    order = np.lexsort((rids[idx], -scores[idx]))
    idx = idx[order]
    return [(int(r), float(s)) for r, s in zip(rids[idx], scores[idx], strict=True)]


class VectorCache:
    """Matrices per (namespace, space key), reloaded when the namespace's version moved."""

    CHUNK = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], VectorMatrix] = {}

    def get(
        self, conn: sqlite3.Connection, namespace: str, space: str, dims: int, version: int
    ) -> VectorMatrix:
        key = (namespace, space)
        entry = self._entries.get(key)
        if entry is not None and entry.version == version:
            return entry
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.version == version:
                return entry
            entry = self._load(conn, namespace, space, dims, version)
            current = self._entries.get(key)
            if current is None or current.version <= version:
                self._entries[key] = entry
            return entry

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def nbytes(self) -> int:
        return sum(e.nbytes for e in list(self._entries.values()))

    def _load(
        self, conn: sqlite3.Connection, namespace: str, space: str, dims: int, version: int
    ) -> VectorMatrix:
        where = (
            "FROM revisions r JOIN vectors v ON v.space = ? AND v.rid = r.rid "
            "WHERE r.namespace = ? AND r.live = 1 AND length(v.vector) = ?"
        )
        args = (space, namespace, dims * 4)
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
            block = np.frombuffer(b"".join(row[1] for row in rows[:m]), dtype="<f4")
            matrix[at : at + m] = block.reshape(m, dims)
            at += m
        return VectorMatrix(version, rids[:at], matrix[:at])
