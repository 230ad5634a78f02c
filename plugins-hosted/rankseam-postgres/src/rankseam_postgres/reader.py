"""A search's read snapshot of the PostgreSQL store: the reader protocols
(``rankseam.plugin.stores.StoreReader``) in PostgreSQL's dialect: BM25 over ``tsvector``, pgvector
cosine (exact, or through the space's HNSW index), importances and identities."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from psycopg import sql

from rankseam.plugin.embedders import EmbedderDescriptor
from rankseam.plugin.stores import (
    Filter,
    Identities,
    LexicalQuery,
    Neighbours,
    ScoredKeys,
    StoredMemory,
)
from rankseam.types import MemoryRef
from rankseam_postgres.filters import compile_where
from rankseam_postgres.schema import (
    IndexKind,
    beyond_half,
    half_precision_error,
    space_index_kind,
)
from rankseam_postgres.tables import COLUMNS, Executes, row_to_memory

if TYPE_CHECKING:
    from rankseam_postgres.store import PostgresStore

__all__ = [
    "EF_SEARCH",
    "EF_SEARCH_LARGE",
    "EXACT_BELOW",
    "LARGE_FROM",
    "NEIGHBOURS",
    "PostgresReader",
]

#: A namespace with fewer live memories than this is searched exactly (a sequential scan of
#: its vectors); from this size on through the space's HNSW index.
EXACT_BELOW = 20_000
#: ``hnsw.ef_search`` of an index search (the candidate list; raised to the over-fetch when
#: that is larger, at most 800). pgvector's search time grows with it, and the effort a graph
#: needs for the same recall grows with the graph: at 100 000 memories 192 found 0.92 of the
#: exact best 120 (256: 0.95); at a million more is needed. So namespaces of
#: :data:`LARGE_FROM` live memories and more search with :data:`EF_SEARCH_LARGE`
#: (docs/plugins/postgres.md, "Performance").
EF_SEARCH = 192
#: ``hnsw.ef_search`` from :data:`LARGE_FROM` live memories on.
EF_SEARCH_LARGE = 512
#: The namespace size from which :data:`EF_SEARCH_LARGE` applies.
LARGE_FROM = 500_000

#: The neighbours of the live threaded revisions ``rid = ANY(%s)``: per key ``c``, a row
#: ``(c, 'b' | 'a' | None, rid, position)`` for each of up to ``%s`` revisions of its
#: namespace and thread just before it and up to ``%s`` just after it in thread order
#: (position, then rid), each side an index range of ``revisions_thread`` (LATERAL, LIMIT);
#: a key without neighbours still has its row (``side`` None) so that it is answered.
NEIGHBOURS = (
    "SELECT c.rid, n.side, n.rid, n.position FROM {revisions} c CROSS JOIN LATERAL ("
    "(SELECT 'b' AS side, r.rid, r.position FROM {revisions} r WHERE r.namespace = c.namespace "
    "AND r.thread = c.thread AND r.live AND (r.position, r.rid) < (c.position, c.rid) "
    "ORDER BY r.position DESC, r.rid DESC LIMIT %(before)s) UNION ALL "
    "(SELECT 'a', r.rid, r.position FROM {revisions} r WHERE r.namespace = c.namespace "
    "AND r.thread = c.thread AND r.live AND (r.position, r.rid) > (c.position, c.rid) "
    "ORDER BY r.position, r.rid LIMIT %(after)s) UNION ALL "
    "(SELECT NULL, NULL, NULL)) n "
    "WHERE c.rid = ANY(%(keys)s) AND c.live AND c.thread IS NOT NULL AND c.position IS NOT NULL"
)

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
#: Where the finding lexemes' postings join: a filter restricts the revisions found here.
_FIND_JOIN = "JOIN {postings} p ON p.namespace = %(ns)s AND p.lexeme = q.lex"
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

#: Per store: the lexemes of query words (they depend on its text search configuration
#: only), the spaces whose HNSW index is valid, and lexemes' document frequencies by
#: namespace version.
_MEMO: weakref.WeakKeyDictionary[Any, dict[str, dict[Any, Any]]] = weakref.WeakKeyDictionary()
_MEMO_LOCK = threading.Lock()
_MEMO_MAX = 50_000


def _store_memo(store: Any) -> dict[str, dict[Any, Any]]:
    with _MEMO_LOCK:
        memo = _MEMO.get(store)
        if memo is None or len(memo["lexemes"]) > _MEMO_MAX:
            memo = _MEMO[store] = {"lexemes": {}, "indexed": {}, "df": {}}
        return memo


def _vector_text(q: np.ndarray) -> str:
    """A float32 vector as pgvector text (each value's shortest repr: read back exactly)."""
    return "[" + ",".join(map(repr, q.astype(np.float32).tolist())) + "]"


class _Facts(NamedTuple):
    namespaces: dict[str, tuple[int, int, int, int]]
    indexed: dict[str, IndexKind | None]


class PostgresReader:
    """Read access bound to one read transaction (one snapshot): the reader protocols
    (``rankseam.plugin.stores.StoreReader``) in PostgreSQL's dialect. The host's candidate sources
    run on it (:class:`~rankseam_postgres.siblings.ConcurrentPostgresReader` runs two of them
    side by side)."""

    def __init__(
        self, store: PostgresStore, conn: Executes, *, facts: _Facts | None = None
    ) -> None:
        self._store = store
        self._conn = conn
        self._t = store.tables
        # what a snapshot cannot change, read once for the reader and its siblings: each
        # namespace's row, each space's index
        self._namespaces, self._indexed = facts if facts is not None else _Facts({}, {})
        self._found: tuple[frozenset[int], Identities] | None = None

    def sibling(self, conn: Executes) -> PostgresReader:
        """A reader of the same snapshot on ``conn`` (another transaction that imported it, or
        this one's connection), sharing what this reader already read of it."""
        return PostgresReader(self._store, conn, facts=_Facts(self._namespaces, self._indexed))

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
        memo = _store_memo(self._store)["lexemes"]
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
        table, one statement for those not yet known; memoised per store and namespace
        version, which every write to the namespace raises)."""
        memo = _store_memo(self._store)["df"]
        version = self.namespace_version(namespace)
        found = {lex: memo.get((namespace, version, lex)) for lex in lexemes}
        missing = [lex for lex, n in found.items() if n is None]
        if missing:
            rows = dict(
                self._conn.execute(
                    self._t(
                        "SELECT lexeme, df FROM {terms} WHERE namespace = %s AND lexeme = ANY(%s)"
                    ),
                    (namespace, missing),
                ).fetchall()
            )
            if len(memo) > _MEMO_MAX:
                memo.clear()  # readers hold their own answers: clearing is safe
            for lex in missing:
                found[lex] = memo[(namespace, version, lex)] = int(rows.get(lex, 0))
        return {lex: int(n) for lex, n in found.items()}  # type: ignore[arg-type]

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
            where=query.where,
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
        where: Filter | None = None,
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
        if more:
            statement = _BM25_MORE
        elif required is not None:
            statement = _BM25_FOUND
        else:
            statement = _BM25_FOUND_ONLY
        if where is not None:
            # only the revisions that pass the filter are found (their scores are unchanged:
            # the statistics stay the namespace's)
            condition, filter_args = compile_where(where)
            statement = statement.replace(
                _FIND_JOIN,
                f"{_FIND_JOIN} AND p.rid IN (SELECT r.rid FROM {{revisions}} r WHERE "
                f"r.namespace = %(ns)s AND r.live AND {condition})",
            )
            params.update(filter_args)
        rows_out = self._conn.execute(
            self._t(statement), {**params, "required": required is not None}
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
        where: Filter | None = None,
    ) -> ScoredKeys:
        """Cosine over the live vectors of ``namespace`` in ``descriptor``'s space only: the
        best ``k`` ``(rid, score)``, ties by rid. With ``where``, the vectors of the revisions
        that pass it are compared exactly (no index). L2-normalised spaces score the inner product
        (their cosine, as the embedded store computes it); a zero vector scores 0. Below
        :data:`EXACT_BELOW` live memories (or with ``exact=True``) every vector is compared;
        from there on the space's HNSW index proposes them once it is built
        (:meth:`PostgresStore.maintain_index`; iterative scan, so the namespace filter cannot
        starve it)."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        l2 = descriptor.normalization == "l2"
        op = sql.SQL("<#>" if l2 else "<=>")
        score = sql.SQL("-d" if l2 else "CASE WHEN d = 'NaN' THEN 0 ELSE 1 - d END")
        kind = (
            self._index_kind(descriptor.key)
            if not exact and where is None and self.live_count(namespace) >= self._store.exact_below
            else None
        )
        indexed = kind is not None
        if kind == "halfvec" and (beyond := beyond_half(q)) is not None:
            raise half_precision_error(descriptor.key, "the query", *beyond)
        if kind is not None:
            ef = EF_SEARCH_LARGE if self.live_count(namespace) >= LARGE_FROM else EF_SEARCH
            # the index's own expression, so the planner walks the HNSW graph; the score is
            # then computed from the stored vector, as an exact search computes it
            dims = sql.Literal(descriptor.dimensions)
            text = sql.Literal(_vector_text(q))
            order = sql.SQL("(v.vector::{t}({d}) {op} {q}::{t}({d}))").format(
                t=sql.SQL(kind), d=dims, op=op, q=text
            )
            distance = sql.SQL("(v.vector {op} {q}::vector({d}))").format(op=op, q=text, d=dims)
        else:
            # an exact scan: no cast per row (the space's vectors all have its dimensions)
            order = distance = sql.SQL("(v.vector {op} %(q)s::vector)").format(op=op)
        restrict: sql.Composable = sql.SQL("")
        filter_args: dict[str, Any] = {}
        if where is not None:
            condition, filter_args = compile_where(where)
            restrict = sql.SQL(
                " AND v.rid IN (SELECT r.rid FROM {s}.revisions r WHERE r.namespace = %(ns)s "
                "AND r.live AND {condition})"
            ).format(s=sql.Identifier(self._store.schema), condition=sql.SQL(condition))
        query_sql = sql.SQL(
            "SELECT rid, {score} FROM (SELECT v.rid, {distance} AS d FROM {s}.vectors v "
            "WHERE v.space = {key} AND v.live AND v.namespace = {ns}{restrict} ORDER BY {order} "
            "LIMIT {k}) AS hits"
        ).format(
            restrict=restrict,
            score=score,
            distance=distance,
            order=order,
            s=sql.Identifier(self._store.schema),
            key=sql.Literal(descriptor.key),
            ns=sql.Literal(namespace) if indexed else sql.Placeholder("ns"),
            k=sql.Literal(k) if indexed else sql.Placeholder("k"),
        )
        if indexed:
            # with a large ef_search pgvector's cost estimate favours a scan and sort below a few
            # hundred thousand rows: the planner is made to walk the graph for this one
            # statement. Settings, search and reset go as ONE round trip (three statements
            # of the simple protocol, so the search is planned after the settings)
            on = ", ".join(f"set_config('{name}', 'on', true)" for name in _NO_SCAN)
            off = ", ".join(f"set_config('{name}', 'off', true)" for name in _NO_SCAN)
            cur = self._conn.execute(
                sql.SQL(
                    "SELECT set_config('hnsw.ef_search', {ef}, true), "
                    "set_config('hnsw.iterative_scan', 'relaxed_order', true), {off}; "
                    "{search}; SELECT {on}"
                ).format(
                    ef=sql.Literal(str(max(ef, k))),
                    off=sql.SQL(off),
                    search=query_sql,
                    on=sql.SQL(on),
                )
            )
            cur.nextset()
            rows = cur.fetchall()
        else:
            rows = self._conn.execute(
                query_sql, {"q": q, "ns": namespace, "k": k, **filter_args}
            ).fetchall()
        hits = [(int(r), float(s)) for r, s in rows]
        hits.sort(key=lambda h: (-h[1], h[0]))
        return ScoredKeys.of(hits[:k])

    def _index_kind(self, space: str) -> IndexKind | None:
        """The space's valid HNSW index (:func:`~rankseam_postgres.schema.space_index_kind`),
        asked once per reader; a half-precision index, once valid, stays: that answer is
        memoised per store."""
        if space in self._indexed:
            return self._indexed[space]
        built = _store_memo(self._store)["indexed"]
        kind: IndexKind | None = built.get(space)
        if kind is None:
            kind = space_index_kind(self._conn, self._store.schema, space)
            if kind == "halfvec":
                built[space] = kind
        self._indexed[space] = kind
        return kind

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
            Identities({r[0]: (r[3], r[4], r[5]) for r in rows if r[2]}),
        )
        return {r[0]: r[1] for r in rows}

    def top_importance(self, namespace: str, k: int, /) -> ScoredKeys:
        rows = self._conn.execute(
            self._t(
                "SELECT rid, importance FROM {revisions} WHERE namespace = %s AND live "
                "ORDER BY importance DESC, rid LIMIT %s"
            ),
            (namespace, k),
        ).fetchall()
        return ScoredKeys.of(rows)

    def identities(self, rids: Sequence[int], /) -> Mapping[int, MemoryRef]:
        """The identity of each *live* revision among ``rids``; others are left out."""
        if self._found is not None and self._found[0].issuperset(rids):
            return self._found[1].subset(rids)
        rows = self._conn.execute(
            self._t(
                "SELECT rid, namespace, memory_id, revision FROM {revisions} "
                "WHERE live AND rid = ANY(%s)"
            ),
            (list(rids),),
        ).fetchall()
        return Identities({rid: (ns, mid, rev) for rid, ns, mid, rev in rows})

    def memories(self, rids: Sequence[int], /) -> dict[int, StoredMemory]:
        rows = self._conn.execute(
            self._t(f"SELECT {COLUMNS} FROM {{revisions}} r WHERE r.rid = ANY(%s)"),
            (list(rids),),
        ).fetchall()
        return {int(row[0]): row_to_memory(row) for row in rows}

    def neighbours(self, rids: Sequence[int], before: int, after: int, /) -> dict[int, Neighbours]:
        """The neighbours of each live revision among ``rids`` that belongs to a thread (the
        ``NeighbourReader`` of the store contract): one statement, two index ranges of
        ``revisions_thread`` per key (:data:`NEIGHBOURS`)."""
        if not rids:
            return {}
        rows = self._conn.execute(
            self._t(NEIGHBOURS), {"keys": list(rids), "before": before, "after": after}
        ).fetchall()
        found: dict[int, tuple[list[tuple[float, int]], list[tuple[float, int]]]] = {}
        for key, side, rid, position in rows:
            entry = found.setdefault(int(key), ([], []))
            if rid is not None:
                entry[0 if side == "b" else 1].append((float(position), int(rid)))
        return {
            key: Neighbours([r for _p, r in sorted(b)], [r for _p, r in sorted(a)])
            for key, (b, a) in found.items()
        }

    def resolve(self, ref: MemoryRef, /) -> int | None:
        row = self._conn.execute(
            self._t(
                "SELECT rid FROM {revisions} WHERE namespace = %s AND memory_id = %s "
                "AND revision = %s"
            ),
            (ref.namespace, ref.memory_id, ref.revision),
        ).fetchone()
        return int(row[0]) if row else None
