"""The PostgreSQL store: namespaces, immutable revisions, tombstones, full text and pgvector.

It keeps the embedded store's semantics (docs/store.md) on a server that many processes and
machines share:

- **Writes.** Every write is one transaction. Its first statement bumps the version of each
  namespace it writes to, in sorted order; that row lock serialises the writers of one
  namespace (as SQLite's write lock serialises all of them) while writers of other namespaces
  run in parallel. A batch is all or nothing: a process killed mid-batch leaves nothing of it.
- **Reads.** A search reads its coarse pool in one ``REPEATABLE READ READ ONLY`` transaction
  (one snapshot) and releases it before any reranker runs. Revision rows never change after
  they are written (only ``live`` goes from true to false), so a hit's text always belongs to
  the revision it cites.
- **Connections.** A ``psycopg_pool.ConnectionPool`` per store object (``?pool_min=`` /
  ``?pool_max=``, default 1 / 10); the pgvector type adapter is registered on each connection.
- **Secrets.** The URL's password never leaves :class:`~rankseam_postgres.url.StoreURL`:
  ``path``, ``repr``, ``stats()`` and every error show the redacted URL.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from rankseam.errors import ConfigurationError, ValidationError
from rankseam.plugin import (
    BatchCounts,
    EmbedderDescriptor,
    LexicalQuery,
    MemoryNotFoundError,
    PreparedRecord,
    ScoredKey,
    StoredMemory,
    plan_write,
)
from rankseam.types import MemoryRef
from rankseam_postgres.schema import (
    SCHEMA_VERSION,
    build_space_index,
    ensure_schema,
    ensure_space_index,
    index_name,
    space_index_state,
)
from rankseam_postgres.url import StoreURL, parse_url

__all__ = [
    "EXACT_BELOW",
    "PostgresReader",
    "PostgresStore",
    "as_array",
    "copy_vectors",
    "count_tokens",
]

T = TypeVar("T")

log = logging.getLogger("rankseam.postgres")

#: A namespace with fewer live memories than this is searched exactly (a sequential scan of
#: its vectors); from this size on through the space's HNSW index.
EXACT_BELOW = 20_000
#: ``hnsw.ef_search`` of an index search (the candidate list; the over-fetch is at most 800).
EF_SEARCH = 512

_TOKEN = re.compile(r"[^\W_]+")
#: Planner methods turned off for the statement that searches an HNSW index.
_NO_SCAN = ("enable_seqscan", "enable_bitmapscan", "enable_sort")
_PAGE = 500
_COLUMNS = (
    "r.rid, r.namespace, r.memory_id, r.revision, r.text, r.importance, r.metadata, "
    "r.created_at, r.content_hash"
)


def count_tokens(text: str) -> int:
    """The document length BM25 uses: word tokens as FTS5's ``unicode61`` cuts them (letters
    and digits; everything else separates)."""
    return len(_TOKEN.findall(text))


def _row_to_memory(row: Sequence[Any], deleted: bool = False) -> StoredMemory:
    _rid, ns, mid, rev, text, importance, meta, created, chash = row[:9]
    return StoredMemory(
        ref=MemoryRef(ns, mid, int(rev)),
        text=text,
        importance=float(importance),
        metadata=json.loads(meta),
        created_at=float(created),
        content_hash=chash,
        deleted=deleted,
    )


def as_array(value: Any) -> np.ndarray:
    """A stored vector as float32 (the adapter answers ``pgvector.Vector`` or an array)."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy is not None else value, dtype=np.float32)


def _vector_array(values: Sequence[Any], dims: int) -> np.ndarray | list[np.ndarray | None]:
    """Stored vectors as the embedded store returns them: one read-only float32 matrix when
    every row has one, else a vector or ``None`` per row."""
    rows = [None if v is None else as_array(v) for v in values]
    if rows and all(r is not None and r.shape == (dims,) for r in rows):
        matrix = np.stack(rows)  # type: ignore[arg-type]
        matrix.flags.writeable = False
        return matrix
    out: list[np.ndarray | None] = []
    for r in rows:
        if r is not None:
            r.flags.writeable = False
        out.append(r)
    return out


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
        self._lexeme_memo: dict[str, tuple[str, ...]] = {}

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
        the configuration drops as a stop word), memoised per term for this snapshot."""
        missing = [t for t in dict.fromkeys(terms) if t not in self._lexeme_memo]
        if missing:
            rows = self._conn.execute(
                "SELECT u.t, tsvector_to_array(to_tsvector(%s::regconfig, u.t)) "
                "FROM unnest(%s::text[]) AS u(t)",
                (self._store.text_search, missing),
            ).fetchall()
            for term, lexemes in rows:
                self._lexeme_memo[term] = tuple(lexemes)
        return {t: self._lexeme_memo[t] for t in terms}

    def document_frequency(self, namespace: str, term: str, cap: int, /) -> int:
        """How many live revisions of ``namespace`` hold any lexeme of the word ``term``,
        counted up to ``cap`` (0 for a word the text search configuration drops)."""
        lexemes = self._lexemes([term])[term]
        if not lexemes:
            return 0
        version = self.namespace_version(namespace)
        return self._store.cached_count(
            ("df", namespace, version, lexemes, cap),
            lambda: int(
                self._conn.execute(
                    self._t(
                        "SELECT count(*) FROM (SELECT 1 FROM {revisions} WHERE namespace = %s "
                        "AND live AND tsv @@ %s::tsquery LIMIT %s) AS hits"
                    ),
                    (namespace, _tsquery(lexemes), cap),
                ).fetchone()[0]  # type: ignore[index]
            ),
        )

    def lexical(self, query: LexicalQuery, /) -> list[ScoredKey]:
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
            return []
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
    ) -> list[ScoredKey]:
        """Okapi BM25 over the live revisions of ``namespace`` that hold any of the lexemes
        ``finding`` (default: every lexeme of ``weights``) and, when given, one of
        ``required``; scored over every lexeme ``weights`` names (lexeme -> how many query
        words it stands for), FTS5's formula: ``idf = ln((N - n + 0.5) / (n + 0.5))`` (at
        least 1e-6), ``k1 = 1.2``, ``b = 0.75``, document length in word tokens. Best ``k``
        ``(rid, score)``, ties by rid."""
        if not weights:
            return []
        _version, _epoch, live, tokens = self._ns_row(namespace)
        if live == 0:
            return []
        avgdl = max(tokens / live, 1e-9)
        lexemes = sorted(weights)
        idf = []
        for lex in lexemes:
            n = self._lexeme_frequency(namespace, lex, live + 1)
            idf.append(max(float(np.log((live - n + 0.5) / (n + 0.5))), 1e-6) * weights[lex])
        # tf of each lexeme: ts_rank_cd with every weight 1 counts a single lexeme's positions
        params: dict[str, Any] = {
            "ns": namespace,
            "q": _tsquery(lexemes if finding is None else finding),
            "k": k,
            "ones": [1.0, 1.0, 1.0, 1.0],
            "k1": k1,
            "b": b,
            "avgdl": avgdl,
        }
        tfs, terms = [], []
        for n, (lex, weight) in enumerate(zip(lexemes, idf, strict=True)):
            params[f"q{n}"] = _tsquery([lex])
            params[f"idf{n}"] = weight
            tfs.append(
                sql.SQL("ts_rank_cd(%(ones)s::float4[], r.tsv, {}::tsquery, 0) AS {}").format(
                    sql.Placeholder(f"q{n}"), sql.Identifier(f"t{n}")
                )
            )
            terms.append(
                sql.SQL("{idf} * f.{t} * (%(k1)s + 1) / (f.{t} + f.kd)").format(
                    idf=sql.Placeholder(f"idf{n}"), t=sql.Identifier(f"t{n}")
                )
            )
        also = sql.SQL("")
        if required is not None:
            params["r"] = _tsquery(required)
            also = sql.SQL(" AND r.tsv @@ %(r)s::tsquery")
        # OFFSET 0 keeps the planner from inlining the tf subquery (each tf once per row)
        query = sql.SQL(
            "SELECT rid, {score} AS s FROM (SELECT r.rid, {tfs}, "
            "%(k1)s * (1 - %(b)s + %(b)s * r.tokens / %(avgdl)s) AS kd FROM {s}.revisions r "
            "WHERE r.namespace = %(ns)s AND r.live AND r.tsv @@ %(q)s::tsquery{also} "
            "OFFSET 0) AS f ORDER BY s DESC, rid LIMIT %(k)s"
        ).format(
            score=sql.SQL(" + ").join(terms),
            s=sql.Identifier(self._store.schema),
            tfs=sql.SQL(", ").join(tfs),
            also=also,
        )
        rows = self._conn.execute(query, params).fetchall()
        return [(int(r), float(s)) for r, s in rows]

    def _lexeme_frequency(self, namespace: str, lexeme: str, cap: int) -> int:
        """How many live revisions of ``namespace`` hold ``lexeme``, counted up to ``cap``."""
        version = self.namespace_version(namespace)
        return self._store.cached_count(
            ("df", namespace, version, (lexeme,), cap),
            lambda: int(
                self._conn.execute(
                    self._t(
                        "SELECT count(*) FROM (SELECT 1 FROM {revisions} WHERE namespace = %s "
                        "AND live AND tsv @@ %s::tsquery LIMIT %s) AS hits"
                    ),
                    (namespace, _tsquery([lexeme]), cap),
                ).fetchone()[0]  # type: ignore[index]
            ),
        )

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
    ) -> list[ScoredKey]:
        """Cosine over the live vectors of ``namespace`` in ``descriptor``'s space only: the
        best ``k`` ``(rid, score)``, ties by rid. L2-normalised spaces score the inner product
        (their cosine, as the embedded store computes it); a zero vector scores 0. Below
        :data:`EXACT_BELOW` live memories (or with ``exact=True``) every vector is compared;
        from there on the space's HNSW index proposes them once it is built
        (:meth:`PostgresStore.maintain_index`; iterative scan, so the namespace filter cannot
        starve it)."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != descriptor.dimensions:
            raise ValidationError(
                f"query vector has {q.shape[0]} dimensions; the space {descriptor.key!r} has "
                f"{descriptor.dimensions}"
            )
        l2 = descriptor.normalization == "l2"
        if not l2:
            norm = float(np.linalg.norm(q))
            q = q / norm if norm > 0 else q
        op = sql.SQL("<#>" if l2 else "<=>")
        score = sql.SQL("-d" if l2 else "CASE WHEN d = 'NaN' THEN 0 ELSE 1 - d END")
        indexed = (
            not exact
            and self.live_count(namespace) >= self._store.exact_below
            and self._index_ready(descriptor.key)
        )
        if indexed:
            self._conn.execute(
                sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(EF_SEARCH, k)))
            )
            self._conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            # with ef_search 512 pgvector's cost estimate favours a scan and sort below a few
            # hundred thousand rows: make the planner walk the graph (reset right after)
            for setting in _NO_SCAN:
                self._conn.execute(f"SET LOCAL {setting} = off")
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
            for setting in _NO_SCAN:
                self._conn.execute(f"SET LOCAL {setting} = on")
        hits = [(int(r), float(s)) for r, s in rows]
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits[:k]

    def _index_ready(self, space: str) -> bool:
        ready = self._indexed.get(space)
        if ready is None:
            state = space_index_state(self._conn, self._store.schema, space)
            ready = self._indexed[space] = state is True
        return ready

    # -- rows --------------------------------------------------------------------------------

    def importance(self, rids: Sequence[int], /) -> dict[int, float]:
        rows = self._conn.execute(
            self._t("SELECT rid, importance FROM {revisions} WHERE rid = ANY(%s)"),
            (list(rids),),
        ).fetchall()
        return {int(r): float(i) for r, i in rows}

    def top_importance(self, namespace: str, k: int, /) -> list[ScoredKey]:
        rows = self._conn.execute(
            self._t(
                "SELECT rid, importance FROM {revisions} WHERE namespace = %s AND live "
                "ORDER BY importance DESC, rid LIMIT %s"
            ),
            (namespace, k),
        ).fetchall()
        return [(int(r), float(s)) for r, s in rows]

    def identities(self, rids: Sequence[int], /) -> dict[int, MemoryRef]:
        """The identity of each *live* revision among ``rids``; others are left out."""
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
            self._t(f"SELECT {_COLUMNS} FROM {{revisions}} r WHERE r.rid = ANY(%s)"),
            (list(rids),),
        ).fetchall()
        return {int(row[0]): _row_to_memory(row) for row in rows}

    def resolve(self, ref: MemoryRef, /) -> int | None:
        row = self._conn.execute(
            self._t(
                "SELECT rid FROM {revisions} WHERE namespace = %s AND memory_id = %s "
                "AND revision = %s"
            ),
            (ref.namespace, ref.memory_id, ref.revision),
        ).fetchone()
        return int(row[0]) if row else None


def copy_vectors(
    conn: psycopg.Connection[Any],
    tables: Callable[[str], sql.Composed],
    rows: Sequence[tuple[str, str, int, bool, np.ndarray]],
) -> None:
    """Insert vector rows ``(namespace, space, rid, live, vector)`` with one binary ``COPY``
    (several times faster than one ``INSERT`` per row)."""
    with conn.cursor() as cur:
        with cur.copy(
            tables(
                "COPY {vectors} (namespace, space, rid, live, vector) FROM STDIN (FORMAT BINARY)"
            )
        ) as copy:
            copy.set_types(["text", "text", "int8", "bool", "vector"])
            for row in rows:
                copy.write_row(row)


def _tsquery(lexemes: Sequence[str]) -> str:
    """An OR of lexemes as ``tsquery`` text (each quoted: nothing in it is an operator)."""
    return " | ".join("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes)


class _Tables:
    """Formats SQL with the store's schema-qualified table names (``{revisions}`` ...)."""

    NAMES = ("meta", "namespaces", "spaces", "memories", "revisions", "vectors", "rid_seq")

    def __init__(self, schema: str) -> None:
        quoted = sql.Identifier(schema)
        self._names = {
            name: sql.SQL("{}.{}").format(quoted, sql.Identifier(name)) for name in self.NAMES
        }
        self._cache: dict[str, sql.Composed] = {}

    def __call__(self, text: str) -> sql.Composed:
        out = self._cache.get(text)
        if out is None:
            out = sql.SQL(text).format(**self._names)  # type: ignore[arg-type]
            self._cache[text] = out
        return out


class PostgresStore:
    """A rankseam store in a PostgreSQL database. Thread-safe: a connection pool serves the
    threads of a process; any number of processes and machines may open the same URL."""

    def __init__(
        self, url: str | StoreURL, *, create: bool = True, exact_below: int = EXACT_BELOW
    ) -> None:
        """Open the store at ``url``, creating its schema (``create=True``) or refusing a
        missing one, and migrating an older one."""
        self.url = url if isinstance(url, StoreURL) else parse_url(url)
        self.schema = self.url.schema
        self.exact_below = exact_below
        self.tables = _Tables(self.schema)
        self._memo: dict[tuple[Any, ...], int] = {}
        self._memo_lock = threading.Lock()
        self._closed = False
        try:
            extra: dict[str, Any] = dict(self.url.connect_kwargs)
            with psycopg.connect(self.url.conninfo, autocommit=True, **extra) as conn:
                self.text_search = ensure_schema(
                    conn,
                    schema=self.schema,
                    text_search=self.url.text_search,
                    display=self.url.display,
                    create=create,
                )
        except psycopg.Error as exc:
            raise self._error("cannot open", exc) from None
        self._pool = ConnectionPool(
            self.url.conninfo,
            min_size=self.url.pool_min,
            max_size=self.url.pool_max,
            kwargs={"autocommit": True, **self.url.connect_kwargs},
            configure=register_vector,
            open=False,
            name=f"rankseam:{self.schema}",
        )
        try:
            self._pool.open(wait=self.url.pool_min > 0, timeout=30.0)
        except (psycopg.Error, PoolTimeout) as exc:
            self._pool.close()
            raise self._error("cannot connect to", exc) from None

    # -- identity ----------------------------------------------------------------------------

    kind = "postgres"

    @property
    def location(self) -> str:
        """The store's redacted URL (no password)."""
        return self.url.display

    @property
    def path(self) -> str:
        return self.url.display

    @property
    def tokenizer(self) -> str:
        """The text search configuration (what lexical scores depend on), e.g. ``english``."""
        return self.text_search

    @property
    def schema_version(self) -> int:
        return SCHEMA_VERSION

    def __repr__(self) -> str:
        return f"PostgresStore({self.url.display!r})"

    def _error(self, what: str, exc: BaseException) -> ConfigurationError:
        detail = self.url.scrub(
            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        )
        return ConfigurationError(
            f"{what} the PostgreSQL store {self.url.display}: {detail}; check the URL, the "
            "PG* environment variables (PGHOST, PGUSER, PGPASSWORD ...) and that the server "
            "is reachable"
        )

    # -- memo --------------------------------------------------------------------------------

    def cached_count(self, key: tuple[Any, ...], compute: Callable[[], int]) -> int:
        """A small memo for counts readers compute (keys carry the namespace version)."""
        value = self._memo.get(key)
        if value is None:
            value = compute()
            with self._memo_lock:
                if len(self._memo) > 4096:
                    self._memo.clear()
                self._memo[key] = value
        return value

    # -- connections and transactions --------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        if self._closed:
            raise ValidationError(f"the store {self.url.display} is closed; open it again")
        try:
            with self._pool.connection(timeout=60.0) as conn:
                yield conn
        except PoolTimeout as exc:
            raise self._error("no connection from the pool of", exc) from None
        except psycopg.OperationalError as exc:
            raise self._error("lost the connection to", exc) from None

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[psycopg.Connection[Any]]:
        with self._connection() as conn:
            conn.execute(begin)
            try:
                yield conn
            except BaseException:
                if not conn.closed:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except psycopg.errors.SerializationFailure as exc:  # pragma: no cover - defensive
                raise ValidationError(f"a write to {self.url.display} conflicted: {exc}") from None

    @contextmanager
    def _write(self, namespaces: Sequence[str], *, vectors: bool = False) -> Iterator[_RowWriter]:
        """One write transaction that first locks each namespace it writes to, in sorted
        order (the writers of one namespace take turns; others run in parallel). Yields the
        transaction's row writer; the namespaces it wrote to get a new version (and, with
        ``vectors``, a new vector epoch) when it commits."""
        with self._transaction("BEGIN") as conn:
            versions = {ns: self._lock(conn, ns) for ns in sorted(set(namespaces))}
            writer = _RowWriter(self, conn, versions, vectors=vectors)
            try:
                yield writer
                writer.finish()
            except psycopg.errors.DataError as exc:
                raise ValidationError(
                    f"PostgreSQL refused a value: {self.url.scrub(str(exc).splitlines()[0])}"
                ) from None
            except psycopg.errors.ProgramLimitExceeded as exc:
                raise ValidationError(
                    f"PostgreSQL refused a memory: {str(exc).splitlines()[0]}; split the text "
                    "into several memories"
                ) from None

    def _lock(self, conn: psycopg.Connection[Any], namespace: str) -> int:
        """Lock the namespace's row (creating it); the version this transaction commits."""
        row = conn.execute(
            self.tables(
                "INSERT INTO {namespaces}(name) VALUES (%s) ON CONFLICT (name) DO UPDATE "
                "SET version = {namespaces}.version RETURNING version"
            ),
            (namespace,),
        ).fetchone()
        return int(row[0]) + 1  # type: ignore[index]

    @contextmanager
    def read(self) -> Iterator[PostgresReader]:
        """One short read transaction (a consistent snapshot); never held while reranking."""
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY") as conn:
            yield PostgresReader(self, conn)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.close()

    # -- spaces ------------------------------------------------------------------------------

    def register_space(self, descriptor: EmbedderDescriptor) -> None:
        with self._transaction("BEGIN") as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"rankseam:{self.schema}",))
            ensure_space_index(conn, self.schema, descriptor.key, dict(descriptor.to_dict()))

    # -- writes ------------------------------------------------------------------------------

    def _head(
        self, conn: psycopg.Connection[Any], namespace: str, memory_id: str
    ) -> tuple[Any, ...] | None:
        return conn.execute(
            self.tables(
                "SELECT m.head_rid, m.head_revision, m.deleted, r.content_hash, r.importance, "
                "r.metadata FROM {memories} m JOIN {revisions} r ON r.namespace = m.namespace "
                "AND r.rid = m.head_rid WHERE m.namespace = %s AND m.memory_id = %s"
            ),
            (namespace, memory_id),
        ).fetchone()

    def add(
        self, rec: PreparedRecord, *, space: str | None, same_is_ok: bool = False
    ) -> tuple[MemoryRef, bool]:
        """Add a new memory (see the embedded store's ``add``: same semantics)."""
        with self._write([rec.namespace]) as writer:
            head = self._head(writer.conn, rec.namespace, rec.memory_id)
            if head is not None and not head[2]:
                _rid, rev, _deleted, chash, importance, metadata = head
                same = (chash, importance, metadata) == (
                    rec.content_hash,
                    0.5 if rec.importance is None else rec.importance,
                    rec.metadata or "{}",
                )
                if same_is_ok and same:
                    return MemoryRef(rec.namespace, rec.memory_id, int(rev)), False
                raise ValidationError(
                    f"memory {rec.memory_id!r} already exists in namespace {rec.namespace!r} "
                    "with a different text, importance or metadata; use update() to write a new "
                    "revision, or choose another id"
                    if same_is_ok
                    else f"memory {rec.memory_id!r} already exists in namespace "
                    f"{rec.namespace!r}; use update() to write a new revision, or choose another id"
                )
            revision = int(head[1]) + 1 if head else 1
            writer.revision(
                rec,
                revision,
                0.5 if rec.importance is None else rec.importance,
                rec.metadata or "{}",
                space,
                rec.vector,
            )
        return MemoryRef(rec.namespace, rec.memory_id, revision), True

    def _live_head(
        self, conn: psycopg.Connection[Any], namespace: str, memory_id: str
    ) -> tuple[Any, ...]:
        head = self._head(conn, namespace, memory_id)
        if head is None or head[2]:
            raise MemoryNotFoundError.no_head(namespace, memory_id, deleted=head is not None)
        return head

    def update(self, rec: PreparedRecord, *, space: str | None) -> MemoryRef:
        with self._write([rec.namespace]) as writer:
            rid, revision, _d, _h, old_importance, old_meta = self._live_head(
                writer.conn, rec.namespace, rec.memory_id
            )
            writer.retire(rec.namespace, int(rid))
            importance = old_importance if rec.importance is None else rec.importance
            writer.revision(
                rec, int(revision) + 1, importance, rec.metadata or old_meta, space, rec.vector
            )
        return MemoryRef(rec.namespace, rec.memory_id, int(revision) + 1)

    def delete(self, namespace: str, memory_id: str) -> MemoryRef:
        with self._write([namespace]) as writer:
            rid, revision, *_rest = self._live_head(writer.conn, namespace, memory_id)
            writer.retire(namespace, int(rid))
            writer.conn.execute(
                self.tables(
                    "UPDATE {memories} SET deleted = true, deleted_at = %s "
                    "WHERE namespace = %s AND memory_id = %s"
                ),
                (time.time(), namespace, memory_id),
            )
        return MemoryRef(namespace, memory_id, int(revision))

    def _heads(
        self, conn: psycopg.Connection[Any], records: Sequence[PreparedRecord]
    ) -> dict[tuple[str, str], tuple[Any, ...]]:
        keys = list(dict.fromkeys((r.namespace, r.memory_id) for r in records))
        rows = conn.execute(
            self.tables(
                "SELECT m.namespace, m.memory_id, m.head_rid, m.head_revision, m.deleted, "
                "r.content_hash, r.importance, r.metadata FROM unnest(%s::text[], %s::text[]) "
                "AS w(namespace, memory_id) JOIN {memories} m ON m.namespace = w.namespace "
                "AND m.memory_id = w.memory_id JOIN {revisions} r ON r.namespace = m.namespace "
                "AND r.rid = m.head_rid"
            ),
            ([k[0] for k in keys], [k[1] for k in keys]),
        ).fetchall()
        return {(ns, mid): tuple(head) for ns, mid, *head in rows}

    def write_batch(
        self,
        records: Sequence[PreparedRecord],
        *,
        space: str | None,
        vectors: np.ndarray | None = None,
    ) -> BatchCounts:
        """Write records in ONE transaction (all or nothing), with the embedded store's
        semantics: a new id is added; a known id gets a new revision when its text,
        importance or metadata changed, else nothing."""
        added = updated = unchanged = 0
        refs: list[MemoryRef] = []
        if not records:
            return BatchCounts()
        with self._write([r.namespace for r in records]) as writer:
            heads = self._heads(writer.conn, records)
            writer.reserve(len(records))
            for i, rec in enumerate(records):
                key = (rec.namespace, rec.memory_id)
                plan = plan_write(rec, heads.get(key))
                if plan.change == "unchanged":
                    unchanged += 1
                    refs.append(MemoryRef(rec.namespace, rec.memory_id, plan.revision))
                    continue
                if plan.change == "added":
                    added += 1
                else:
                    updated += 1
                if plan.retire is not None:
                    writer.retire(rec.namespace, plan.retire)
                revision, importance, metadata = plan.revision, plan.importance, plan.metadata
                vector = rec.vector if vectors is None else vectors[i]
                rid = writer.revision(rec, revision, importance, metadata, space, vector)
                heads[key] = (rid, revision, False, rec.content_hash, importance, metadata)
                refs.append(MemoryRef(rec.namespace, rec.memory_id, revision))
        return BatchCounts(added, updated, unchanged, tuple(refs))

    def put_vectors(self, items: Sequence[tuple[int, str, np.ndarray]], *, space: str) -> None:
        """Store vectors ``(rid, namespace, vector)`` in ``space`` (one transaction)."""
        if not items:
            return
        with self._write([ns for _r, ns, _v in items], vectors=True) as writer:
            for ns in {ns for _r, ns, _v in items}:
                writer.touch(ns)
            with writer.conn.cursor() as cur:
                cur.executemany(
                    self.tables(
                        "INSERT INTO {vectors}(namespace, space, rid, live, vector) "
                        "SELECT r.namespace, %s, r.rid, r.live, %s FROM {revisions} r "
                        "WHERE r.namespace = %s AND r.rid = %s "
                        "ON CONFLICT (namespace, space, rid) DO UPDATE SET vector = "
                        "excluded.vector"
                    ),
                    [(space, np.asarray(vec, dtype=np.float32), ns, rid) for rid, ns, vec in items],
                )

    # -- reads -------------------------------------------------------------------------------

    def get(self, namespace: str, memory_id: str) -> StoredMemory:
        with self._connection() as conn:
            row = conn.execute(
                self.tables(
                    f"SELECT {_COLUMNS}, m.deleted FROM {{memories}} m JOIN {{revisions}} r "
                    "ON r.namespace = m.namespace AND r.rid = m.head_rid "
                    "WHERE m.namespace = %s AND m.memory_id = %s"
                ),
                (namespace, memory_id),
            ).fetchone()
        if row is None:
            raise MemoryNotFoundError.no_memory(namespace, memory_id)
        return _row_to_memory(row, bool(row[9]))

    def get_ref(self, ref: MemoryRef) -> StoredMemory:
        with self._connection() as conn:
            row = conn.execute(
                self.tables(
                    f"SELECT {_COLUMNS}, m.deleted FROM {{revisions}} r JOIN {{memories}} m "
                    "ON m.namespace = r.namespace AND m.memory_id = r.memory_id "
                    "WHERE r.namespace = %s AND r.memory_id = %s AND r.revision = %s"
                ),
                (ref.namespace, ref.memory_id, ref.revision),
            ).fetchone()
        if row is None:
            raise MemoryNotFoundError.no_revision(ref)
        return _row_to_memory(row, bool(row[9]))

    def iter_memories(
        self, namespace: str, *, include_deleted: bool = False
    ) -> Iterator[StoredMemory]:
        """Current revisions, streamed page by page (no transaction held between pages)."""
        last = 0
        cond = "(r.live OR (m.deleted AND m.head_rid = r.rid))" if include_deleted else "r.live"
        query = self.tables(
            f"SELECT {_COLUMNS}, m.deleted FROM {{revisions}} r JOIN {{memories}} m "
            "ON m.namespace = r.namespace AND m.memory_id = r.memory_id "
            f"WHERE r.namespace = %s AND r.rid > %s AND {cond} ORDER BY r.rid LIMIT %s"
        )
        while True:
            with self._connection() as conn:
                rows = conn.execute(query, (namespace, last, _PAGE)).fetchall()
            if not rows:
                return
            for row in rows:
                yield _row_to_memory(row, bool(row[9]))
            last = int(rows[-1][0])

    def iter_missing_vectors(
        self, space: str, *, page: int = _PAGE
    ) -> Iterator[list[tuple[int, str, str]]]:
        """Pages of live revisions ``(rid, namespace, text)`` without a vector in ``space``."""
        last = 0
        query = self.tables(
            "SELECT r.rid, r.namespace, r.text FROM {revisions} r WHERE r.rid > %s AND r.live "
            "AND NOT EXISTS (SELECT 1 FROM {vectors} v WHERE v.namespace = r.namespace AND "
            "v.space = %s AND v.rid = r.rid) ORDER BY r.rid LIMIT %s"
        )
        while True:
            with self._connection() as conn:
                rows = conn.execute(query, (last, space, page)).fetchall()
            if not rows:
                return
            yield [(int(r), ns, t) for r, ns, t in rows]
            last = int(rows[-1][0])

    def fetch_vectors(
        self, refs: Sequence[MemoryRef], descriptor: EmbedderDescriptor
    ) -> np.ndarray | list[np.ndarray | None]:
        """The stored vectors of ``refs`` in ``descriptor``'s space (one statement)."""
        if not refs:
            return []
        with self._connection() as conn:
            rows = conn.execute(
                self.tables(
                    "SELECT w.i, v.vector FROM unnest(%s::text[], %s::text[], %s::int[]) "
                    "WITH ORDINALITY AS w(namespace, memory_id, revision, i) "
                    "JOIN {revisions} r ON r.namespace = w.namespace AND r.memory_id = "
                    "w.memory_id AND r.revision = w.revision JOIN {vectors} v ON v.namespace = "
                    "r.namespace AND v.space = %s AND v.rid = r.rid"
                ),
                (
                    [r.namespace for r in refs],
                    [r.memory_id for r in refs],
                    [r.revision for r in refs],
                    descriptor.key,
                ),
            ).fetchall()
        found = {int(i): v for i, v in rows}
        return _vector_array([found.get(i + 1) for i in range(len(refs))], descriptor.dimensions)

    def vectors_of(
        self, rids: Sequence[int | None], descriptor: EmbedderDescriptor
    ) -> np.ndarray | list[np.ndarray | None]:
        """The stored vectors of revision rows known by key (``None``: no such row)."""
        wanted = [rid for rid in rids if rid is not None]
        found: dict[int, Any] = {}
        if wanted:
            with self._connection() as conn:
                rows = conn.execute(
                    self.tables(
                        "SELECT rid, vector FROM {vectors} WHERE space = %s AND rid = ANY(%s)"
                    ),
                    (descriptor.key, wanted),
                ).fetchall()
            found = {int(r): v for r, v in rows}
        return _vector_array(
            [None if rid is None else found.get(rid) for rid in rids], descriptor.dimensions
        )

    def namespaces(self) -> list[str]:
        with self._connection() as conn:
            rows = conn.execute(
                self.tables(
                    "SELECT namespace FROM {memories} GROUP BY namespace "
                    'ORDER BY namespace COLLATE "C"'
                )
            ).fetchall()
        return [r[0] for r in rows]

    def stats(self, space: str | None = None) -> dict[str, Any]:
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY") as conn:
            per_ns: dict[str, dict[str, int]] = {}
            for ns, live, deleted in conn.execute(
                self.tables(
                    "SELECT namespace, count(*) FILTER (WHERE NOT deleted), "
                    "count(*) FILTER (WHERE deleted) FROM {memories} GROUP BY namespace "
                    "ORDER BY namespace"
                )
            ):
                per_ns[ns] = {"memories": int(live), "deleted": int(deleted), "revisions": 0}
            for ns, revs in conn.execute(
                self.tables("SELECT namespace, count(*) FROM {revisions} GROUP BY namespace")
            ):
                per_ns.setdefault(ns, {"memories": 0, "deleted": 0, "revisions": 0})
                per_ns[ns]["revisions"] = int(revs)
            spaces = {
                key: int(n)
                for key, n in conn.execute(
                    self.tables("SELECT space, count(*) FROM {vectors} WHERE live GROUP BY space")
                )
            }
            size = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                "AND c.relkind IN ('r', 'S')",
                (self.schema,),
            ).fetchone()
        return {
            "path": self.url.display,
            "backend": "postgresql",
            "schema": self.schema,
            "schema_version": SCHEMA_VERSION,
            "tokenizer": self.tokenizer,
            "bytes": int(size[0]) if size else 0,
            "namespaces": per_ns,
            "memories": sum(v["memories"] for v in per_ns.values()),
            "vectors_by_space": spaces,
            "pool": {"min_size": self.url.pool_min, "max_size": self.url.pool_max},
        }

    # -- index maintenance -------------------------------------------------------------------

    def maintain_index(
        self, namespace: str, descriptor: EmbedderDescriptor, /, *, force: bool = False
    ) -> dict[str, Any] | None:
        """Build the HNSW index of ``descriptor``'s space once ``namespace`` has
        :attr:`exact_below` live memories (or at once with ``force``); None when it is not
        needed yet. PostgreSQL keeps a built index current with every write, so this builds
        at most once per space (``rankseam ingest`` calls it after a large ingest). The build
        is ``CREATE INDEX CONCURRENTLY``: writes and searches go on meanwhile; until it is
        valid, searches compare every vector."""
        with self._connection() as conn:
            row = conn.execute(
                self.tables("SELECT live_count FROM {namespaces} WHERE name = %s"), (namespace,)
            ).fetchone()
            live = int(row[0]) if row else 0
            if not force and live < self.exact_below:
                return None
            started = time.perf_counter()
            built = build_space_index(
                conn,
                self.schema,
                descriptor.key,
                descriptor.dimensions,
                "ip" if descriptor.normalization == "l2" else "cosine",
            )
        if not built:
            return None
        return {
            "index": index_name(descriptor.key),
            "space": descriptor.key,
            "kind": "hnsw",
            "seconds": round(time.perf_counter() - started, 3),
        }

    # -- bulk (snapshots) --------------------------------------------------------------------

    @contextmanager
    def bulk_read(self) -> Iterator[Any]:
        """The whole store in one read transaction (what an export reads)."""
        from rankseam_postgres.bulk import PostgresBulkReader

        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY") as conn:
            yield PostgresBulkReader(self, conn)

    @contextmanager
    def bulk_write(self) -> Iterator[Any]:
        """One write transaction for bulk rows (what an import writes): all or nothing."""
        from rankseam_postgres.bulk import PostgresBulkWriter

        with self._transaction("BEGIN") as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"rankseam:{self.schema}",))
            writer = PostgresBulkWriter(self, conn)
            yield writer
            writer.finish()


class _RowWriter:
    """Rows of one write transaction, inserted together: revisions (with their ``tsvector``),
    vectors, heads; and the namespaces' live counts and token totals."""

    def __init__(
        self,
        store: PostgresStore,
        conn: psycopg.Connection[Any],
        versions: dict[str, int],
        *,
        vectors: bool = False,
    ) -> None:
        self._store = store
        self.conn = self._conn = conn
        self._versions = versions
        self._vectors_changed = vectors
        self._touched: set[str] = set()
        self._t = store.tables
        self._revisions: list[tuple[Any, ...]] = []
        self._vectors: list[tuple[Any, ...]] = []
        self._heads: dict[tuple[str, str], tuple[int, int]] = {}
        self._live: dict[str, list[int]] = {}
        self._pending: dict[int, tuple[str, int]] = {}
        self._rids: deque[int] = deque()

    def touch(self, namespace: str) -> None:
        """Mark ``namespace`` as written (it gets a new version on commit)."""
        self._touched.add(namespace)

    def _count(self, namespace: str, rows: int, tokens: int) -> None:
        self._touched.add(namespace)
        entry = self._live.setdefault(namespace, [0, 0])
        entry[0] += rows
        entry[1] += tokens

    def reserve(self, n: int) -> None:
        """Take ``n`` row keys from the sequence with one statement (unused ones are gaps)."""
        rows = self._conn.execute(
            self._t("SELECT nextval('{rid_seq}') FROM generate_series(1, %s)"), (n,)
        ).fetchall()
        self._rids.extend(int(r[0]) for r in rows)

    def _next_rid(self) -> int:
        if not self._rids:
            self.reserve(1)
        return self._rids.popleft()

    def revision(
        self,
        rec: PreparedRecord,
        revision: int,
        importance: float,
        metadata: str,
        space: str | None,
        vector: np.ndarray | None,
    ) -> int:
        rid = self._next_rid()
        tokens = count_tokens(rec.text)
        self._revisions.append(
            (
                rec.namespace,
                rid,
                rec.memory_id,
                revision,
                rec.text,
                float(importance),
                metadata,
                float(rec.created_at),
                rec.content_hash,
                tokens,
            )
        )
        if vector is not None and space is not None:
            self._vectors.append((rec.namespace, space, rid, True, np.asarray(vector, np.float32)))
        self._heads[(rec.namespace, rec.memory_id)] = (rid, revision)
        self._pending[rid] = (rec.namespace, tokens)
        self._count(rec.namespace, 1, tokens)
        return rid

    def retire(self, namespace: str, rid: int) -> None:
        """Take a revision out of search (it stays readable by its ref)."""
        if rid in self._pending:
            self.flush()
        self._touched.add(namespace)
        row = self._conn.execute(
            self._t(
                "UPDATE {revisions} SET live = false, retired_version = %s "
                "WHERE namespace = %s AND rid = %s AND live RETURNING tokens"
            ),
            (self._versions[namespace], namespace, rid),
        ).fetchone()
        self._conn.execute(
            self._t("UPDATE {vectors} SET live = false WHERE namespace = %s AND rid = %s"),
            (namespace, rid),
        )
        if row is not None:
            self._count(namespace, -1, -int(row[0]))

    def flush(self) -> None:
        t = self._t
        if self._revisions:
            cols = list(zip(*self._revisions, strict=True))
            self._conn.execute(
                t(
                    "INSERT INTO {revisions}(namespace, rid, memory_id, revision, text, "
                    "importance, metadata, created_at, content_hash, live, tokens, tsv) "
                    "SELECT u.ns, u.rid, u.mid, u.rev, u.text, u.imp, u.meta, u.created, u.hash, "
                    "true, u.tokens, to_tsvector(%s::regconfig, u.text) FROM unnest(%s::text[], "
                    "%s::bigint[], %s::text[], %s::int[], %s::text[], %s::float8[], %s::text[], "
                    "%s::float8[], %s::text[], %s::int[]) AS u(ns, rid, mid, rev, text, imp, "
                    "meta, created, hash, tokens)"
                ),
                [self._store.text_search, *[list(c) for c in cols]],
            )
        if self._vectors:
            copy_vectors(self._conn, t, self._vectors)
        if self._heads:
            keys = list(self._heads)
            self._conn.execute(
                t(
                    "INSERT INTO {memories}(namespace, memory_id, head_rid, head_revision, "
                    "deleted, deleted_at) SELECT ns, mid, rid, rev, false, NULL FROM "
                    "unnest(%s::text[], %s::text[], %s::bigint[], %s::int[]) AS u(ns, mid, rid, "
                    "rev) ON CONFLICT (namespace, memory_id) DO UPDATE SET head_rid = "
                    "excluded.head_rid, head_revision = excluded.head_revision, deleted = false, "
                    "deleted_at = NULL"
                ),
                (
                    [k[0] for k in keys],
                    [k[1] for k in keys],
                    [self._heads[k][0] for k in keys],
                    [self._heads[k][1] for k in keys],
                ),
            )
        self._revisions.clear()
        self._vectors.clear()
        self._heads.clear()
        self._pending.clear()

    def finish(self) -> None:
        """Write what is pending; give every namespace written to its new version (and vector
        epoch), live count and token total. Called before the transaction commits."""
        self.flush()
        for ns in sorted(self._touched):
            rows, tokens = self._live.get(ns, (0, 0))
            self._conn.execute(
                self._t(
                    "UPDATE {namespaces} SET version = version + 1, vector_epoch = "
                    "vector_epoch + %s, live_count = live_count + %s, live_tokens = "
                    "live_tokens + %s WHERE name = %s"
                ),
                (int(self._vectors_changed), rows, tokens, ns),
            )
        self._live.clear()
        self._touched.clear()
