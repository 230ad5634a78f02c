"""The lexical index of a small store: FTS5's own postings held in numpy, scored as FTS5's
``bm25()`` scores them, so the lexical channel of a store of at most :data:`MAX_ROWS` live
revisions is answered without an FTS5 query (docs/performance.md, "The lexical index of a
small store").

What is held is read from FTS5 itself, never tokenized again: each token's documents and
counts from an ``fts5vocab`` table in ``instance`` mode (the tokens the index holds), each
document's length from ``fts_docsize`` and the row count and total length from FTS5's
"averages" record, the figures its ``bm25()`` reads. A query word becomes a token by the
store's own tokenizer (a private in-memory FTS5 table of the same ``tokenize`` setting); a word
that is not exactly one token (a phrase, or nothing) is left to FTS5.

A score is computed with the operations of FTS5's ``fts5Bm25Function`` in its order (for each
phrase of the query in turn, ``idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))``
added to the row's sum, ``idf = log((N - n + 0.5) / (n + 0.5))`` floored at ``1e-6``), in IEEE
double precision like FTS5's C, so the scores are FTS5's to the bit and the ranking (``ORDER
BY bm25, rowid``) is FTS5's, ties included.

A snapshot (:class:`LexicalSnapshot`) is one write version of the store. After a write the
next reader's snapshot is the last one advanced: the revisions added since tokenized the same
way (their postings kept beside the base's until :data:`MERGE_SHARE` of the base), those
retired since masked out. A write it cannot follow (a forget, an import) drops it; a new one
is built when the FTS5 queries answered meanwhile have cost as much CPU as a build is
expected to (:class:`LexicalIndexes`), so a store searched once is never indexed and a store
searched often is indexed after a few searches.
"""

from __future__ import annotations

import logging
import math
import re
import sqlite3
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from rankseam.sqlite.schema import TOKENIZERS
from rankseam.store.readers import ScoredKeys

if TYPE_CHECKING:
    from rankseam.sqlite.store import SQLiteStore

__all__ = [
    "MAX_POSTINGS",
    "MAX_ROWS",
    "LexicalIndexes",
    "LexicalSnapshot",
    "Tokenizer",
    "indexes_of",
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
#: A build's expected CPU per revision (seconds; 9.8 µs measured at 10k LoCoMo-derived
#: revisions): FTS5 answers until its answers have cost this much per live revision.
BUILD_S_PER_ROW = 1e-5
#: The newest memories whose words' tokens are asked of FTS5 with a build (at most 10 ms).
LEARN_TEXTS = 2_000
#: The most query words whose tokens a tokenizer remembers.
MAX_WORDS = 50_000
#: The most postings whose weights a snapshot keeps (:meth:`LexicalSnapshot.postings`): 12
#: bytes each.
MAX_WEIGHTS = 1_000_000
#: A query word of ASCII letters and digits (lower-cased, as the channel's words are).
_PLAIN = re.compile(r"[a-z0-9]+\Z")
#: Every byte but ASCII's lower-case letters and digits as a space (the ASCII words of a
#: lower-cased text, split at anything else).
_SPACES = bytes(
    c if chr(c).isascii() and (chr(c).islower() or chr(c).isdigit()) else 32 for c in range(256)
)
#: FTS5's bm25() constants (fts5_aux.c).
K1, B = 1.2, 0.75


class Tokenizer:
    """FTS5's tokenizer of one ``tokenize`` setting, asked through a private in-memory FTS5
    table (contentless: only its index is kept): the tokens of query words (remembered) or of
    revisions' texts."""

    def __init__(self, tokenize: str) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._conn.execute(
            f"CREATE VIRTUAL TABLE t USING fts5(text, content='', tokenize='{tokenize}')"
        )
        self._conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        self._words: dict[str, tuple[str, ...]] = {}

    def words(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """The tokens of each of ``words``, in order."""
        known = self._words
        found = {w: known.get(w) for w in words}
        missing = [w for w, tokens in found.items() if tokens is None]
        if missing:
            asked = self._ask(missing)
            if len(known) + len(asked) > MAX_WORDS:
                known.clear()
            known.update(asked)
            found.update(asked)
        return [found[w] or () for w in words]

    def _ask(self, words: list[str]) -> dict[str, tuple[str, ...]]:
        # words of ASCII letters and digits are one token each (unicode61 separates tokens
        # at anything else): all of them are asked as one text, the others one text each
        plain = [w for w in words if _PLAIN.match(w)]
        alone = [w for w in words if not _PLAIN.match(w)]
        rows = [(i + 2, w) for i, w in enumerate(alone)]
        if plain:
            rows.append((1, " ".join(plain)))
        by_doc: dict[int, list[tuple[int, str]]] = {}
        for doc, offset, term in self._tokens(rows, "doc, offset, term"):
            by_doc.setdefault(doc, []).append((offset, term))
        tokens = [t for _o, t in sorted(by_doc.get(1, []))]
        if len(tokens) != len(plain):  # (never: unicode61 reads ASCII so) ask one by one
            plain, alone, tokens = [], words, []
            by_doc = {}
            rows = [(i + 2, w) for i, w in enumerate(alone)]
            for doc, offset, term in self._tokens(rows, "doc, offset, term"):
                by_doc.setdefault(doc, []).append((offset, term))
        out: dict[str, tuple[str, ...]] = {w: (t,) for w, t in zip(plain, tokens, strict=True)}
        for i, word in enumerate(alone):
            out[word] = tuple(t for _o, t in sorted(by_doc.get(i + 2, [])))
        return out

    def known(self, word: str) -> tuple[str, ...] | None:
        """The tokens of ``word`` when they are known without asking FTS5."""
        return self._words.get(word)

    def learn(self, texts: Iterable[str]) -> None:
        """Know the tokens of the ASCII words of ``texts`` (those a question shares with
        the memories it looks for), asked of FTS5 at once."""
        # (bytes.translate and split: a tenth of the CPU of a regular expression)
        joined = " ".join(texts).lower().encode("ascii", "replace").translate(_SPACES)
        words = {w.decode("ascii") for w in set(joined.split())}.difference(self._words)
        if words and len(self._words) + len(words) <= MAX_WORDS:
            self.words(sorted(words))

    def texts(self, rows: Sequence[tuple[int, str]]) -> Counter[tuple[str, int]]:
        """How many times each token is in each text of ``rows`` (``(rid, text)``), by
        ``(token, rid)``."""
        return Counter(self._tokens(rows, "term, doc"))

    def _tokens(self, rows: Sequence[tuple[int, str]], columns: str) -> list[Any]:
        with self._lock:
            self._conn.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", rows)
            out = self._conn.execute(f"SELECT {columns} FROM v").fetchall()
            self._conn.execute("INSERT INTO t(t) VALUES ('delete-all')")
        return out


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
        return _best(total[at], rids, k)


_NONE = np.zeros(0, dtype=np.int32)


def _best(scores: np.ndarray, rids: np.ndarray, k: int) -> ScoredKeys:
    """The best ``k`` by score (descending), ties by rid, of ``rids`` ascending: SQL's
    ``ORDER BY s, r LIMIT k`` of ``s = -score`` (a negative ``k`` is no limit, as SQLite's)."""
    n = scores.shape[0]
    if n == 0 or k == 0:
        return ScoredKeys.empty()
    if 0 < k < n:
        # every row at least as good as the k-th best (in rid order still), then their order
        keep = scores >= np.partition(scores, n - k)[n - k]
        scores, rids = scores[keep], rids[keep]
    order = np.argsort(-scores, kind="stable")  # ties stay in rid order
    if 0 < k < order.shape[0]:
        order = order[:k]
    return ScoredKeys(rids[order], scores[order])


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


def _mean(old: float | None, new: float) -> float:
    """A running mean of recent costs (the latest weighs a quarter)."""
    return new if old is None else 0.75 * old + 0.25 * new


class LexicalIndexes:
    """The lexical snapshot of one store, kept per process: the latest one built or advanced,
    shared by the readers of its write version (thread-safe: a snapshot never changes).

    What it costs decides when it is made, from the CPU time each step took in this process:
    a first snapshot is built once FTS5's answers have cost what a build is expected to
    (:data:`BUILD_S_PER_ROW` a revision); after a write, the first lexical query is answered
    by FTS5 unless advancing the snapshot and answering from it cost less, and the next one
    of the same write version advances it (an agent that adds a memory and searches once
    pays no more than FTS5; one that searches twice gets the index)."""

    def __init__(self, tokenize: str) -> None:
        self.tokenizer = Tokenizer(tokenize)
        self._lock = threading.Lock()
        self._current: LexicalSnapshot | None = None
        self._spent = 0.0  # CPU of FTS5's answers since the last snapshot was made
        self._asked = -1  # the write version of FTS5's last answer
        self._never = False  # the store's index cannot be held (too many postings)
        self._fts5: float | None = None  # recent CPU of an FTS5 answer (seconds)
        self._indexed: float | None = None  # ... of an answer from a snapshot
        self._advance: float | None = None  # ... of advancing a snapshot

    def snapshot(
        self, conn: sqlite3.Connection, version: int, rows: int, *, query: bool = True
    ) -> LexicalSnapshot | None:
        """The snapshot at ``version`` (``rows`` live revisions), advanced or built now for
        a lexical ``query`` when that is worth it (never for a document frequency); ``None``:
        ask FTS5."""
        current = self._current
        if current is not None and current.version == version:
            return current
        if rows > MAX_ROWS:
            self._current = None  # the store outgrew the index
            return None
        if not query or self._never:
            return None
        if current is not None and current.version > version:
            return None  # a reader of an older snapshot than the one held
        with self._lock:
            current = self._current
            if current is not None and current.version == version:
                return current
            if current is not None:
                cheaper = (self._advance or 0.0) + (self._indexed or 0.0) < (self._fts5 or 0.0)
                if self._asked != version and not cheaper:
                    self._asked = version  # FTS5 answers; the next query advances
                    return None
                start = time.thread_time()
                fresh = advance(current, conn, version, self.tokenizer)
                if fresh is not None:
                    self._advance = _mean(self._advance, time.thread_time() - start)
                    self._current, self._spent = fresh, 0.0
                    return fresh
                self._current = None
            if self._spent < BUILD_S_PER_ROW * rows:
                return None
            start = time.thread_time()
            fresh = build(conn, version)
            if fresh is None:
                self._never = True
                return None
            # the words of the newest memories: most of a question's words are then known
            self.tokenizer.learn(
                t
                for (t,) in conn.execute(
                    "SELECT text FROM revisions WHERE live = 1 ORDER BY rid DESC LIMIT ?",
                    (LEARN_TEXTS,),
                )
            )
            log.debug(
                "lexical index of %d revisions built in %.1f ms of CPU",
                rows,
                1e3 * (time.thread_time() - start),
            )
            self._current, self._spent = fresh, 0.0
            return fresh

    def held(self) -> LexicalSnapshot | None:
        """The snapshot held now (``None``: none is built)."""
        return self._current

    def answered(self, seconds: float, *, by_fts5: bool) -> None:
        """Count the CPU a lexical answer took, by FTS5 or from a snapshot."""
        if by_fts5:
            self._spent += seconds
            self._fts5 = _mean(self._fts5, seconds)
        else:
            self._indexed = _mean(self._indexed, seconds)

    def refuse(self) -> None:
        """Hold no snapshot of this store from now on: FTS5 answers every query (what a
        comparison of both paths needs)."""
        with self._lock:
            self._current, self._never = None, True


_STORES: weakref.WeakKeyDictionary[Any, LexicalIndexes] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def indexes_of(store: SQLiteStore) -> LexicalIndexes:
    """The lexical snapshots of ``store`` (made on first use, with its FTS5 tokenizer)."""
    found = _STORES.get(store)
    if found is None:
        with _STORES_LOCK:
            found = _STORES.get(store)
            if found is None:
                found = _STORES[store] = LexicalIndexes(TOKENIZERS[store.tokenizer])
    return found
