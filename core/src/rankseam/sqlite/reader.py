"""The SQLite store's read snapshot: the reader protocols
(``rankseam.plugin.stores.StoreReader``) in SQLite's dialect: BM25 through FTS5, cosine over a
cached numpy matrix (and the ANN index of :mod:`rankseam.sqlite.ann`), importance and
identities through batched reads."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from rankseam.embedding import EmbedderDescriptor
from rankseam.sqlite import ann as ann_module
from rankseam.sqlite.blas import matvec
from rankseam.sqlite.filters import AllowedRows, allowed_rows
from rankseam.sqlite.lexical_index import LexicalSnapshot
from rankseam.sqlite.rows import vector_state
from rankseam.sqlite.vector_cache import top_k
from rankseam.store.filters import Filter
from rankseam.store.readers import Identities, LexicalQuery, ScoredKeys
from rankseam.store.records import StoredMemory
from rankseam.store.rows import Neighbours
from rankseam.types import MemoryRef

if TYPE_CHECKING:
    from rankseam.sqlite.store import SQLiteStore

__all__ = [
    "MAX_FACTS",
    "MAX_ROW_CHARS",
    "NEIGHBOURS_AFTER",
    "NEIGHBOURS_BEFORE",
    "ROW_COLUMNS",
    "FactsCache",
    "FactsTable",
    "RowsCache",
    "RowsTable",
    "SQLiteReader",
    "VersionTables",
    "chunks",
    "fts5_string",
]

#: The columns ``StoredMemory.from_row`` reads (a revision ``r``).
ROW_COLUMNS = StoredMemory.COLUMNS
_SQL_VARS = 900  # stay under SQLITE_MAX_VARIABLE_NUMBER of old builds
#: Rows of an ANN index's vector file a filtered search takes at a time.
_TAKE = 65_536
#: Most revisions whose facts a store keeps (:class:`FactsCache`).
MAX_FACTS = 100_000
#: Most revisions of a store whose facts are all read at once (:class:`FactsCache`).
WHOLE_FACTS_FROM = 50_000
#: Most characters of text (with their metadata's) the rows a store keeps may hold
#: (:class:`RowsCache`): about 32 MiB of ASCII.
MAX_ROW_CHARS = 32 * 1024 * 1024

#: The live revisions just before a place ``(position, rid)`` of a thread, nearest first:
#: a range of the index ``revisions_thread`` read backwards (docs/store.md shows the plan).
NEIGHBOURS_BEFORE = (
    "SELECT rid FROM revisions WHERE namespace = ? AND thread = ? AND live = 1 "
    "AND (position, rid) < (?, ?) ORDER BY position DESC, rid DESC LIMIT ?"
)
#: The live revisions just after a place of a thread, nearest first.
NEIGHBOURS_AFTER = (
    "SELECT rid FROM revisions WHERE namespace = ? AND thread = ? AND live = 1 "
    "AND (position, rid) > (?, ?) ORDER BY position, rid LIMIT ?"
)

#: ``(namespace, memory_id, revision, importance, live)`` of a revision.
Facts = tuple[str, str, int, float, int]


_Table = TypeVar("_Table", bound=dict[int, Any])


class VersionTables(Generic[_Table]):
    """What the readers of one write version (:meth:`SQLiteReader.write_version`) read, kept
    for the readers of that version: a revision's row never changes but for ``live``, which
    changes only with a write, and a write makes a new version, so a table is never read at
    another one. A table is started anew for another version, once ``full`` says it holds
    too much, and by :meth:`clear`."""

    def __init__(self, new: Callable[[], _Table], full: Callable[[_Table], bool]) -> None:
        self._new, self._full = new, full
        self._current: tuple[int, _Table] = (-1, new())

    def table(self, write_version: int) -> _Table:
        """The table of ``write_version`` (an empty one for a version not seen last)."""
        version, table = self._current
        if version != write_version or self._full(table):
            table = self._new()
            self._current = (write_version, table)
        return table

    def held(self) -> _Table:
        """The table held now (that of the last write version read)."""
        return self._current[1]

    def clear(self) -> None:
        self._current = (-1, self._new())


class FactsTable(dict[int, "Facts"]):
    """The facts read at one write version; ``missed``: how many were read key by key,
    ``whole``: every revision of the version is in it (a key it lacks has no row)."""

    missed = 0
    whole = False


class FactsCache(VersionTables[FactsTable]):
    """The facts of revisions read at one write version, shared by the readers of that
    version (a search asks the same rows for their importance and for their identities, and
    searches between two writes ask many of the same). Kept to :data:`MAX_FACTS` revisions.
    Once the keys read one by one at a version come to half the store's revisions (a store
    of at most :data:`WHOLE_FACTS_FROM` of them), the rest are read at once (one statement,
    about half a microsecond a row, where a key read alone costs more): a small store
    searched between two writes then reads no facts at all."""

    def __init__(self) -> None:
        super().__init__(FactsTable, lambda table: len(table) > MAX_FACTS)


class RowsTable(dict[int, StoredMemory]):
    """The revisions read at one write version; ``chars``: the characters of their texts
    and metadata."""

    chars = 0


class RowsCache(VersionTables[RowsTable]):
    """The revisions read at one write version (:meth:`SQLiteReader.memories`), shared by the
    readers of that version as :class:`FactsCache` is: a search reads the rows of its pool,
    and searches between two writes read many of the same. Kept to :data:`MAX_ROW_CHARS`
    characters; emptied by a forget (:meth:`~VersionTables.clear`), so no erased text stays
    in it."""

    def __init__(self) -> None:
        super().__init__(RowsTable, lambda table: table.chars > MAX_ROW_CHARS)


def chunks(items: Sequence[int]) -> Iterator[list[int]]:
    """``items`` in lists short enough for one statement's parameters."""
    items = list(items)
    for i in range(0, len(items), _SQL_VARS):
        yield items[i : i + _SQL_VARS]


def fts5_string(term: str) -> str:
    """``term`` as an FTS5 string: in double quotes, inner quotes doubled; nothing in it is an
    operator."""
    return '"' + term.replace('"', '""') + '"'


def or_joined(terms: Sequence[str]) -> str:
    """FTS5 query text that matches any of ``terms`` (each an FTS5 string)."""
    return " OR ".join(fts5_string(t) for t in terms)


class SQLiteReader:
    """Read access bound to one read transaction (one snapshot). Given to candidate sources."""

    def __init__(self, store: SQLiteStore, conn: sqlite3.Connection) -> None:
        self._store = store
        self._conn = conn
        self._version: int | None = None
        self._known: FactsTable | None = None
        self._facts_read: tuple[int, ...] | None = None  # the keys whose facts were read last
        self._allowed: dict[tuple[str, Filter], AllowedRows] = {}

    def allowed(self, where: Filter, namespace: str) -> AllowedRows:
        """The row keys of ``namespace``'s live revisions that pass ``where``, read once per
        snapshot (the lexical and the vector channel of a filtered search both ask)."""
        key = (namespace, where)
        found = self._allowed.get(key)
        if found is None:
            sql, args = allowed_rows(where, namespace)
            # one string of every key (group_concat) is read and parsed in a millisecond at
            # ten thousand keys, where fetching them row by row took five
            (text,) = self._conn.execute(f"SELECT group_concat(rid) FROM ({sql})", args).fetchone()
            found = self._allowed[key] = AllowedRows.parse(text or "")
        return found

    def namespace_version(self, namespace: str) -> int:
        row = self._conn.execute(
            "SELECT version FROM namespaces WHERE name = ?", (namespace,)
        ).fetchone()
        return int(row[0]) if row else 0

    def _versions(self, namespace: str, space: str) -> tuple[int, int]:
        """``namespace``'s version and ``space``'s vector epoch in it, in this snapshot (kept
        per write version: both change only with a write)."""
        return self._store.cached_versions(
            ("versions", self.write_version(), namespace, space),
            lambda: vector_state(self._conn, namespace, space),
        )

    def lexical(self, query: LexicalQuery, /) -> ScoredKeys:
        """FTS5 BM25 over live revisions: the best ``k`` ``(rid, -bm25)`` (higher is better),
        ties by rid. Each term is an FTS5 string (nothing in it is an operator), OR-joined.

        Scoring terms only add their BM25 to the rows the finding terms find. Each row is
        scored as by the OR of both (BM25 is a sum over the query's terms), but FTS5 computes
        BM25 only for the rows the finding terms find, never for the long posting lists of
        the scoring terms alone.

        A small store's query is answered by its lexical index
        (:mod:`rankseam.sqlite.lexical_index`: FTS5's postings in numpy, the same answer to
        the bit) once it is built; the others, and the queries it cannot answer, by FTS5."""
        indexes = self._store.lexical
        snapshot = indexes.snapshot(
            self._conn, self.write_version(), self.live_count(query.namespace)
        )
        start = time.thread_time()  # what an answer costs (not advancing the snapshot)
        if snapshot is not None:
            found = self._indexed(snapshot, query)
            if found is not None:
                indexes.answered(time.thread_time() - start, by_fts5=False)
                return found
        match, ns, k = or_joined(query.terms), query.namespace, query.k
        if query.scoring and query.require_scoring:
            required = f"({match}) AND ({or_joined(query.scoring)})"
            found = self.fts(required, ns, k, where=query.where)
        else:
            scoring = or_joined(query.scoring) if query.scoring else None
            found = self.fts(match, ns, k, scoring=scoring, where=query.where)
        indexes.answered(time.thread_time() - start, by_fts5=True)
        return found

    def _indexed(self, snapshot: LexicalSnapshot, query: LexicalQuery) -> ScoredKeys | None:
        """:meth:`lexical`'s answer from ``snapshot``, or ``None`` for a query it leaves to
        FTS5: a word that is not one token (FTS5 matches it as a phrase)."""
        require = bool(query.scoring and query.require_scoring)
        if not query.terms:
            return None
        tokens = self._store.lexical.tokenizer.words([*query.terms, *query.scoring])
        if any(len(t) != 1 for t in tokens):
            return None
        allowed = None
        if query.where is not None:
            allowed = self.allowed(query.where, query.namespace).rids
        words = [t for (t,) in tokens]
        return snapshot.search(
            words[: len(query.terms)],
            words[len(query.terms) :],
            require_scoring=require,
            namespace=query.namespace,
            allowed=allowed,
            k=query.k,
        )

    def fts(
        self,
        match: str,
        namespace: str,
        k: int,
        *,
        scoring: str | None = None,
        where: Filter | None = None,
    ) -> ScoredKeys:
        """:meth:`lexical` for FTS5 query text (SQLite's own query language, for a source
        registered for this store or a study): ``scoring``, more query text whose terms only
        add their BM25 to the rows ``match`` finds; ``where``, a filter the rows must pass
        (checked against the filtered row keys, read once by SQLite for the query)."""
        allowed_args = {} if where is None else {"allowed": self.allowed(where, namespace).json}
        # With a filter, FTS5 finds what the terms match and each match is looked up in the
        # filtered row keys (read once per snapshot: :meth:`allowed`), made an ephemeral
        # index once for the query (the unary + keeps the constraint out of FTS5's own
        # query, which would seek every filtered key in every posting list: seconds at a
        # million memories)
        passes = "" if where is None else " AND +fts.rowid IN (SELECT rid FROM allowed)"
        # The only namespace: no join needed to filter (it halves the cost at 100k).
        only = self._store.cached_count(
            ("only", self.write_version(), namespace),
            lambda: int(
                self._conn.execute("SELECT name FROM namespaces LIMIT 2").fetchall()
                == [(namespace,)]
            ),
        )
        if scoring is None:
            hits = f"SELECT fts.rowid AS r, bm25(fts) AS s FROM fts WHERE fts MATCH :match{passes}"
            args: dict[str, object] = {"match": match, "k": k, **allowed_args}
        else:
            # rows holding a scoring term get the BM25 of both; the others, of `match` (the
            # scoring terms would add 0 to them)
            hits = (
                "SELECT r, s FROM both_ UNION ALL SELECT fts.rowid, bm25(fts) FROM fts "
                f"WHERE fts MATCH :match AND fts.rowid NOT IN (SELECT r FROM both_){passes}"
            )
            args = {"match": match, "both": f"({match}) AND ({scoring})", "k": k, **allowed_args}
        if only:
            sql = f"{hits} ORDER BY s, r LIMIT :k"
        else:
            sql = (
                f"SELECT h.r, h.s FROM ({hits}) h JOIN revisions v ON v.rid = h.r "
                "WHERE v.namespace = :ns ORDER BY h.s, h.r LIMIT :k"
            )
            args["ns"] = namespace
        ctes = []
        if where is not None:
            ctes.append("allowed(rid) AS MATERIALIZED (SELECT value FROM json_each(:allowed))")
        if scoring is not None:
            ctes.append(
                "both_ AS MATERIALIZED (SELECT fts.rowid AS r, bm25(fts) AS s FROM fts "
                f"WHERE fts MATCH :both{passes})"
            )
        if ctes:
            sql = f"WITH {', '.join(ctes)} {sql}"
        # (FTS5's rowid is an integer and bm25() a float: one conversion of all rows)
        rows = self._conn.execute(sql, args).fetchall()
        if not rows:
            return ScoredKeys.empty()
        rids, scores = zip(*rows, strict=True)
        return ScoredKeys(rids, -np.asarray(scores, dtype=np.float64))

    def write_version(self) -> int:
        """A number that changes with every committed write to the store (read once per
        snapshot)."""
        if self._version is None:
            self._version = int(
                self._conn.execute("SELECT total(version) FROM namespaces").fetchone()[0]
            )
        return self._version

    def live_count(self, namespace: str, /) -> int:
        """Live revisions in the whole store, whatever ``namespace`` (all namespaces share the
        FTS index, whose size this is, and whose statistics BM25 uses)."""
        return self._store.cached_count(("live", self.write_version()), self._indexed_rows)

    def _indexed_rows(self) -> int:
        # FTS5 keeps the number of indexed rows (one per live revision) as the first varint of
        # its "averages" record (fts_data row 1): read in microseconds, where counting
        # fts_docsize took 22 ms at a million memories
        row = self._conn.execute("SELECT block FROM fts_data WHERE id = 1").fetchone()
        if row is not None and isinstance(row[0], bytes) and row[0]:
            return _varint(row[0])
        return int(self._conn.execute("SELECT count(*) FROM fts_docsize").fetchone()[0])

    def document_frequency(self, namespace: str, term: str, cap: int, /) -> int:
        """How many live revisions (of every namespace, as :meth:`live_count`) match the word
        ``term`` (quoted: plain text), counted up to ``cap``."""
        quoted = fts5_string(term)
        return self._store.cached_count(
            ("df", self.write_version(), quoted, cap),
            lambda: self._document_frequency(namespace, term, quoted, cap),
        )

    def _document_frequency(self, namespace: str, term: str, quoted: str, cap: int) -> int:
        indexes = self._store.lexical
        snapshot = indexes.snapshot(
            self._conn, self.write_version(), self.live_count(namespace), query=False
        )
        # (a word not known yet is counted by FTS5: asking the tokenizer costs as much)
        tokens = None if snapshot is None else indexes.tokenizer.known(term)
        if snapshot is not None and tokens is not None and len(tokens) == 1:
            hits = int(snapshot.postings(tokens[0])[0].shape[0])
            return hits if cap < 0 else min(hits, cap)
        return int(
            self._conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM fts WHERE fts MATCH ? LIMIT ?)",
                (quoted, cap),
            ).fetchone()[0]
        )

    def vector(
        self,
        namespace: str,
        descriptor: EmbedderDescriptor,
        query: np.ndarray,
        k: int,
        /,
        *,
        exact: bool = False,
        where: Filter | None = None,
    ) -> ScoredKeys:
        """Cosine (dot product of L2-normalised vectors) over the namespace's live vectors of
        ``descriptor``'s space only: the best ``k`` ``(rid, score)``, ties by rid.

        A namespace × space with an ANN index (:mod:`rankseam.sqlite.ann`) is searched through
        it plus an exact pass over the revisions written since it was built; every score is
        computed from the stored vector either way. ``exact=True`` compares every vector.
        With ``where``, the revisions that pass the filter are compared exactly (no index)."""
        version, epoch = self._versions(namespace, descriptor.key)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if where is not None:
            return self._filtered_vector(namespace, descriptor, q, k, where, version, epoch)
        ann = None if exact else self._store.ann
        base = None if ann is None else ann.base(namespace, descriptor.key)
        if base is not None and (
            base.manifest.epoch != epoch
            or base.manifest.dims != descriptor.dimensions
            or base.manifest.version > version
        ):
            base = None  # vectors were rewritten since (reembed), or a newer snapshot's index
        entry = self._store.vector_cache.get(
            self._conn,
            namespace,
            descriptor.key,
            descriptor.dimensions,
            version,
            epoch,
            min_rid=0 if base is None else base.manifest.max_rid,
        )
        rids, scores = entry.rids, self._scores(entry.matrix, q, descriptor)
        if entry.alive is not None:
            scores = np.where(entry.alive, scores, -np.inf).astype(np.float32)
        retired = 0
        if base is not None and ann is not None:
            gone = self._retired(namespace, base.manifest.version, base.manifest.max_rid)
            retired = int(gone.size)
            keys = ann.search(base, q, k, min(retired, ann_module.MAX_RETIRED))
            if gone.size:
                keys = keys[~np.isin(keys, gone)]
            # exact scores from the stored vectors (a key without one in this snapshot drops)
            kept, matrix = self._stored(keys, descriptor)
            if kept.size:
                rids = np.concatenate([rids, kept])
                scores = np.concatenate([scores, self._scores(matrix, q, descriptor)])
        if ann is not None and ann.needs_maintenance(
            base, entry.rids.shape[0], 0 if base is None else entry.rids.shape[0], retired
        ):
            self._store.schedule_ann(namespace, descriptor)
        return top_k(scores, rids, k)

    def _filtered_vector(
        self,
        namespace: str,
        descriptor: EmbedderDescriptor,
        q: np.ndarray,
        k: int,
        where: Filter,
        version: int,
        epoch: int,
    ) -> ScoredKeys:
        """The exact best ``k`` among the live revisions that pass ``where``: their rows of the
        cached matrix when the whole namespace is cached; with an ANN index, their rows of its
        vector file (:mod:`rankseam.sqlite.ann_vectors`, memory-mapped) and the stored vectors
        of the others (written since it, or all of them until it exists) read in one go."""
        allowed = self.allowed(where, namespace).rids
        if allowed.size == 0:
            return ScoredKeys.empty()
        ann = self._store.ann
        base = None if ann is None else ann.base(namespace, descriptor.key)
        if ann is None or base is None:
            entry = self._store.vector_cache.get(
                self._conn, namespace, descriptor.key, descriptor.dimensions, version, epoch
            )
            # the cache's row keys ascend (loaded in key order, grown by newer keys only; a
            # vector written for an older key bumps the epoch, which reloads it)
            at = np.searchsorted(entry.rids, allowed)
            inside = at < entry.rids.shape[0]
            at, wanted = at[inside], allowed[inside]
            at = at[entry.rids[at] == wanted]
            if entry.alive is not None:
                at = at[entry.alive[at]]
            return top_k(self._scores(entry.matrix[at], q, descriptor), entry.rids[at], k)
        file = ann.vectors(namespace, descriptor.key)
        if file is not None and (file.manifest.epoch, file.manifest.dims) == (
            epoch,
            descriptor.dimensions,
        ):
            # a row of the file is the stored vector of its key in this epoch, bit for bit;
            # taken a block at a time, so a filter that passes most of a large namespace
            # never copies its whole matrix
            parts = [file.take(allowed[i : i + _TAKE]) for i in range(0, allowed.size, _TAKE)]
            held = [keys for keys, _m, _r in parts]
            scores = [self._scores(matrix, q, descriptor) for _k, matrix, _r in parts]
            rest = np.concatenate([r for _k, _m, r in parts])
            del parts
        else:
            held, scores, rest = [], [], allowed
            if ann.want_vectors(namespace, descriptor.key):
                self._store.schedule_ann(namespace, descriptor)
        if rest.size:
            got, read = self._stored(rest, descriptor)
            held.append(got)
            scores.append(self._scores(read, q, descriptor))
        if not held:
            return ScoredKeys.empty()
        return top_k(np.concatenate(scores), np.concatenate(held), k)

    def _stored(
        self, keys: np.ndarray, descriptor: EmbedderDescriptor
    ) -> tuple[np.ndarray, np.ndarray]:
        """The keys among ``keys`` that have a stored vector in ``descriptor``'s space, and
        those vectors (one read through the vectors' primary key)."""
        found = self._store.vectors_of(keys.tolist(), descriptor)
        if isinstance(found, np.ndarray):
            return keys, found
        have = [i for i, v in enumerate(found) if v is not None]
        if not have:
            return keys[:0], np.zeros((0, descriptor.dimensions), dtype=np.float32)
        return keys[have], np.stack([v for v in found if v is not None])

    @staticmethod
    def _scores(matrix: np.ndarray, q: np.ndarray, descriptor: EmbedderDescriptor) -> np.ndarray:
        if matrix.shape[0] == 0:
            return np.zeros(0, dtype=np.float32)
        scores = matvec(matrix, q)  # numpy's BLAS pool held to one thread (sqlite.blas)
        if descriptor.normalization != "l2":
            norms = np.linalg.norm(matrix, axis=1)
            scores = np.divide(scores, norms, out=np.zeros_like(scores), where=norms > 0)
        return scores

    def _retired(self, namespace: str, since: int, max_rid: int) -> np.ndarray:
        """Revisions up to ``max_rid`` retired after version ``since`` (in this snapshot)."""
        key = ("retired", namespace, since, max_rid, self.namespace_version(namespace))
        return self._store.cached_array(
            key,
            lambda: np.fromiter(
                (
                    r
                    for (r,) in self._conn.execute(
                        "SELECT rid FROM revisions WHERE namespace = ? AND retired_version > ? "
                        "AND rid <= ?",
                        (namespace, since, max_rid),
                    )
                ),
                dtype=np.int64,
            ),
        )

    def _facts(self, rids: Sequence[int]) -> dict[int, Facts]:
        """``rid -> (namespace, memory_id, revision, importance, live)`` of the revisions
        among ``rids``: one batched read of those not read before at this snapshot's write
        version (:class:`FactsCache`: a search asks the same rows for their importance and
        for their identities, and searches between two writes ask many of the same)."""
        known = self._known
        if known is None:
            known = self._known = self._store.facts.table(self.write_version())
        if rids is self._facts_read:
            return known  # the same keys again (a search's importance, then identities)
        missing = [] if known.whole else [rid for rid in rids if rid not in known]
        if missing:
            known.missed += len(missing)
            revisions = self._store.cached_count(
                ("max_rid", self.write_version()),
                lambda: int(
                    self._conn.execute("SELECT coalesce(max(rid), 0) FROM revisions").fetchone()[0]
                ),
            )
            if revisions <= WHOLE_FACTS_FROM and known.missed * 2 >= revisions:
                rows = self._conn.execute(
                    "SELECT rid, namespace, memory_id, revision, importance, live FROM revisions"
                ).fetchall()
                known.update([(row[0], row[1:]) for row in rows])
                known.whole = True
                missing = []
        for chunk in chunks(list(dict.fromkeys(missing))):
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(
                "SELECT rid, namespace, memory_id, revision, importance, live FROM revisions "
                f"WHERE rid IN ({marks})",
                chunk,
            ).fetchall()
            known.update([(row[0], row[1:]) for row in rows])
        if isinstance(rids, tuple):  # (a tuple cannot change before it is asked again)
            self._facts_read = rids
        return known

    def importance(self, rids: Sequence[int], /) -> dict[int, float]:
        known = self._facts(rids)
        return {rid: known[rid][3] for rid in rids if rid in known}

    def top_importance(self, namespace: str, k: int, /) -> ScoredKeys:
        rows = self._conn.execute(
            "SELECT rid, importance FROM revisions WHERE namespace = ? AND live = 1 "
            "ORDER BY importance DESC, rid LIMIT ?",
            (namespace, k),
        ).fetchall()
        return ScoredKeys.of(rows)

    def identities(self, rids: Sequence[int], /) -> Mapping[int, MemoryRef]:
        """The identity of each *live* revision among ``rids`` (light: no text, one batched
        query). A key that is not live in this snapshot is left out, so a source can never
        bring back a retired revision. The refs are built when read (a search reads few:
        membership decides which keys fuse, a ref only breaks a tie)."""
        known = self._facts(rids)
        return Identities({rid: known[rid] for rid in rids if rid in known and known[rid][4]})

    def memories(self, rids: Sequence[int], /) -> dict[int, StoredMemory]:
        """The revisions ``rids`` (one batched query per 900 ids of those not read before at
        this snapshot's write version: :class:`RowsCache`)."""
        known = self._store.row_cache.table(self.write_version())
        missing = [rid for rid in rids if rid not in known]
        for chunk in chunks(missing):
            marks = ",".join("?" * len(chunk))
            for row in self._conn.execute(
                f"SELECT {ROW_COLUMNS} FROM revisions r WHERE r.rid IN ({marks})", chunk
            ):
                memory = known[int(row[0])] = StoredMemory.from_row(row)
                known.chars += len(memory.text) + len(memory.metadata)
        return {rid: known[rid] for rid in rids if rid in known}

    def neighbours(self, rids: Sequence[int], before: int, after: int, /) -> dict[int, Neighbours]:
        """The neighbours of each live revision among ``rids`` that belongs to a thread: up to
        ``before`` and ``after`` live revisions of its namespace and thread just before and
        after it in thread order (position, then rid), two index ranges each. A store with no
        threaded revision answers at once (known per write version: the context stage asks on
        every search, and most small stores hold no conversation)."""
        if not self._store.cached_count(("threaded", self.write_version()), self._threaded):
            return {}
        places: dict[int, tuple[str, str, float]] = {}
        for chunk in chunks(list(dict.fromkeys(rids))):
            marks = ",".join("?" * len(chunk))
            for rid, ns, thread, position in self._conn.execute(
                "SELECT rid, namespace, thread, position FROM revisions WHERE rid IN "
                f"({marks}) AND live = 1 AND thread IS NOT NULL AND position IS NOT NULL",
                chunk,
            ):
                places[int(rid)] = (ns, thread, position)
        out: dict[int, Neighbours] = {}
        execute = self._conn.execute
        for rid in rids:
            place = places.get(rid)
            if place is None or rid in out:
                continue
            ns, thread, position = place
            earlier = (
                [r for (r,) in execute(NEIGHBOURS_BEFORE, (ns, thread, position, rid, before))]
                if before
                else []
            )
            later = (
                [r for (r,) in execute(NEIGHBOURS_AFTER, (ns, thread, position, rid, after))]
                if after
                else []
            )
            out[rid] = Neighbours(earlier[::-1], later)
        return out

    def _threaded(self) -> int:
        # read from the partial index revisions_thread, which holds exactly the threaded
        # revisions (the plan: SCAN revisions USING COVERING INDEX revisions_thread): one probe
        (found,) = self._conn.execute(
            "SELECT EXISTS (SELECT 1 FROM revisions WHERE thread IS NOT NULL)"
        ).fetchone()
        return int(found)

    def resolve(self, ref: MemoryRef, /) -> int | None:
        row = self._conn.execute(
            "SELECT rid FROM revisions WHERE namespace = ? AND memory_id = ? AND revision = ?",
            (ref.namespace, ref.memory_id, ref.revision),
        ).fetchone()
        return int(row[0]) if row else None


def _varint(data: bytes) -> int:
    """The SQLite varint at the start of ``data`` (big-endian 7-bit groups; a ninth byte
    carries 8 bits)."""
    value = 0
    for i, byte in enumerate(data[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value
