"""Filters (:mod:`rankseam.store.filters`) compiled into the SQLite store's SQL: a boolean
expression over the revisions table ``r``, with named parameters (keys and values are always
bound, never written into the SQL). Metadata conditions look values up in
``metadata_values`` through its indexes; the memory's fields are columns of ``r``.

The expression means exactly what :func:`rankseam.store.filters.matches` means (the store
conformance kit compares them): typed comparisons (a value's ``kind`` must be the filter
value's), a negation holds where the key is absent, and no expression is ever NULL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankseam.store.filters import SQL_OPERATORS, Condition, Filter, FilterCompiler

__all__ = ["FIELD_COLUMNS", "allowed_rows", "compile_where"]

#: The column of ``r`` that holds each field a filter may name.
FIELD_COLUMNS: Mapping[str, str] = {
    "thread": "r.thread",
    "position": "r.position",
    "derived_from": "r.derived_from",
    "created_at": "r.created_at",
    "importance": "r.importance",
    "memory_id": "r.memory_id",
}


def allowed_rows(node: Filter, namespace: str) -> tuple[str, dict[str, Any]]:
    """A query of the row keys of ``namespace``'s live revisions that pass ``node``, with its
    parameters (named ``:f_N``; ``:f_ns`` is the namespace)."""
    where, args = compile_where(node, namespace)
    return (
        f"SELECT r.rid FROM revisions r WHERE r.namespace = :f_ns AND r.live = 1 AND {where}",
        args,
    )


def compile_where(node: Filter, namespace: str) -> tuple[str, dict[str, Any]]:
    """``node`` as a boolean SQL expression over ``revisions r`` and its named parameters
    (``:f_ns`` = ``namespace``, for the metadata look-ups)."""
    sql, args = _SQLiteFilter().compile(node)
    args["f_ns"] = namespace
    return sql, args


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    return "text" if isinstance(value, str) else "number"


class _SQLiteFilter(FilterCompiler):
    def bind(self, value: object) -> str:
        return super().bind(int(value) if isinstance(value, bool) else value)

    def field(self, node: Condition) -> str:
        column = FIELD_COLUMNS[node.field or ""]
        if node.op == "exists":
            return f"({column} IS NOT NULL)"
        if node.op == "in":
            marks = ", ".join(self.bind(v) for v in node.values)
            return f"({column} IS NOT NULL AND {column} IN ({marks}))"
        op = SQL_OPERATORS[node.op]
        return f"({column} IS NOT NULL AND {column} {op} {self.bind(node.values[0])})"

    def metadata(self, node: Condition) -> str:
        lookup = "r.rid IN (SELECT rid FROM metadata_values WHERE namespace = :f_ns AND key = "
        key = self.bind(node.key)
        if node.op == "exists":
            return f"{lookup}{key})"
        if node.op == "in":
            by_kind: dict[str, list[object]] = {}
            for value in node.values:
                by_kind.setdefault(_kind(value), []).append(value)
            parts = []
            for kind, values in by_kind.items():
                column = "text_value" if kind == "text" else "num_value"
                marks = ", ".join(self.bind(v) for v in values)
                parts.append(
                    f"{lookup}{key} AND kind = {self.bind(kind)} AND {column} IN ({marks}))"
                )
            return "(" + " OR ".join(parts) + ")"
        value = node.values[0]
        kind = _kind(value)
        column = "text_value" if kind == "text" else "num_value"
        return (
            f"{lookup}{key} AND kind = {self.bind(kind)} AND "
            f"{column} {SQL_OPERATORS[node.op]} {self.bind(value)})"
        )
