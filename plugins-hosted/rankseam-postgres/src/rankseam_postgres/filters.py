"""Filters (``rankseam.plugin.stores.Filter``, docs/filters.md) compiled into PostgreSQL: a
boolean expression over the revisions table ``r`` with psycopg's named parameters (keys and
values are always bound, never written into the SQL).

Metadata is stored as JSON text and indexed as ``jsonb`` (the GIN index ``revisions_metadata``
over ``metadata::jsonb`` of live revisions): equality and membership are containment
(``@>``), existence is ``?``, both answered by that index; ranges read the value and compare
it when its JSON type is the filter value's. The expression means exactly what
``rankseam.plugin.stores.matches`` means, as the embedded store's does (the conformance kit
compares both with it): typed comparisons (``1`` and ``1.0`` equal, ``true`` is no number,
a list equals nothing), text compared by code point (``COLLATE "C"``), a negation holds where
the key is absent, and no expression is ever NULL.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rankseam.plugin.stores import FIELDS, SQL_OPERATORS, Condition, Filter, FilterCompiler

__all__ = ["compile_where"]

#: The column of ``r`` that holds each field a filter may name (every name of ``FIELDS``).
FIELD_COLUMNS: Mapping[str, str] = {name: f"r.{name}" for name in FIELDS}

_JSON_TYPE = {"text": "string", "number": "number"}
#: The jsonb expression the GIN index covers (the planner matches it textually).
_DOC = "(r.metadata::jsonb)"


def compile_where(node: Filter) -> tuple[str, dict[str, Any]]:
    """``node`` as a boolean SQL expression over ``revisions r`` and its named parameters
    (``%(f_N)s``)."""
    return _PostgresFilter().compile(node)


class _PostgresFilter(FilterCompiler):
    placeholder = "%({})s"

    def field(self, node: Condition) -> str:
        column = FIELD_COLUMNS[node.field or ""]
        if node.op == "exists":
            return f"({column} IS NOT NULL)"
        text = FIELDS[node.field or ""] == "text"
        collate = ' COLLATE "C"' if text else ""
        if node.op == "in":
            marks = ", ".join(self.bind(v) for v in node.values)
            return f"({column} IS NOT NULL AND {column}{collate} IN ({marks}))"
        value = self.bind(node.values[0])
        return f"({column} IS NOT NULL AND {column}{collate} {SQL_OPERATORS[node.op]} {value})"

    def metadata(self, node: Condition) -> str:
        if node.op == "exists":
            return f"({_DOC} ? {self.bind(node.key)})"
        if node.op in ("eq", "in"):
            # containment: {"key": value} at the top level, typed as JSON types are
            parts = [
                f"({_DOC} @> {self.bind(json.dumps({node.key: v}))}::jsonb)" for v in node.values
            ]
            return "(" + " OR ".join(parts) + ")"
        value = node.values[0]
        kind = "text" if isinstance(value, str) else "number"
        key = self.bind(node.key)
        read = f"({_DOC} ->> {key})"
        if kind == "text":
            read = f'{read} COLLATE "C"'
        else:
            read = f"({read})::double precision"
        return (
            f"COALESCE(CASE WHEN jsonb_typeof({_DOC} -> {key}) = '{_JSON_TYPE[kind]}' "
            f"THEN {read} {SQL_OPERATORS[node.op]} {self.bind(value)} END, false)"
        )
