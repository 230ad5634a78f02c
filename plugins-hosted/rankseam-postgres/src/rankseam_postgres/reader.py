"""A search's read snapshot of the PostgreSQL store: the reader protocols
(``rankseam.plugin.StoreReader``) in PostgreSQL's dialect: BM25 over ``tsvector``, pgvector
cosine (exact, or through the space's HNSW index), importances and identities."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from psycopg import sql

from rankseam.plugin import (
    EmbedderDescriptor,
    LexicalQuery,
    ScoredKeys,
    StoredMemory,
)
from rankseam.types import MemoryRef
from rankseam_postgres.schema import (
    space_index_state,
)
from rankseam_postgres.tables import COLUMNS, row_to_memory

if TYPE_CHECKING:
    from rankseam_postgres.store import PostgresStore

__all__ = ["EF_SEARCH", "EXACT_BELOW", "PostgresReader"]

#: A namespace with fewer live memories than this is searched exactly (a sequential scan of
#: its vectors); from this size on through the space's HNSW index.
EXACT_BELOW = 20_000
#: ``hnsw.ef_search`` of an index search (the candidate list; the over-fetch is at most 800).
EF_SEARCH = 512

#: Planner methods turned off for the statement that searches an HNSW index.
_NO_SCAN = ("enable_seqscan", "enable_bitmapscan", "enable_sort")

# BM25 over the postings: the term of one posting (tf, document length in tokens)
_TERM = "q.idf * p.tf * %(k1p)s / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.tokens / %(avgdl)s))"
# the revisions the finding lexemes find, each with its score over them (and whether it
# holds a required lexeme among them)
_FOUND = (
    "found AS (SELECT p.rid, sum(" + _TERM + ") AS s, bool_or(q.req) AS req "
    "FROM unnest(%(f_lex)s::text[], %(f_idf)s::float8[], %(f_req)s::bool[]) AS q(lex, idf, req) "
    "JOIN {postings} p ON p.namespace = %(ns)s AND p.lexeme = q.lex GROUP BY p.rid)"
)
_BM25_FOUND_ONLY = (
    "SELECT p.rid, sum(" + _TERM + ") AS s "
    "FROM unnest(%(f_lex)s::text[], %(f_idf)s::float8[]) AS q(lex, idf) "
    "JOIN {postings} p ON p.namespace = %(ns)s AND p.lexeme = q.lex "
    "GROUP BY p.rid ORDER BY s DESC, p.rid LIMIT %(k)s"
)
_BM25_FOUND = (
    "WITH " + _FOUND + " SELECT rid, s FROM found WHERE req OR NOT %(required)s "
    "ORDER BY s DESC, rid LIMIT %(k)s"
)
# lexemes that only score add their postings of the revisions found
_BM25_MORE = (
    "WITH " + _FOUND + ", more AS (SELECT p.rid, sum(" + _TERM + ") AS s, "
    "bool_or(q.req) AS req FROM unnest(%(m_lex)s::text[], %(m_idf)s::float8[], "
    "%(m_req)s::bool[]) AS q(lex, idf, req) CROSS JOIN found f JOIN {postings} p ON "
    "p.namespace = %(ns)s AND p.lexeme = q.lex AND p.rid = f.rid GROUP BY p.rid) "
    "SELECT f.rid, f.s + coalesce(m.s, 0) AS s FROM found f LEFT JOIN more m ON m.rid = f.rid "
    "WHERE f.req OR m.req OR NOT %(required)s ORDER BY s DESC, f.rid LIMIT %(k)s"
)

#: Each store's memo of the lexemes of query words (they depend on its text search
#: configuration only).
_LEXEMES: weakref.WeakKeyDictionary[Any, dict[str, tuple[str, ...]]] = weakref.WeakKeyDictionary()
_LEXEMES_LOCK = threading.Lock()
_LEXEMES_MAX = 50_000


def _lexeme_memo(store: Any) -> dict[str, tuple[str, ...]]:
    with _LEXEMES_LOCK:
        memo = _LEXEMES.get(store)
        if memo is None or len(memo) > _LEXEMES_MAX:
            memo = _LEXEMES[store] = {}
        return memo


class PostgresReader:
    """Read access bound to one read transaction (one snapshot): the reader protocols
    (``rankseam.plugin.StoreReader``) in PostgreSQL's dialect. The host's candidate sources
    run on it."""

    def __init__(self, store: PostgresStore, conn: psycopg.Connection[Any]) -> None:
        self._store = store
        self._conn = conn
        self._t = store.tables
        self._namespaces: dict[str, tuple[int, int, int, int]] = {}
        self._indexed: dict[str, bool] = {}
        self._df: dict[tuple[str, str, int, str], int] = {}
        self._found: tuple[frozenset[int], dict[int, MemoryRef]] | None = None

    # -- namespace statistics --------------------------------------------------------------

    def _ns_row(self, namespace: str) -> tuple[int, int, int, int]:
        """``(version, vector epoch, live count, token total)`` of ``namespace``, read once
        per snapshot (it cannot change within one)."""
        row = self._namespaces.get(namespace)
        if row is None:
            found = self._conn.execute(
                self._t(
                    "SELECT version, vector_epoch, live_count, live_tokens FROM {namespaces} "
                    "WHERE name = %s"
                ),
                (namespace,),
            ).fetchone()
            row = (
                (int(found[0]), int(found[1]), int(found[2]), int(found[3]))
                if found
                else (0, 0, 0, 0)
            )
            self._namespaces[namespace] = row
        return row

    def namespace_version(self, namespace: str) -> int:
        return self._ns_row(namespace)[0]

    def live_count(self, namespace: str, /) -> int:
        """Live revisions of ``namespace`` (kept by every write; no count at search time):
        BM25's ``N`` and what document frequencies count over."""
        return self._ns_row(namespace)[2]

    # -- lexical -----------------------------------------------------------------------------

    def _lexemes(self, terms: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Each term's lexemes under the store's text search configuration (none for a term
        the configuration drops as a stop word), memoised per store (they depend on the
        configuration only)."""
        memo = _lexeme_memo(self._store)
        missing = [t for t in dict.fromkeys(terms) if t not in memo]
        if missing:
            rows = self._conn.execute(
                "SELECT u.t, tsvector_to_array(to_tsvector(%s::regconfig, u.t)) "
                "FROM unnest(%s::text[]) AS u(t)",
                (self._store.text_search, missing),
            ).fetchall()
            memo.update((term, tuple(lexemes)) for term, lexemes in rows)
        return {t: memo[t] for t in terms}

    def document_frequency(self, namespace: str, term: str, cap: int, /) -> int:
        """How many live revisions of ``namespace`` hold any lexeme of the word ``term``,
        counted up to ``cap`` (0 for a word the text search configuration drops): the
        ``terms`` table's count of a single lexeme, the union of postings of several."""
        lexemes = self._lexemes([term])[term]
        if not lexemes:
            return 0
        if len(lexemes) == 1:
            return min(self._term_frequencies(namespace, lexemes).get(lexemes[0], 0), cap)
        version = self.namespace_version(namespace)
        return self._store.cached_count(
            ("df", namespace, version, lexemes, cap),
            lambda: int(
                self._conn.execute(
                    self._t(
                        "SELECT count(*) FROM (SELECT DISTINCT rid FROM {postings} "
                        "WHERE namespace = %s AND lexeme = ANY(%s) LIMIT %s) AS hits"
                    ),
                    (namespace, list(lexemes), cap),
                ).fetchone()[0]  # type: ignore[index]
            ),
        )

    def _term_frequencies(self, namespace: str, lexemes: Sequence[str]) -> dict[str, int]:
        """How many live revisions of ``namespace`` hold each of ``lexemes`` (the ``terms``
        table; memoised per namespace version)."""
        version = self.namespace_version(namespace)
        key = ("terms", namespace, version)
        missing = [lex for lex in lexemes if (*key, lex) not in self._df]
        if missing:
            rows = dict(
                self._conn.execute(
                    self._t(
                        "SELECT lexeme, df FROM {terms} WHERE namespace = %s AND lexeme = ANY(%s)"
                    ),
                    (namespace, missing),
                ).fetchall()
            )
            for lex in missing:
                self._df[(*key, lex)] = int(rows.get(lex, 0))
        return {lex: self._df[(*key, lex)] for lex in lexemes}

    def lexical(self, query: LexicalQuery, /) -> ScoredKeys:
        """Okapi BM25 (:meth:`bm25`) of the query's words: each word counts through its
        lexemes (a lexeme that stands for two words of the query counts twice, as FTS5
        counts a stem twice); the revisions that hold a lexeme of ``query.terms`` are found
        (and, with ``require_scoring``, one of ``query.scoring`` too)."""
        lexemes = self._lexemes([*query.terms, *query.scoring])
        weights: dict[str, float] = {}
        for term in (*query.terms, *query.scoring):
            for lex in dict.fromkeys(lexemes[term]):
                weights[lex] = weights.get(lex, 0.0) + 1.0
        finding = sorted({lex for t in query.terms for lex in lexemes[t]})
        required = sorted({lex for t in query.scoring for lex in lexemes[t]})
        if not finding or (query.require_scoring and not required):
            return ScoredKeys.empty()
        return self.bm25(
            query.namespace,
            weights,
            query.k,
            finding=finding,
            required=required if query.require_scoring else None,
        )

    def bm25(
        self,
        namespace: str,
        weights: Mapping[str, float],
        k: int,
        *,
        finding: Sequence[str] | None = None,
        required: Sequence[str] | None = None,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> ScoredKeys:
        """Okapi BM25 over the live revisions of ``namespace`` that hold any of the lexemes
        ``finding`` (default: every lexeme of ``weights``) and, when given, one of
        ``required``; scored over every lexeme ``weights`` names (lexeme -> how many query
        words it stands for), FTS5's formula: ``idf = ln((N - n + 0.5) / (n + 0.5))`` (at
        least 1e-6), ``k1 = 1.2``, ``b = 0.75``, document length in word tokens. Best ``k``
        ``(rid, score)``, ties by rid.

        One statement over the ``postings`` table (index-only scans of its primary key):
        the finding lexemes' postings are summed per revision; a lexeme that only scores adds
        its postings of the revisions found."""
        if not weights:
            return ScoredKeys.empty()
        _version, _epoch, live, tokens = self._ns_row(namespace)
        if live == 0:
            return ScoredKeys.empty()
        lexemes = sorted(weights)
        df = self._term_frequencies(namespace, lexemes)
        find = set(lexemes if finding is None else finding)
        need = set(required) if required is not None else set()
        rows = [
            (lex, max(float(np.log((live - df[lex] + 0.5) / (df[lex] + 0.5))), 1e-6) * weights[lex])
            for lex in lexemes
            if df[lex] > 0
        ]
        found = [(lex, idf) for lex, idf in rows if lex in find]
        more = [(lex, idf) for lex, idf in rows if lex not in find]
        if not found:
            return ScoredKeys.empty()
        params: dict[str, Any] = {
            "ns": namespace,
            "k": k,
            "k1": k1,
            "k1p": k1 + 1,
            "b": b,
            "avgdl": max(tokens / live, 1e-9),
            "f_lex": [lex for lex, _ in found],
            "f_idf": [idf for _, idf in found],
            "f_req": [lex in need for lex, _ in found],
            "m_lex": [lex for lex, _ in more],
            "m_idf": [idf for _, idf in more],
            "m_req": [lex in need for lex, _ in more],
        }
        rows_out = self._conn.execute(
            self._t(_BM25_MORE if more else _BM25_FOUND)
            if more or required is not None
            else self._t(_BM25_FOUND_ONLY),
            {**params, "required": required is not None},
        ).fetchall()
        return ScoredKeys.of(rows_out)

    # -- vector ------------------------------------------------------------------------------

    def vector(
        self,
        namespace: str,
        descriptor: EmbedderDescriptor,
        query: np.ndarray,
        k: int,
        /,
        *,
        exact: bool = False,
    ) -> ScoredKeys:
        """Cosine over the live vectors of ``namespace`` in ``descriptor``'s space only: the
        best ``k`` ``(rid, score)``, ties by rid. L2-normalised spaces score the inner product
        (their cosine, as the embedded store computes it); a zero vector scores 0. Below
        :data:`EXACT_BELOW` live memories (or with ``exact=True``) every vector is compared;
        from there on the space's HNSW index proposes them once it is built
        (:meth:`PostgresStore.maintain_index`; iterative scan, so the namespace filter cannot
        starve it)."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        l2 = descriptor.normalization == "l2"
        op = sql.SQL("<#>" if l2 else "<=>")
        score = sql.SQL("-d" if l2 else "CASE WHEN d = 'NaN' THEN 0 ELSE 1 - d END")
        indexed = (
            not exact
            and self.live_count(namespace) >= self._store.exact_below
            and self._index_ready(descriptor.key)
        )
        if indexed:
            # with ef_search 512 pgvector's cost estimate favours a scan and sort below a few
            # hundred thousand rows: make the planner walk the graph (reset right after);
            # one statement sets them all
            self._conn.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), "
                "set_config('hnsw.iterative_scan', 'relaxed_order', true)"
                + "".join(f", set_config('{name}', 'off', true)" for name in _NO_SCAN),
                (str(max(EF_SEARCH, k)),),
            )
            # the index's own expression, so the planner walks the HNSW graph
            dims = sql.Literal(descriptor.dimensions)
            distance = sql.SQL("(v.vector::vector({d}) {op} %(q)s::vector({d}))").format(
                d=dims, op=op
            )
        else:
            # an exact scan: no cast per row (the space's vectors all have its dimensions)
            distance = sql.SQL("(v.vector {op} %(q)s::vector)").format(op=op)
        order = distance
        query_sql = sql.SQL(
            "SELECT rid, {score} FROM (SELECT v.rid, {distance} AS d FROM {s}.vectors v "
            "WHERE v.space = {key} AND v.live AND v.namespace = %(ns)s ORDER BY {order} "
            "LIMIT %(k)s) AS hits"
        ).format(
            score=score,
            distance=distance,
            s=sql.Identifier(self._store.schema),
            key=sql.Literal(descriptor.key),
            order=order,
        )
        rows = self._conn.execute(query_sql, {"q": q, "ns": namespace, "k": k}).fetchall()
        if indexed:
            self._conn.execute(
                "SELECT " + ", ".join(f"set_config('{name}', 'on', true)" for name in _NO_SCAN)
            )
        hits = [(int(r), float(s)) for r, s in rows]
        hits.sort(key=lambda h: (-h[1], h[0]))
        return ScoredKeys.of(hits[:k])

    def _index_ready(self, space: str) -> bool:
        ready = self._indexed.get(space)
        if ready is None:
            state = space_index_state(self._conn, self._store.schema, space)
            ready = self._indexed[space] = state is True
        return ready

    # -- rows --------------------------------------------------------------------------------

    def importance(self, rids: Sequence[int], /) -> dict[int, float]:
        """The stored importance of each of ``rids`` that exists; the same statement reads
        the identities of the live ones, which :meth:`identities` then answers without
        another round trip (the host asks both of the same admitted keys)."""
        rows = self._conn.execute(
            self._t(
                "SELECT rid, importance, live, namespace, memory_id, revision FROM {revisions} "
                "WHERE rid = ANY(%s)"
            ),
            (list(rids),),
        ).fetchall()
        self._found = (
            frozenset(rids),
            {int(r[0]): MemoryRef(r[3], r[4], int(r[5])) for r in rows if r[2]},
        )
        return {int(r[0]): float(r[1]) for r in rows}

    def top_importance(self, namespace: str, k: int, /) -> ScoredKeys:
        rows = self._conn.execute(
            self._t(
                "SELECT rid, importance FROM {revisions} WHERE namespace = %s AND live "
                "ORDER BY importance DESC, rid LIMIT %s"
            ),
            (namespace, k),
        ).fetchall()
        return ScoredKeys.of(rows)

    def identities(self, rids: Sequence[int], /) -> dict[int, MemoryRef]:
        """The identity of each *live* revision among ``rids``; others are left out."""
        if self._found is not None and self._found[0].issuperset(rids):
            known = self._found[1]
            return {rid: known[rid] for rid in rids if rid in known}
        rows = self._conn.execute(
            self._t(
                "SELECT rid, namespace, memory_id, revision FROM {revisions} "
                "WHERE live AND rid = ANY(%s)"
            ),
            (list(rids),),
        ).fetchall()
        return {int(rid): MemoryRef(ns, mid, int(rev)) for rid, ns, mid, rev in rows}

    def memories(self, rids: Sequence[int], /) -> dict[int, StoredMemory]:
        rows = self._conn.execute(
            self._t(f"SELECT {COLUMNS} FROM {{revisions}} r WHERE r.rid = ANY(%s)"),
            (list(rids),),
        ).fetchall()
        return {int(row[0]): row_to_memory(row) for row in rows}

    def resolve(self, ref: MemoryRef, /) -> int | None:
        row = self._conn.execute(
            self._t(
                "SELECT rid FROM {revisions} WHERE namespace = %s AND memory_id = %s "
                "AND revision = %s"
            ),
            (ref.namespace, ref.memory_id, ref.revision),
        ).fetchone()
        return int(row[0]) if row else None
