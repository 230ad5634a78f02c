"""Filters: which memories a search or a listing may return (docs/filters.md).

A user writes a filter as a mapping, the way document stores take them (``where=`` on
``Memory.search`` and ``Memory.list``)::

    {"topic": "food"}                                   # metadata key equals a value
    {"year": {"$gte": 2020, "$lt": 2024}}               # a range (both bounds must hold)
    {"tag": {"$in": ["a", "b"]}, "draft": {"$exists": False}}
    {"$or": [{"thread": "chat-7"}, {"importance": {"$gte": 0.8}}]}

Keys name a memory's metadata keys, except the **fields** of the memory itself:
:data:`FIELDS` (``thread``, ``position``, ``derived_from``, ``created_at``, ``importance``,
``memory_id``). A metadata key that has a field's name is written ``metadata.KEY``
(``metadata.`` before any key names metadata). Keys are flat: ``"a.b"`` is the metadata key
``a.b``, not a path.

:func:`parse_where` checks a filter once, on the host, and turns it into a typed tree
(:class:`Condition`, :class:`AllOf`, :class:`AnyOf`, :class:`Not`) that every store compiles
in its own query language; keys and values stay data (bound parameters), never query text.
:func:`matches` is the reference meaning of a filter over one memory: a store's compiled
filter answers exactly what :func:`matches` answers (the conformance kit checks it).

The meaning, precisely:

- Comparisons are **typed**: a text value equals only text, a number only a number (``1`` and
  ``1.0`` are equal; ``True`` is not a number), a boolean only a boolean. A metadata value that
  is a list, an object or ``null`` equals nothing and is in no range.
- ``$eq`` (a bare value means ``$eq``), ``$in`` (any of a list of values), ``$gt``, ``$gte``,
  ``$lt``, ``$lte`` (numbers, dates or text; text compares by code point, so ISO 8601 dates
  written alike compare as dates), ``$exists`` (the key is present, whatever its value; a
  field exists when it is set).
- ``$ne`` is "not ``$eq``" and ``$nin`` "not ``$in``": a memory that lacks the key matches
  them. ``{"$exists": False}`` matches a memory that lacks the key.
- Several keys in one mapping, and several operators on one key, must all hold; ``$and`` and
  ``$or`` take a non-empty list of filters.
- ``created_at`` and ``position`` take numbers, :class:`~datetime.datetime` objects or ISO
  8601 strings (stored and compared as POSIX seconds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

import attrs

from rankseam.checks import is_real
from rankseam.errors import ValidationError
from rankseam.store.records import MAX_EXACT_POSITION, check_position

__all__ = [
    "FIELDS",
    "MAX_FILTER_NODES",
    "MAX_IN_VALUES",
    "SQL_OPERATORS",
    "AllOf",
    "AnyOf",
    "Condition",
    "Filter",
    "FilterCompiler",
    "Not",
    "check_live_filter",
    "matches",
    "parse_where",
    "scoped",
]

#: The fields of a memory a filter may name besides its metadata, with the kind of value each
#: holds (``"number"`` fields also take dates).
FIELDS: Mapping[str, str] = {
    "thread": "text",
    "position": "number",
    "derived_from": "text",
    "created_at": "number",
    "importance": "number",
    "memory_id": "text",
}
#: The operators a key may take.
OPERATORS = ("$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists")
#: The most values one ``$in`` / ``$nin`` may list.
MAX_IN_VALUES = 1000
#: The most conditions and combinators one filter may hold (a bound on the query a store runs).
MAX_FILTER_NODES = 256
#: The longest key (characters).
MAX_KEY_CHARS = 256
#: The longest text value (characters).
MAX_TEXT_CHARS = 4096

_RANGES = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}
_DATE_FIELDS = frozenset({"created_at", "position"})

Scalar = str | int | float | bool


@attrs.frozen
class Condition:
    """One test of one key: ``op`` is ``eq``, ``in``, ``gt``, ``gte``, ``lt``, ``lte`` or
    ``exists``; ``values`` holds its one value (``eq`` and the ranges), its values (``in``) or
    nothing (``exists``). ``field`` names a field of :data:`FIELDS`, or is None when ``key``
    is a metadata key."""

    field: str | None
    key: str
    op: str
    values: tuple[Scalar, ...] = ()

    @property
    def name(self) -> str:
        """The key as a filter writes it (``metadata.KEY`` for a metadata key named like a
        field)."""
        return f"metadata.{self.key}" if self.field is None and self.key in FIELDS else self.key

    def to_dict(self) -> dict[str, Any]:
        """The filter as a mapping :func:`parse_where` reads back (traces show it)."""
        if self.op == "exists":
            return {self.name: {"$exists": True}}
        if self.op == "in":
            return {self.name: {"$in": list(self.values)}}
        return {self.name: {f"${self.op}": self.values[0]}}


@attrs.frozen
class AllOf:
    """Every part holds."""

    parts: tuple[Filter, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"$and": [p.to_dict() for p in self.parts]}


@attrs.frozen
class AnyOf:
    """At least one part holds."""

    parts: tuple[Filter, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"$or": [p.to_dict() for p in self.parts]}


@attrs.frozen
class Not:
    """The condition does not hold (what ``$ne``, ``$nin`` and ``$exists: false`` become)."""

    part: Condition

    def to_dict(self) -> dict[str, Any]:
        negated = {"eq": "$ne", "in": "$nin"}
        part = self.part
        if part.op == "exists":
            return {part.name: {"$exists": False}}
        operand = list(part.values) if part.op == "in" else part.values[0]
        return {part.name: {negated[part.op]: operand}}


Filter = Condition | AllOf | AnyOf | Not


def parse_where(where: object, *, name: str = "where") -> Filter | None:
    """``where`` (a mapping, see the module docstring) checked and made a typed filter; None
    for None or an empty mapping. Any mistake is a :class:`~rankseam.errors.ValidationError`
    that names where in the filter it is and how to write it, starting from ``name`` (the
    word the caller's user wrote: ``where``, or an adapter's ``filter``)."""
    if where is None:
        return None
    parser = _Parser()
    node = parser.mapping(where, name)
    return node


def scoped(
    where: Filter | None,
    *,
    thread: object = None,
    since: object = None,
    until: object = None,
) -> Filter | None:
    """``where`` narrowed to one thread and a time window (``created_at`` from ``since``,
    inclusive, to ``until``, exclusive): the ``thread=``/``since=``/``until=`` arguments of a
    search or a listing."""
    parts: list[Filter] = [] if where is None else [where]
    if thread is not None:
        parts.append(Condition("thread", "thread", "eq", (_text(thread, "thread"),)))
    if since is not None:
        parts.append(Condition("created_at", "created_at", "gte", (_date(since, "since"),)))
    if until is not None:
        parts.append(Condition("created_at", "created_at", "lt", (_date(until, "until"),)))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def check_live_filter(include_deleted: bool) -> None:
    """Refuse a filter on a listing that includes deleted memories: filters select among live
    memories (a deleted memory's values are no longer indexed by every store)."""
    if include_deleted:
        raise ValidationError(
            "where= filters live memories; list deleted memories without a filter "
            "(include_deleted=True) or filter the live ones (include_deleted=False)"
        )


# -- compiling ---------------------------------------------------------------------------------


class FilterCompiler:
    """The one walk of a filter into a store's SQL: ``$and``, ``$or`` and negations become
    ``AND``, ``OR`` and ``NOT`` of the parts, each condition what :meth:`field` (a field of the
    memory: a column) or :meth:`metadata` (a metadata key) answers in the store's dialect,
    every key and value a bound parameter (:meth:`bind`). A store subclasses it with those
    two methods and its driver's :attr:`placeholder`; each expression it answers must never
    be NULL, and must mean what :func:`matches` means.

    :meth:`compile` answers the expression and its parameters (named ``f_0``, ``f_1``, ...).
    """

    #: How the driver writes a named parameter (``{}`` is its name): ``:{}`` for sqlite3,
    #: ``%({})s`` for psycopg.
    placeholder: ClassVar[str] = ":{}"

    def __init__(self) -> None:
        self.args: dict[str, Any] = {}

    def compile(self, node: Filter) -> tuple[str, dict[str, Any]]:
        return self.node(node), self.args

    def bind(self, value: object) -> str:
        """Add ``value`` as a parameter; its placeholder."""
        name = f"f_{len(self.args)}"
        self.args[name] = value
        return self.placeholder.format(name)

    def node(self, node: Filter) -> str:
        if isinstance(node, AllOf):
            return "(" + " AND ".join(self.node(p) for p in node.parts) + ")"
        if isinstance(node, AnyOf):
            return "(" + " OR ".join(self.node(p) for p in node.parts) + ")"
        if isinstance(node, Not):
            return f"(NOT {self.node(node.part)})"
        return self.field(node) if node.field is not None else self.metadata(node)

    def field(self, condition: Condition) -> str:
        """A condition on one of the memory's :data:`FIELDS`."""
        raise NotImplementedError

    def metadata(self, condition: Condition) -> str:
        """A condition on a metadata key."""
        raise NotImplementedError


#: The SQL comparison of each ordered operator.
SQL_OPERATORS: Mapping[str, str] = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


# -- the reference meaning -------------------------------------------------------------------


def matches(node: Filter | None, metadata: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    """Whether a memory with ``metadata`` and ``fields`` (each field of :data:`FIELDS` by name,
    None when unset) passes ``node``: the meaning every store's compiled filter must have."""
    if node is None:
        return True
    if isinstance(node, AllOf):
        return all(matches(p, metadata, fields) for p in node.parts)
    if isinstance(node, AnyOf):
        return any(matches(p, metadata, fields) for p in node.parts)
    if isinstance(node, Not):
        return not matches(node.part, metadata, fields)
    value: Any
    if node.field is not None:
        value = fields.get(node.field)
        present = value is not None
    else:
        value = metadata.get(node.key)
        present = node.key in metadata
    if node.op == "exists":
        return present
    if not present:
        return False
    kind = _kind(value)
    if kind is None:
        return False
    if node.op == "eq":
        return _kind(node.values[0]) == kind and value == node.values[0]
    if node.op == "in":
        return any(_kind(v) == kind and value == v for v in node.values)
    bound: Any = node.values[0]
    if _kind(bound) != kind or kind == "bool":
        return False
    if node.op == "gt":
        return bool(value > bound)
    if node.op == "gte":
        return bool(value >= bound)
    if node.op == "lt":
        return bool(value < bound)
    return bool(value <= bound)


def _kind(value: object) -> str | None:
    """``"text"``, ``"number"`` or ``"bool"`` for a scalar a filter compares; None otherwise."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "text"
    if isinstance(value, int | float):
        return "number"
    return None


# -- parsing ---------------------------------------------------------------------------------


class _Parser:
    def __init__(self) -> None:
        self.nodes = 0

    def _count(self, where: str) -> None:
        self.nodes += 1
        if self.nodes > MAX_FILTER_NODES:
            raise ValidationError(
                f"{where}: the filter has more than {MAX_FILTER_NODES} conditions; "
                "write a smaller one (for many values of one key use $in)"
            )

    def mapping(self, value: object, where: str) -> Filter | None:
        if not isinstance(value, Mapping):
            raise ValidationError(
                f"{where} must be a mapping such as {{'topic': 'food'}} or "
                f"{{'year': {{'$gte': 2020}}}}, got {type(value).__name__}"
            )
        parts: list[Filter] = []
        for key, spec in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{where}: keys must be strings, got {key!r}")
            at = f"{where}[{key!r}]"
            if key in ("$and", "$or"):
                parts.append(self.combination(key, spec, at))
            elif key.startswith("$"):
                raise ValidationError(
                    f"{at}: unknown combinator {key!r}; a filter combines with '$and' or '$or' "
                    f"(operators such as {', '.join(OPERATORS)} go inside a key's mapping)"
                )
            else:
                parts.append(self.key(key, spec, at))
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else AllOf(tuple(parts))

    def combination(self, name: str, spec: object, where: str) -> Filter:
        self._count(where)
        if isinstance(spec, str | bytes) or not isinstance(spec, Sequence) or not spec:
            raise ValidationError(f"{where}: {name} takes a non-empty list of filters")
        parts = []
        for i, item in enumerate(spec):
            part = self.mapping(item, f"{where}[{i}]")
            if part is None:
                raise ValidationError(f"{where}[{i}]: an empty filter inside {name}")
            parts.append(part)
        return AllOf(tuple(parts)) if name == "$and" else AnyOf(tuple(parts))

    def key(self, key: str, spec: object, where: str) -> Filter:
        if not key or len(key) > MAX_KEY_CHARS:
            raise ValidationError(f"{where}: a key has 1 to {MAX_KEY_CHARS} characters")
        field: str | None = key if key in FIELDS else None
        name = key
        if key.startswith("metadata."):
            name = key.removeprefix("metadata.")
            if not name:
                raise ValidationError(f"{where}: 'metadata.' must be followed by a key")
        if not isinstance(spec, Mapping):
            return self.condition(field, name, "$eq", spec, where)
        if not spec:
            raise ValidationError(f"{where}: an empty mapping tests nothing; give an operator")
        parts = [
            self.condition(field, name, op, operand, f"{where}[{op!r}]")
            for op, operand in spec.items()
        ]
        return parts[0] if len(parts) == 1 else AllOf(tuple(parts))

    def condition(
        self, field: str | None, key: str, op: object, operand: object, where: str
    ) -> Filter:
        self._count(where)
        if op not in OPERATORS:
            raise ValidationError(
                f"{where}: unknown operator {op!r}; use one of {', '.join(OPERATORS)}"
            )
        if op == "$exists":
            if not isinstance(operand, bool):
                raise ValidationError(f"{where}: $exists takes true or false, got {operand!r}")
            found = Condition(field, key, "exists")
            return found if operand else Not(found)
        if op in ("$in", "$nin"):
            if isinstance(operand, str | bytes) or not isinstance(operand, Sequence):
                raise ValidationError(f"{where}: {op} takes a list of values, got {operand!r}")
            if not operand or len(operand) > MAX_IN_VALUES:
                raise ValidationError(f"{where}: {op} takes 1 to {MAX_IN_VALUES} values")
            values = tuple(
                self.value(field, v, f"{where}[{i}]", ranged=False) for i, v in enumerate(operand)
            )
            found = Condition(field, key, "in", values)
            return found if op == "$in" else Not(found)
        ranged = op in _RANGES
        value = self.value(field, operand, where, ranged=ranged)
        if op == "$ne":
            return Not(Condition(field, key, "eq", (value,)))
        return Condition(field, key, _RANGES.get(str(op), "eq"), (value,))

    def value(self, field: str | None, value: object, where: str, *, ranged: bool) -> Scalar:
        kind = None if field is None else FIELDS[field]
        if field in _DATE_FIELDS and isinstance(value, datetime | str):
            return _date(value, where)
        if isinstance(value, bool):
            if kind is not None:
                raise ValidationError(f"{where}: {field} holds {kind}, not booleans")
            if ranged:
                raise ValidationError(f"{where}: ranges compare numbers, dates or text")
            return value
        if isinstance(value, int | float):
            if not is_real(value) or not math.isfinite(float(value)):
                raise ValidationError(f"{where}: numbers must be finite, got {value!r}")
            if isinstance(value, int) and abs(value) > MAX_EXACT_POSITION:
                raise ValidationError(
                    f"{where}: stores compare numbers as 64-bit floats; an integer beyond "
                    f"±2**53 cannot be compared exactly, got {value!r}"
                )
            if kind == "text":
                raise ValidationError(f"{where}: {field} holds text, got the number {value!r}")
            return value
        if isinstance(value, str):
            if kind == "number":
                raise ValidationError(
                    f"{where}: {field} holds numbers, got {value!r}"
                    + ("" if field not in _DATE_FIELDS else " (dates: ISO 8601 or datetime)")
                )
            if len(value) > MAX_TEXT_CHARS or "\x00" in value:
                raise ValidationError(
                    f"{where}: text values have at most {MAX_TEXT_CHARS} characters and no NUL"
                )
            return value
        if value is None:
            raise ValidationError(
                f"{where}: None matches nothing; to test whether a key is set use "
                "{'$exists': True} or {'$exists': False}"
            )
        raise ValidationError(
            f"{where}: values are text, numbers or booleans, got {type(value).__name__}"
        )


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT_CHARS:
        raise ValidationError(f"{where} must be a non-empty string, got {value!r}")
    return value


def _date(value: object, where: str) -> float:
    """POSIX seconds of a number, a datetime or an ISO 8601 string (naive ones are local
    time, as :meth:`datetime.timestamp` reads them), as a memory's position is kept."""
    try:
        seconds = check_position(value)
    except ValidationError:
        seconds = None
    if seconds is None:
        raise ValidationError(
            f"{where}: expected a date (an ISO 8601 string such as '2026-12-07' or "
            f"'2026-12-07T15:00:00+00:00', a datetime, or POSIX seconds), got {value!r}"
        )
    return seconds
