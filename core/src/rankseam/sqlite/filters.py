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

import attrs
import numpy as np

from rankseam.store.filters import SQL_OPERATORS, AllOf, Condition, Filter, FilterCompiler

__all__ = ["FIELD_COLUMNS", "AllowedRows", "allowed_rows", "compile_where"]

#: The column of ``r`` that holds each field a filter may name.
FIELD_COLUMNS: Mapping[str, str] = {
    "thread": "r.thread",
    "position": "r.position",
    "derived_from": "r.derived_from",
    "created_at": "r.created_at",
    "importance": "r.importance",
    "memory_id": "r.memory_id",
}


@attrs.frozen(eq=False)
class AllowedRows:
    """The row keys a filter passes in one snapshot: ascending (``rids``, for numpy) and as a
    JSON array (``json``, for SQL's ``json_each``)."""

    rids: np.ndarray  # int64, ascending
    json: str

    @classmethod
    def parse(cls, text: str) -> AllowedRows:
        """The keys of ``text``, decimal row keys joined by commas (``group_concat``)."""
        rids = np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, np.int64)
        rids.sort()
        return cls(rids, f"[{text}]")


def allowed_rows(node: Filter, namespace: str) -> tuple[str, dict[str, Any]]:
    """A query of the row keys of ``namespace``'s live revisions that pass ``node``, with its
    parameters (named ``:f_N``; ``:f_ns`` is the namespace).

    A metadata condition is answered by its index alone (``metadata_values`` holds live
    revisions only, by namespace, with the row key in the index); a filter that is all of
    several conditions is driven by its first metadata condition, the others tested on the
    rows it finds (``+`` keeps the planner from scanning the namespace's revisions instead)."""
    compiler = _SQLiteFilter()
    parts = node.parts if isinstance(node, AllOf) else (node,)
    driver = next((p for p in parts if isinstance(p, Condition) and p.field is None), None)
    if driver is None:
        where, args = compiler.compile(node)
        sql = f"SELECT r.rid FROM revisions r WHERE r.namespace = :f_ns AND r.live = 1 AND {where}"
    else:
        lookup = compiler.lookup(driver)
        rest = [compiler.node(p) for p in parts if p is not driver]
        if not rest:
            sql = lookup
        else:
            sql = (
                f"SELECT r.rid FROM revisions r WHERE r.rid IN ({lookup}) "
                f"AND +r.namespace = :f_ns AND +r.live = 1 AND {' AND '.join(rest)}"
            )
        args = compiler.args
    args["f_ns"] = namespace
    return sql, args


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
        return f"r.rid IN ({self.lookup(node)})"

    def lookup(self, node: Condition) -> str:
        """The row keys of the live revisions whose metadata passes ``node`` (a metadata
        condition), from ``metadata_values`` and its indexes alone."""
        select = "SELECT rid FROM metadata_values WHERE namespace = :f_ns AND key = "
        key = self.bind(node.key)
        if node.op == "exists":
            return f"{select}{key}"
        if node.op == "in":
            by_kind: dict[str, list[object]] = {}
            for value in node.values:
                by_kind.setdefault(_kind(value), []).append(value)
            parts = []
            for kind, values in by_kind.items():
                column = "text_value" if kind == "text" else "num_value"
                marks = ", ".join(self.bind(v) for v in values)
                parts.append(
                    f"{select}{key} AND kind = {self.bind(kind)} AND {column} IN ({marks})"
                )
            return " UNION ALL ".join(parts)
        value = node.values[0]
        kind = _kind(value)
        column = "text_value" if kind == "text" else "num_value"
        return (
            f"{select}{key} AND kind = {self.bind(kind)} AND "
            f"{column} {SQL_OPERATORS[node.op]} {self.bind(value)}"
        )
