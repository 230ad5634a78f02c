"""Shared pieces of the PostgreSQL store's SQL: schema-qualified table names, the row and
vector formats, and the statements that insert and retire revisions (with their postings)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import psycopg
from psycopg import sql

from rankseam.plugin.stores import StoredMemory

__all__ = [
    "COLUMNS",
    "INSERT_REVISIONS",
    "REVISION_COLUMNS",
    "Executes",
    "Tables",
    "as_array",
    "copy_vectors",
    "count_tokens",
    "insert_revisions",
    "retire_row",
    "row_to_memory",
    "vector_array",
]


class Executes(Protocol):
    """What runs a statement: a connection, or a search's sibling reader's stand-in for one."""

    def execute(self, query: Any, params: Any = None, /) -> psycopg.Cursor[Any]: ...


_TOKEN = re.compile(r"[^\W_]+")
#: The columns of a revision ``r`` that :func:`row_to_memory` reads (the host's).
COLUMNS = StoredMemory.COLUMNS


def count_tokens(text: str) -> int:
    """The document length BM25 uses: word tokens as FTS5's ``unicode61`` cuts them (letters
    and digits; everything else separates)."""
    return len(_TOKEN.findall(text))


def row_to_memory(row: Sequence[Any], deleted: bool = False) -> StoredMemory:
    """A stored revision from a row of :data:`COLUMNS` (``StoredMemory.from_row``)."""
    return StoredMemory.from_row((*row[:12], deleted))


def as_array(value: Any) -> np.ndarray:
    """A stored vector as float32 (the adapter answers ``pgvector.Vector`` or an array)."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy is not None else value, dtype=np.float32)


def vector_array(values: Sequence[Any], dims: int) -> np.ndarray | list[np.ndarray | None]:
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


#: The revision columns :func:`insert_revisions` takes, in order, with their array types.
REVISION_COLUMNS = (
    ("namespace", "text"),
    ("rid", "bigint"),
    ("memory_id", "text"),
    ("revision", "int"),
    ("text", "text"),
    ("importance", "float8"),
    ("metadata", "text"),
    ("created_at", "float8"),
    ("content_hash", "text"),
    ("live", "bool"),
    ("tokens", "int"),
    ("thread", "text"),
    ("position", "float8"),
    ("derived_from", "text"),
)

#: The statement :func:`insert_revisions` runs (its parameters: the text search
#: configuration, then one array per :data:`REVISION_COLUMNS` entry).
INSERT_REVISIONS = (
    # the revisions with their tsvector; the postings of the live ones; the terms' document
    # frequencies raised by as many: one statement (the server does the text analysis once)
    "WITH ins AS (INSERT INTO {{revisions}}({cols}, tsv) SELECT {u_cols}, "
    "to_tsvector(%s::regconfig, u.text) FROM unnest({arrays}) AS u({cols}) "
    "RETURNING namespace, rid, tokens, live, tsv), "
    "p AS (SELECT i.namespace, x.lexeme, i.rid, cardinality(x.positions) AS tf, i.tokens "
    "FROM ins i CROSS JOIN LATERAL unnest(i.tsv) AS x WHERE i.live), "
    "t AS (INSERT INTO {{terms}}(namespace, lexeme, df) SELECT namespace, lexeme, count(*) "
    "FROM p GROUP BY namespace, lexeme ON CONFLICT (namespace, lexeme) DO UPDATE "
    "SET df = {{terms}}.df + excluded.df) "
    "INSERT INTO {{postings}}(namespace, lexeme, rid, tf, tokens) "
    "SELECT namespace, lexeme, rid, tf, tokens FROM p"
).format(
    cols=", ".join(c for c, _t in REVISION_COLUMNS),
    u_cols=", ".join(f"u.{c}" for c, _t in REVISION_COLUMNS),
    arrays=", ".join(f"%s::{t}[]" for _c, t in REVISION_COLUMNS),
)


def insert_revisions(
    conn: psycopg.Connection[Any],
    tables: Callable[[str], sql.Composed],
    text_search: str,
    rows: Sequence[tuple[Any, ...]],
) -> None:
    """Insert revision rows (:data:`REVISION_COLUMNS`, in order) with one statement: the
    server computes each ``tsvector`` once, and the live ones' postings and terms' document
    frequencies follow in the same statement."""
    if rows:
        columns = [list(col) for col in zip(*rows, strict=True)]
        conn.execute(tables(INSERT_REVISIONS), [text_search, *columns])


def retire_row(
    conn: psycopg.Connection[Any],
    tables: Callable[[str], sql.Composed],
    version: int,
    namespace: str,
    rid: int,
) -> int | None:
    """Take the live revision ``rid`` of ``namespace`` (its vectors and postings) out of
    search, marked retired in ``version``, and lower its terms' document frequencies; its
    token count, or None when it was not live."""
    row = conn.execute(
        tables(
            "WITH r AS (UPDATE {revisions} SET live = false, retired_version = %s "
            "WHERE namespace = %s AND rid = %s AND live RETURNING namespace, rid, tokens, tsv), "
            "d AS (DELETE FROM {postings} p USING r WHERE p.namespace = r.namespace AND "
            "p.lexeme = ANY(tsvector_to_array(r.tsv)) AND p.rid = r.rid "
            "RETURNING p.namespace, p.lexeme), "
            "t AS (UPDATE {terms} t SET df = t.df - 1 FROM d WHERE t.namespace = d.namespace "
            "AND t.lexeme = d.lexeme) SELECT tokens FROM r"
        ),
        (version, namespace, rid),
    ).fetchone()
    conn.execute(
        tables("UPDATE {vectors} SET live = false WHERE namespace = %s AND rid = %s"),
        (namespace, rid),
    )
    return None if row is None else int(row[0])


class Tables:
    """Formats SQL with the store's schema-qualified table names (``{revisions}`` ...)."""

    NAMES = (
        "meta",
        "namespaces",
        "spaces",
        "memories",
        "revisions",
        "vectors",
        "terms",
        "postings",
        "rid_seq",
        "forgotten",
        "feedback",
    )

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
