"""The store's tables, their version, and the migrations that bring an older store up.

Every table lives in one PostgreSQL schema (``?schema=``, default ``rankseam``) and every
table's primary key starts with the namespace: a distributed PostgreSQL (Citus) can shard all of
them by ``namespace`` and keep each namespace's rows, and so each search and each write, on one
node (docs/plugins/postgres.md, "Sharding by namespace").

Opening a store migrates it automatically, in one transaction, under an advisory lock (many
processes may open the same store at once; one migrates, the others wait and find it done).
A store written by a newer rankseam-postgres, or a schema that holds tables but no rankseam
``meta``, is refused with a :class:`~rankseam.errors.ConfigurationError`.

- version 1: ``meta``, ``namespaces`` (write version, vector epoch, live count and token total
  for BM25), ``spaces``, ``memories`` (heads and tombstones), ``revisions`` (immutable
  revisions with their ``tsvector`` and token count; a partial GIN index over live ones),
  ``vectors`` (pgvector, one row per revision and space; a partial HNSW index per space,
  built once a namespace of that space reaches 20 000 live memories, see
  ``PostgresStore.maintain_index``: over the vectors cast to ``halfvec`` in L2-normalised
  spaces, full precision in others; an L2-normalised space's full-precision index that an
  earlier release built serves until ``maintain_index`` replaces it).
- version 2: ``terms`` (per namespace and lexeme, how many live revisions hold it: BM25's
  document frequency, kept by every write) and ``postings`` (per live revision and lexeme its
  term frequency and the revision's token count; its primary key is the lexical channel's
  index, read by index-only scans). The GIN index is dropped: no search reads it any more.
  Migrating a version 1 store fills both tables from the live revisions' ``tsvector``.
- version 3: a revision's ``thread``, ``position`` and ``derived_from`` (NULL in the rows
  written before; docs/store.md, "Threads, positions and sources"), indexed by
  ``revisions_thread (namespace, thread, live, position, rid)`` (a thread's memories in thread
  order: neighbours, a thread between two positions) and ``revisions_derived (namespace,
  derived_from, live)`` (the memories derived from one), both partial over the rows that have
  the field. Adding the columns rewrites no row.
- version 4: the GIN index over the live revisions' metadata as jsonb (metadata filters).
- version 5: ``forgotten (namespace, memory_id, forgotten_at)``: what a hard delete
  (``forget``, ``reset``) leaves of a memory, its id and the time (:mod:`.forget`).
- version 6: ``feedback (namespace, feedback_id, seq, created_at, record)``: what
  applications said about search results (``Memory.feedback``), a table of its own that no
  search, history or snapshot reads (:mod:`.feedback`; docs/store.md, "Feedback").
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, TypeAlias

import numpy as np
import psycopg
from psycopg import sql

from rankseam.errors import ConfigurationError, ValidationError
from rankseam_postgres.feedback import FEEDBACK
from rankseam_postgres.forget import FORGOTTEN
from rankseam_postgres.tables import Executes

__all__ = [
    "HALF_MAX",
    "HNSW_EF_CONSTRUCTION",
    "HNSW_M",
    "HNSW_MAX_DIMS",
    "SCHEMA_VERSION",
    "IndexKind",
    "beyond_half",
    "build_space_index",
    "ensure_schema",
    "ensure_space_index",
    "half_precision_error",
    "index_kind",
    "index_name",
    "space_index_kind",
    "vacuum_lexical",
]

#: The kinds of HNSW index a space may have (see :func:`index_kind`).
IndexKind: TypeAlias = Literal["halfvec", "vector"]
_KINDS: tuple[IndexKind, ...] = ("halfvec", "vector")

#: The version this rankseam-postgres writes (the ``meta`` table's ``schema_version``).
SCHEMA_VERSION = 6
#: The most dimensions pgvector's HNSW index takes, per kind (:func:`index_kind`); a space
#: with more is searched exactly.
HNSW_MAX_DIMS: dict[IndexKind, int] = {"halfvec": 4000, "vector": 2000}
#: The HNSW graph's links per node (pgvector's default).
HNSW_M = 16
#: The candidate list while the graph is built (pgvector's default is 64): a better graph
#: finds as much with a shorter search list. At 100 000 memories 128 found 0.92 of the exact
#: best 120 with ``hnsw.ef_search`` 192, which the default graph needed 256 for, in less time;
#: the build takes 1.5 to 1.7 times as long (docs/plugins/postgres.md, "Performance").
HNSW_EF_CONSTRUCTION = 128
#: The largest magnitude half precision (IEEE 754 binary16) holds. The HNSW index of an
#: L2-normalised space is built over its vectors cast to ``halfvec``, which refuses a component
#: beyond it: such a space's vectors must stay within [-HALF_MAX, HALF_MAX] (a unit vector's
#: lie within [-1, 1]), and the store refuses one that does not on every way in.
HALF_MAX = 65504.0


_V1 = """
CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE {s}.namespaces (
    name text PRIMARY KEY,
    version bigint NOT NULL DEFAULT 0,
    vector_epoch bigint NOT NULL DEFAULT 0,
    live_count bigint NOT NULL DEFAULT 0,
    live_tokens bigint NOT NULL DEFAULT 0
);
CREATE TABLE {s}.spaces (
    key text PRIMARY KEY,
    descriptor text NOT NULL,
    dimensions integer NOT NULL,
    metric text NOT NULL
);
CREATE SEQUENCE {s}.rid_seq;
CREATE TABLE {s}.memories (
    namespace text NOT NULL,
    memory_id text NOT NULL,
    head_rid bigint NOT NULL,
    head_revision integer NOT NULL,
    deleted boolean NOT NULL DEFAULT false,
    deleted_at double precision,
    PRIMARY KEY (namespace, memory_id)
);
CREATE TABLE {s}.revisions (
    namespace text NOT NULL,
    rid bigint NOT NULL,
    memory_id text NOT NULL,
    revision integer NOT NULL,
    text text NOT NULL,
    importance double precision NOT NULL,
    metadata text NOT NULL,
    created_at double precision NOT NULL,
    content_hash text NOT NULL,
    live boolean NOT NULL,
    retired_version bigint,
    tokens integer NOT NULL,
    tsv tsvector NOT NULL,
    PRIMARY KEY (namespace, rid),
    UNIQUE (namespace, memory_id, revision)
);
CREATE INDEX revisions_rid ON {s}.revisions (rid);
CREATE INDEX revisions_tsv ON {s}.revisions USING gin (tsv) WHERE live;
CREATE INDEX revisions_importance ON {s}.revisions (namespace, importance DESC, rid) WHERE live;
CREATE TABLE {s}.vectors (
    namespace text NOT NULL,
    space text NOT NULL,
    rid bigint NOT NULL,
    live boolean NOT NULL,
    vector vector NOT NULL,
    PRIMARY KEY (namespace, space, rid)
);
"""

_V2 = """
CREATE TABLE {s}.terms (
    namespace text NOT NULL,
    lexeme text NOT NULL,
    df bigint NOT NULL,
    PRIMARY KEY (namespace, lexeme)
);
CREATE TABLE {s}.postings (
    namespace text NOT NULL,
    lexeme text NOT NULL,
    rid bigint NOT NULL,
    tf integer NOT NULL,
    tokens integer NOT NULL,
    PRIMARY KEY (namespace, lexeme, rid) INCLUDE (tf, tokens)
);
INSERT INTO {s}.postings (namespace, lexeme, rid, tf, tokens)
    SELECT r.namespace, u.lexeme, r.rid, cardinality(u.positions), r.tokens
    FROM {s}.revisions r CROSS JOIN LATERAL unnest(r.tsv) AS u WHERE r.live;
INSERT INTO {s}.terms (namespace, lexeme, df)
    SELECT namespace, lexeme, count(*) FROM {s}.postings GROUP BY namespace, lexeme;
DROP INDEX {s}.revisions_tsv
"""

_V3 = """
ALTER TABLE {s}.revisions ADD COLUMN IF NOT EXISTS thread text,
    ADD COLUMN IF NOT EXISTS position double precision, ADD COLUMN IF NOT EXISTS derived_from text;
CREATE INDEX IF NOT EXISTS revisions_thread ON {s}.revisions
    (namespace, thread, live, position, rid) WHERE thread IS NOT NULL;
CREATE INDEX IF NOT EXISTS revisions_derived ON {s}.revisions (namespace, derived_from, live)
    WHERE derived_from IS NOT NULL
"""

#: Version 4: the metadata of live revisions indexed as jsonb (GIN, default operator class:
#: containment and key existence), what metadata filters look up (docs/filters.md).
_V4 = """
CREATE INDEX IF NOT EXISTS revisions_metadata ON {s}.revisions
    USING gin ((metadata::jsonb)) WHERE live
"""

#: Migrations: MIGRATIONS[v] brings a store from version v to v + 1.
MIGRATIONS: dict[int, str] = {0: _V1, 1: _V2, 2: _V3, 3: _V4, 4: FORGOTTEN, 5: FEEDBACK}


def _exists(conn: psycopg.Connection[Any], schema: str, table: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s", (schema, table)
    ).fetchone()
    return row is not None


def _ensure_vector(conn: psycopg.Connection[Any], display: str) -> None:
    have = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    if have:
        return
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege:
        raise ConfigurationError(
            f"the database of {display} lacks the pgvector extension and this user may not "
            "create it; ask its administrator to run `CREATE EXTENSION vector;` in it once"
        ) from None
    except psycopg.errors.FeatureNotSupported:  # pragma: no cover - depends on the server
        raise ConfigurationError(
            f"the server of {display} has no pgvector extension; install pgvector "
            "(https://github.com/pgvector/pgvector) on it"
        ) from None
    except psycopg.errors.UndefinedFile:
        raise ConfigurationError(
            f"the server of {display} has no pgvector extension; install pgvector on it "
            "(packages postgresql-NN-pgvector, or the pgvector/pgvector container image)"
        ) from None


def ensure_schema(
    conn: psycopg.Connection[Any],
    *,
    schema: str,
    text_search: str,
    display: str,
    create: bool = True,
) -> str:
    """Create (``create=True``) or migrate the store in ``schema``; return its text search
    configuration. ``conn`` is in autocommit mode; the migration runs in one transaction of
    its own."""
    if not create and not _exists(conn, schema, "meta"):
        raise ConfigurationError(
            f"no rankseam store at {display} (schema {schema!r} holds none); check the URL "
            "and its ?schema=, or create one first (`rankseam add`, `rankseam ingest`)"
        )
    _ensure_vector(conn, display)
    s = sql.Identifier(schema)
    with conn.transaction():
        # one opener migrates; the others wait here and then find the current version
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"rankseam:{schema}",))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s))
        if _exists(conn, schema, "meta"):
            meta = dict(
                conn.execute(sql.SQL("SELECT key, value FROM {}.meta").format(s)).fetchall()
            )
            version = int(meta.get("schema_version", "0"))
        else:
            others = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)
            ).fetchone()
            if others and others[0]:
                raise ConfigurationError(
                    f"the schema {schema!r} of {display} holds tables that are not a rankseam "
                    "store; choose another schema with ?schema=NAME in the URL"
                )
            meta, version = {}, 0
        if version > SCHEMA_VERSION:
            raise ConfigurationError(
                f"the store {display} has schema version {version}, newer than this "
                f"rankseam-postgres understands ({SCHEMA_VERSION}); upgrade rankseam-postgres"
            )
        if version == 0:
            exists = conn.execute(
                "SELECT 1 FROM pg_ts_config WHERE cfgname = %s", (text_search,)
            ).fetchone()
            if exists is None:
                raise ConfigurationError(
                    f"the server of {display} has no text search configuration "
                    f"{text_search!r}; choose one of `SELECT cfgname FROM pg_ts_config` "
                    "with ?text_search=NAME"
                )
        while version < SCHEMA_VERSION:
            for statement in MIGRATIONS[version].split(";"):
                if statement.strip():
                    conn.execute(sql.SQL(statement).format(s=s))  # type: ignore[arg-type]
            version += 1
            if version == 1:
                conn.execute(
                    sql.SQL("INSERT INTO {}.meta(key, value) VALUES ('text_search', %s)").format(s),
                    (text_search,),
                )
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.meta(key, value) VALUES ('schema_version', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                ).format(s),
                (str(version),),
            )
        if "text_search" not in meta:
            meta["text_search"] = text_search
    return str(meta["text_search"])


def index_kind(metric: str) -> IndexKind:
    """The HNSW index a space gets: over its vectors cast to half precision for L2-normalised
    spaces (inner product; their components lie within [-1, 1]), full precision for the others
    (cosine; a component past half precision's 65 504 could not be cast)."""
    return "halfvec" if metric == "ip" else "vector"


def beyond_half(vector: np.ndarray) -> tuple[int, float] | None:
    """The first component of ``vector`` beyond :data:`HALF_MAX` (its position and value),
    or None when half precision holds every component."""
    big = np.abs(np.asarray(vector, dtype=np.float32).reshape(-1)) > HALF_MAX
    if not big.any():
        return None
    position = int(np.argmax(big))
    return position, float(np.asarray(vector, dtype=np.float32).reshape(-1)[position])


def half_precision_error(space: str, where: str, position: int, value: float) -> ValidationError:
    """The error for a vector of the L2-normalised ``space`` that half precision cannot hold
    (``where`` names its memory)."""
    return ValidationError(
        f"{where} has a vector component of {value:g} (at position {position}) in the space "
        f"{space!r}, beyond {HALF_MAX:g}, the largest value of half precision: the space is "
        "L2-normalised (normalization='l2'), so the PostgreSQL store indexes its vectors in "
        "half precision (a unit vector's components lie within [-1, 1]); nothing of this "
        "write was stored. Fix the embedder so that it returns unit vectors (divide each by "
        "its norm), or declare normalization='none' for one that does not"
    )


def _beyond_half_row(conn: Executes, schema: str, key: str) -> tuple[str, str, int] | None:
    """A live memory (namespace, memory id, revision) whose vector in the space ``key`` has a
    component beyond :data:`HALF_MAX` (what a failed half-precision index build found)."""
    row = conn.execute(
        sql.SQL(
            "SELECT r.namespace, r.memory_id, r.revision FROM {s}.vectors v JOIN {s}.revisions r "
            "ON r.namespace = v.namespace AND r.rid = v.rid WHERE v.space = %s AND v.live AND "
            "EXISTS (SELECT 1 FROM unnest(v.vector::real[]) AS x WHERE abs(x) > %s) "
            "ORDER BY v.namespace, v.rid LIMIT 1"
        ).format(s=sql.Identifier(schema)),
        (key, HALF_MAX),
    ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]), int(row[2]))


def index_name(space: str, kind: IndexKind) -> str:
    """The HNSW index of a space (a short digest: index names have at most 63 bytes); the
    full-precision name is also the one earlier releases gave every space's index."""
    prefix = "vectors_half_" if kind == "halfvec" else "vectors_hnsw_"
    return prefix + hashlib.sha256(space.encode("utf-8")).hexdigest()[:16]


def ensure_space_index(
    conn: psycopg.Connection[Any], schema: str, key: str, descriptor: dict[str, Any]
) -> None:
    """Register the space ``key`` in ``spaces`` (a known key is left alone), inside the
    caller's transaction. Its HNSW index is built later, by :func:`build_space_index`."""
    dims = int(descriptor["dimensions"])
    metric = "ip" if descriptor.get("normalization") == "l2" else "cosine"
    conn.execute(
        sql.SQL(
            "INSERT INTO {}.spaces(key, descriptor, dimensions, metric) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (key) DO NOTHING"
        ).format(sql.Identifier(schema)),
        (key, json.dumps(descriptor, sort_keys=True), dims, metric),
    )


def _index_states(conn: Executes, schema: str, names: list[str]) -> dict[str, bool]:
    """Of the indexes ``names`` in ``schema``, those that exist -> whether each is valid (an
    invalid one is the leftover of an interrupted ``CREATE INDEX CONCURRENTLY``)."""
    rows = conn.execute(
        "SELECT c.relname, i.indisvalid FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_index i ON i.indexrelid = c.oid "
        "WHERE n.nspname = %s AND c.relname = ANY(%s)",
        (schema, names),
    ).fetchall()
    return {str(name): bool(valid) for name, valid in rows}


def space_index_kind(conn: Executes, schema: str, key: str) -> IndexKind | None:
    """Which valid HNSW index the space ``key`` has (a half-precision one first): the one
    :func:`build_space_index` builds, or for an L2-normalised space the full-precision index
    an earlier release built, until ``maintain_index`` replaces it; None when neither."""
    names = {kind: index_name(key, kind) for kind in _KINDS}
    states = _index_states(conn, schema, list(names.values()))
    return next((kind for kind in _KINDS if states.get(names[kind])), None)


def build_space_index(
    conn: psycopg.Connection[Any], schema: str, key: str, dims: int, metric: str
) -> str | None:
    """Build the partial HNSW index of the space ``key`` (:func:`index_kind`: half precision
    and inner product for L2-normalised spaces, full precision and cosine otherwise; the
    scores are computed from the stored vectors either way) with ``m`` :data:`HNSW_M` and
    ``ef_construction`` :data:`HNSW_EF_CONSTRUCTION`, by ``CREATE INDEX CONCURRENTLY``:
    writers and searches carry on meanwhile. ``conn`` must be in autocommit mode. A leftover
    of an interrupted build is dropped first; the other kind's index (an earlier release's)
    is dropped once the new one is valid (searches use it until then). Returns the index's
    name, or None when the space has too many dimensions for an index."""
    kind = index_kind(metric)
    if dims > HNSW_MAX_DIMS[kind]:
        return None
    name = index_name(key, kind)
    (other,) = (index_name(key, k) for k in _KINDS if k != kind)
    states = _index_states(conn, schema, [name, other])
    if states.get(name) is False:
        conn.execute(
            sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(schema, name))
        )
    if not states.get(name):
        try:
            conn.execute(
                sql.SQL(
                    "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {s}.vectors USING hnsw "
                    "((vector::{kind}({dims})) {ops}) WITH (m = {m}, ef_construction = {efc}) "
                    "WHERE space = {key} AND live"
                ).format(
                    name=sql.Identifier(name),
                    s=sql.Identifier(schema),
                    kind=sql.SQL(kind),
                    dims=sql.Literal(dims),
                    ops=sql.SQL(f"{kind}_ip_ops" if metric == "ip" else f"{kind}_cosine_ops"),
                    m=sql.Literal(HNSW_M),
                    efc=sql.Literal(HNSW_EF_CONSTRUCTION),
                    key=sql.Literal(key),
                )
            )
        except psycopg.Error as exc:
            # a failed CREATE INDEX CONCURRENTLY leaves an INVALID index behind: drop it now
            # (while the connection works; else the next build drops it first), so a failed
            # build never leaves one and the space can be indexed again
            if not (conn.broken or conn.closed):
                conn.execute(
                    sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                        sql.Identifier(schema, name)
                    )
                )
            if isinstance(exc, psycopg.errors.NumericValueOutOfRange) and kind == "halfvec":
                raise _unindexable(conn, schema, key) from None
            raise
    if other in states:
        conn.execute(
            sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(schema, other))
        )
    return name


def _unindexable(conn: Executes, schema: str, key: str) -> ValidationError:
    """The error for a half-precision index build that a stored vector broke (one that an
    earlier release stored: this one refuses them on every way in)."""
    found = _beyond_half_row(conn, schema, key)
    where = (
        f"the memory {found[1]!r} of namespace {found[0]!r} (revision {found[2]})"
        if found
        else "a stored memory"
    )
    return ValidationError(
        f"cannot build the HNSW index of the space {key!r}: {where} has a vector component "
        f"beyond {HALF_MAX:g}, the largest value of half precision, in which the store indexes "
        "an L2-normalised space (normalization='l2'); no index was left behind, searches "
        "compare every vector meanwhile. Delete or update each such memory (an update stores "
        "a new vector), fix the embedder so that it returns unit vectors, then run "
        "maintain_index again"
    )


def vacuum_lexical(conn: psycopg.Connection[Any], schema: str) -> None:
    """``VACUUM (ANALYZE)`` the lexical tables after a large ingest: the vacuum marks the
    postings' pages all-visible (the lexical channel's index-only scans then never visit the
    table) and the planner learns how many postings a lexeme has. Autovacuum does the same
    later on its own. ``conn`` must be in autocommit mode."""
    for table in ("postings", "terms"):
        conn.execute(
            sql.SQL("VACUUM (ANALYZE) {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
        )
