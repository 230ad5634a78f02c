"""Shared pieces of the PostgreSQL store's SQL: schema-qualified table names, the row and
vector formats, and the ``tsquery`` of a set of lexemes."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from rankseam.plugin import (
    StoredMemory,
)

__all__ = [
    "COLUMNS",
    "Tables",
    "as_array",
    "copy_vectors",
    "count_tokens",
    "retire_row",
    "row_to_memory",
    "tsquery",
    "vector_array",
]

_TOKEN = re.compile(r"[^\W_]+")
#: The columns of a revision ``r`` that :func:`row_to_memory` reads (the host's).
COLUMNS = StoredMemory.COLUMNS


def count_tokens(text: str) -> int:
    """The document length BM25 uses: word tokens as FTS5's ``unicode61`` cuts them (letters
    and digits; everything else separates)."""
    return len(_TOKEN.findall(text))


def row_to_memory(row: Sequence[Any], deleted: bool = False) -> StoredMemory:
    """A stored revision from a row of :data:`COLUMNS` (``StoredMemory.from_row``)."""
    return StoredMemory.from_row((*row[:9], deleted))


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


def retire_row(
    conn: psycopg.Connection[Any],
    tables: Callable[[str], sql.Composed],
    version: int,
    namespace: str,
    rid: int,
) -> int | None:
    """Take the live revision ``rid`` of ``namespace`` (and its vectors) out of search, marked
    retired in ``version``; its token count, or None when it was not live."""
    row = conn.execute(
        tables(
            "UPDATE {revisions} SET live = false, retired_version = %s "
            "WHERE namespace = %s AND rid = %s AND live RETURNING tokens"
        ),
        (version, namespace, rid),
    ).fetchone()
    conn.execute(
        tables("UPDATE {vectors} SET live = false WHERE namespace = %s AND rid = %s"),
        (namespace, rid),
    )
    return None if row is None else int(row[0])


def tsquery(lexemes: Sequence[str]) -> str:
    """An OR of lexemes as ``tsquery`` text (each quoted: nothing in it is an operator)."""
    return " | ".join("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes)


class Tables:
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
