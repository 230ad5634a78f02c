"""The lexical index of a small store: FTS5's own postings held in numpy, scored as FTS5's
``bm25()`` scores them, so the lexical channel of a store of at most :data:`MAX_ROWS` live
revisions is answered without an FTS5 query (docs/performance.md, "The lexical index of a
small store").

What is held is read from FTS5 itself, never tokenized again: each token's documents and
counts from an ``fts5vocab`` table in ``instance`` mode (the tokens the index holds), each
document's length from ``fts_docsize`` and the row count and total length from FTS5's
"averages" record, the figures its ``bm25()`` reads. A query word becomes a token by the
store's own tokenizer (:mod:`rankseam.sqlite.fts_tokens`); a word that is not exactly one
token (a phrase, or nothing) is left to FTS5.

A score is computed with the operations of FTS5's ``fts5Bm25Function`` in its order (for each
phrase of the query in turn, ``idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))``
added to the row's sum, ``idf = log((N - n + 0.5) / (n + 0.5))`` floored at ``1e-6``), in IEEE
double precision like FTS5's C, so the scores are FTS5's to the bit and the ranking (``ORDER
BY bm25, rowid``) is FTS5's, ties included.

A snapshot (:class:`LexicalSnapshot`) is one write version of the store. After a write the
next reader's snapshot is the last one advanced: the revisions added since tokenized the same
way (their postings kept beside the base's until :data:`MERGE_SHARE` of the base), those
retired since masked out. A write it cannot follow (a forget, an import) drops it. When a
snapshot is built, advanced or left to FTS5 is decided by what each costs
(:mod:`rankseam.sqlite.lexical_cache`): a store searched once is never indexed, a store
searched often is indexed after a few searches.
"""

from __future__ import annotations

import logging
import math
import sqlite3
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from rankseam.sqlite.vector_cache import top_k
from rankseam.store.readers import ScoredKeys

if TYPE_CHECKING:
    from rankseam.sqlite.fts_tokens import Tokenizer

__all__ = [
    "MAX_POSTINGS",
    "MAX_ROWS",
    "LexicalSnapshot",
    "advance",
    "averages",
    "build",
]

log = logging.getLogger(__name__)

#: The most live revisions (the whole store's FTS5 rows) a store may hold to be indexed.
MAX_ROWS = 50_000
#: The most postings (token x revision pairs) an index holds: 8 bytes each.
MAX_POSTINGS = 4_000_000
#: The revisions added since the base, as a share of it, at which a snapshot is rebuilt.
MERGE_SHARE = 0.1
#: ... and at least this many.
MERGE_MIN = 1_000
#: The most postings whose weights a snapshot keeps (:meth:`LexicalSnapshot.postings`): 12
#: bytes each.
MAX_WEIGHTS = 1_000_000
#: FTS5's bm25() constants (fts5_aux.c).
K1, B = 1.2, 0.75


def _varints(data: bytes) -> list[int]:
    """The SQLite varints of ``data``, in order (big-endian 7-bit groups; a ninth byte
    carries 8 bits)."""
    out, i = [], 0
    while i < len(data):
        value = 0
        for j in range(9):
            byte = data[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def averages(conn: sqlite3.Connection) -> tuple[int, int]:
    """FTS5's row count and total length of the store's index (its "averages" record, what
    ``bm25()`` reads): ``(0, 0)`` for an empty index."""
    row = conn.execute("SELECT block FROM fts_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0, 0
    values = _varints(bytes(row[0]))
    return values[0], sum(values[1:])


@attrs.frozen(eq=False)
class _Added:
    """The postings of the revisions added since a base: per token, document indexes (into
    the snapshot's document arrays) and counts."""

    docs: dict[str, tuple[np.ndarray, np.ndarray]] = attrs.field(factory=dict)
    rows: int = 0


@attrs.frozen(eq=False)
class LexicalSnapshot:
    """The store's FTS5 index at one write version, in numpy.

    Documents are the index's rows in ``rids`` order (the base's ascending, then those added
    since); ``alive`` is ``None`` while every one is still indexed. The base's postings are
    in CSR form over its vocabulary (``offsets[i]:offsets[i + 1]`` of ``docs``/``counts``);
    those of the revisions added since are in ``added``."""

    version: int
    epochs: int  # the sum of the namespaces' vector epochs (a forget or import moves it)
    max_rid: int
    namespace_versions: dict[str, int]
    rows: int  # FTS5's row count (N)
    avgdl: float
    rids: np.ndarray  # int64
    lengths: np.ndarray  # float64, FTS5's docsize
    namespaces: np.ndarray  # int32 codes into names
    names: tuple[str, ...]
    alive: np.ndarray | None
    vocabulary: dict[str, int]
    offsets: np.ndarray  # int64
    docs: np.ndarray  # int32
    counts: np.ndarray  # int32
    added: _Added
    norms: np.ndarray  # k1 * (1 - b + b * D / avgdl), per document
    weights: dict[str, tuple[np.ndarray, np.ndarray]] = attrs.field(factory=dict)
    weighed: list[int] = attrs.field(factory=lambda: [0])  # postings in weights

    @property
    def nbytes(self) -> int:
        arrays = (self.rids, self.lengths, self.namespaces, self.offsets, self.docs, self.counts)
        extra = sum(d.nbytes + c.nbytes for d, c in self.added.docs.values())
        extra += sum(d.nbytes + w.nbytes for d, w in list(self.weights.values()))
        return int(sum(a.nbytes for a in arrays) + self.norms.nbytes + extra)

    def postings(self, token: str) -> tuple[np.ndarray, np.ndarray]:
        """The indexed documents holding ``token`` (ascending) and its BM25 weight in each
        but for the idf: ``(f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))`` of its count
        ``f`` (computed once per snapshot and token)."""
        found = self.weights.get(token)
        if found is not None:
            return found
        at = self.vocabulary.get(token)
        if at is None:
            docs, counts = _NONE, _NONE
        else:
            start, end = self.offsets[at], self.offsets[at + 1]
            docs, counts = self.docs[start:end], self.counts[start:end]
        more = self.added.docs.get(token)
        if more is not None:
            docs, counts = np.concatenate([docs, more[0]]), np.concatenate([counts, more[1]])
        if self.alive is not None and docs.size:
            keep = self.alive[docs]
            docs, counts = docs[keep], counts[keep]
        f = counts.astype(np.float64)
        found = docs, (f * (K1 + 1.0)) / (f + self.norms[docs])
        if self.weighed[0] + docs.shape[0] <= MAX_WEIGHTS:
            self.weighed[0] += docs.shape[0]  # (a race only miscounts a bound)
            self.weights[token] = found
        return found

    def search(
        self,
        finding: Sequence[str],
        scoring: Sequence[str],
        *,
        require_scoring: bool,
        namespace: str,
        allowed: np.ndarray | None,
        k: int,
    ) -> ScoredKeys:
        """FTS5's answer to ``finding`` OR-joined (with ``scoring``: only adding to the rows
        they find, or with ``require_scoring``, ``finding AND (scoring)``), tokens each, of
        ``namespace``'s rows (among ``allowed`` row keys, ascending, when given): the best
        ``k`` ``(rid, -bm25)``, ties by rid."""
        if len(self.names) > 1:
            if namespace not in self.names:
                return ScoredKeys.empty()
        elif not self.names or self.names[0] != namespace:
            return ScoredKeys.empty()
        n = self.rids.shape[0]
        total = np.zeros(n, dtype=np.float64)
        found = np.zeros(n, dtype=bool)
        held = np.zeros(n, dtype=bool) if require_scoring else None
        rows = self.rows
        for i, token in enumerate([*finding, *scoring]):
            docs, weights = self.postings(token)
            hits = docs.shape[0]
            if not hits:
                continue  # (its idf multiplies nothing)
            # fts5Bm25Function, phrase by phrase in the query's order: the same sum
            idf = math.log((rows - hits + 0.5) / (hits + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            total[docs] += idf * weights
            if i < len(finding):
                found[docs] = True
            elif held is not None:
                held[docs] = True
        if held is not None:
            found &= held
        if len(self.names) > 1:
            found &= self.namespaces == self.names.index(namespace)
        at = np.flatnonzero(found)
        rids = self.rids[at]
        if allowed is not None:
            place = np.searchsorted(allowed, rids)
            inside = place < allowed.shape[0]
            inside[inside] = allowed[place[inside]] == rids[inside]
            at, rids = at[inside], rids[inside]
        # the best k by score, ties by rid (SQL's ORDER BY s, r LIMIT k; a negative k is no
        # limit, as SQLite's)
        return top_k(total[at], rids, rids.shape[0] if k < 0 else k)


_NONE = np.zeros(0, dtype=np.int32)


def _norms(lengths: np.ndarray, avgdl: float) -> np.ndarray:
    # fts5Bm25Function: k1 * (1 - b + b * D / avgdl), operation by operation (an index of
    # no token has no posting to weigh: 0 / 0 is never read)
    with np.errstate(divide="ignore", invalid="ignore"):
        return K1 * ((1 - B) + (B * lengths) / avgdl)


def _stats(rows: int, tokens: int) -> float:
    return float(tokens) / float(rows) if rows else 0.0


def build(conn: sqlite3.Connection, version: int) -> LexicalSnapshot | None:
    """The snapshot of the store's index in ``conn``'s read transaction (at ``version``), or
    ``None`` when it is over :data:`MAX_ROWS` or :data:`MAX_POSTINGS`."""
    rows, tokens = averages(conn)
    if rows > MAX_ROWS:
        return None
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.rankseam_vocab "
        "USING fts5vocab(main, fts, instance)"
    )
    terms = conn.execute(
        "SELECT term, count(*), group_concat(doc) FROM temp.rankseam_vocab GROUP BY term"
    ).fetchall()
    instances = sum(c for _t, c, _d in terms)
    if instances > MAX_POSTINGS:
        return None
    sizes = conn.execute("SELECT id, sz FROM fts_docsize ORDER BY id").fetchall()
    rids = np.array([r for r, _s in sizes], dtype=np.int64)
    lengths = np.array([sum(_varints(bytes(s))) for _r, s in sizes], dtype=np.float64)
    names, codes = _namespaces(conn, rids)
    # every instance's (token, document): one pair per posting with its count
    token_of = np.repeat(np.arange(len(terms), dtype=np.int64), [c for _t, c, _d in terms])
    text = ",".join(d for _t, _c, d in terms)
    doc_rids = np.array(text.split(","), dtype=np.int64) if text else np.zeros(0, np.int64)
    doc_of = np.searchsorted(rids, doc_rids)
    pairs, counts = np.unique(token_of * (rids.shape[0] + 1) + doc_of, return_counts=True)
    token_at, docs = np.divmod(pairs, rids.shape[0] + 1)
    offsets = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(np.bincount(token_at, minlength=len(terms)), out=offsets[1:])
    epochs, max_rid, ns_versions = _state(conn)
    avgdl = _stats(rows, tokens)
    snapshot = LexicalSnapshot(
        version=version,
        epochs=epochs,
        max_rid=max_rid,
        namespace_versions=ns_versions,
        rows=rows,
        avgdl=avgdl,
        rids=rids,
        lengths=lengths,
        namespaces=codes,
        names=names,
        alive=None,
        vocabulary={t: i for i, (t, _c, _d) in enumerate(terms)},
        offsets=offsets,
        docs=docs.astype(np.int32),
        counts=counts.astype(np.int32),
        added=_Added(),
        norms=_norms(lengths, avgdl),
    )
    return snapshot if _consistent(snapshot, tokens, doc_rids) else None


def _consistent(snapshot: LexicalSnapshot, tokens: int, doc_rids: np.ndarray) -> bool:
    """Whether the snapshot's documents are FTS5's rows: as many as its row count, as long
    in all as its total, every instance in a row it has."""
    rids = snapshot.rids
    ok = (
        rids.shape[0] == snapshot.rows
        and int(snapshot.lengths.sum()) == tokens
        and doc_rids.shape[0] == tokens
        and bool(np.isin(doc_rids, rids).all())
    )
    if not ok:
        log.warning("the FTS5 index does not add up; lexical searches stay with FTS5")
    return ok


def _namespaces(conn: sqlite3.Connection, rids: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """The namespaces' names and each of ``rids``'s code among them."""
    names = tuple(n for (n,) in conn.execute("SELECT name FROM namespaces ORDER BY name"))
    codes = np.zeros(rids.shape[0], dtype=np.int32)
    if len(names) > 1:
        of = {name: i for i, name in enumerate(names)}
        found = dict(conn.execute("SELECT rid, namespace FROM revisions WHERE live = 1").fetchall())
        codes = np.array([of.get(found.get(r, ""), -1) for r in rids.tolist()], dtype=np.int32)
    return names, codes


def _state(conn: sqlite3.Connection) -> tuple[int, int, dict[str, int]]:
    """The sum of vector epochs, the highest revision key and each namespace's version."""
    rows = conn.execute("SELECT name, version, vector_epoch FROM namespaces").fetchall()
    (max_rid,) = conn.execute("SELECT coalesce(max(rid), 0) FROM revisions").fetchone()
    return sum(r[2] for r in rows), int(max_rid), {r[0]: int(r[1]) for r in rows}


def advance(
    old: LexicalSnapshot, conn: sqlite3.Connection, version: int, tokenizer: Tokenizer
) -> LexicalSnapshot | None:
    """``old`` brought to ``version`` (a later write version, read in ``conn``'s
    transaction): the revisions added since tokenized, those retired since masked out; or
    ``None`` where that cannot be done exactly (a forget or an import since, or more added
    than :data:`MERGE_SHARE` of the base: build again)."""
    epochs, max_rid, ns_versions = _state(conn)
    if epochs != old.epochs or max_rid < old.max_rid:
        return None
    rows, tokens = averages(conn)
    if rows > MAX_ROWS:
        return None
    retired: list[int] = []
    for name, at in ns_versions.items():
        before = old.namespace_versions.get(name, 0)
        if at != before:
            retired.extend(
                r
                for (r,) in conn.execute(
                    "SELECT rid FROM revisions WHERE namespace = ? AND retired_version > ? "
                    "AND rid <= ?",
                    (name, before, old.max_rid),
                )
            )
    new = conn.execute(
        "SELECT r.rid, r.namespace, r.text, d.sz FROM revisions r JOIN fts_docsize d "
        "ON d.id = r.rid WHERE r.rid > ? AND r.live = 1 ORDER BY r.rid",
        (old.max_rid,),
    ).fetchall()
    added_rows = old.added.rows + len(new)
    if added_rows > max(MERGE_MIN, MERGE_SHARE * (old.rids.shape[0] - old.added.rows)):
        return None
    names = old.names + tuple(n for n in sorted(ns_versions) if n not in old.names)
    n = old.rids.shape[0]
    rids, lengths, namespaces, alive = old.rids, old.lengths, old.namespaces, old.alive
    if retired:
        gone = np.isin(rids, np.array(retired, dtype=np.int64))
        if gone.any():
            alive = np.ones(n, dtype=bool) if alive is None else alive.copy()
            alive[gone] = False
    added = old.added.docs
    if new:
        rids = np.concatenate([rids, np.array([r[0] for r in new], dtype=np.int64)])
        sizes = [sum(_varints(bytes(r[3]))) for r in new]
        lengths = np.concatenate([lengths, np.array(sizes, dtype=np.float64)])
        codes = [names.index(r[1]) for r in new]
        namespaces = np.concatenate([namespaces, np.array(codes, dtype=np.int32)])
        if alive is not None:
            alive = np.concatenate([alive, np.ones(len(new), dtype=bool)])
        doc_of = {r[0]: n + i for i, r in enumerate(new)}
        grouped: dict[str, tuple[list[int], list[int]]] = {}
        held = Counter[int]()
        for (token, rid), count in tokenizer.texts([(r[0], r[2]) for r in new]).items():
            docs, counts = grouped.setdefault(token, ([], []))
            docs.append(doc_of[rid])
            counts.append(count)
            held[rid] += count
        if any(held[r[0]] != size for r, size in zip(new, sizes, strict=True)):
            log.debug("a new revision's tokens are not FTS5's count; the index is built again")
            return None
        added = dict(added)
        for token, (docs, counts) in grouped.items():
            order = np.argsort(docs)  # each token's documents ascending
            d = np.array(docs, dtype=np.int32)[order]
            c = np.array(counts, dtype=np.int32)[order]
            was = added.get(token)
            if was is not None:
                d, c = np.concatenate([was[0], d]), np.concatenate([was[1], c])
            added[token] = (d, c)
    live = lengths if alive is None else lengths[alive]
    if live.shape[0] != rows or int(live.sum()) != tokens:
        log.debug("the lexical index could not follow a write; it is built again")
        return None
    avgdl = _stats(rows, tokens)
    return attrs.evolve(
        old,
        version=version,
        max_rid=max(max_rid, old.max_rid),
        namespace_versions=ns_versions,
        rows=rows,
        avgdl=avgdl,
        rids=rids,
        lengths=lengths,
        namespaces=namespaces,
        names=names,
        alive=alive,
        added=_Added(added, added_rows),
        norms=_norms(lengths, avgdl),
        weights={},
        weighed=[0],
    )
