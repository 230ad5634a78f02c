"""Haystack's filters as rankseam's ``where`` (rankseam docs/filters.md).

Haystack 2/3 writes a filter as a tree: a comparison ``{"field": "meta.year", "operator": ">=",
"value": 2020}`` or a group ``{"operator": "AND" | "OR" | "NOT", "conditions": [...]}``. Each
maps onto rankseam's filter grammar with Haystack's meaning (its in-memory store's, the
reference), and a filter that has none there is a :class:`FilterError` naming its place: a
filter is never dropped or loosened.

================================  ===========================================================
Haystack                          rankseam ``where``
================================  ===========================================================
``meta.KEY``, a bare ``KEY``      the metadata key ``KEY`` (written ``metadata.KEY``)
``id``                            the field ``memory_id`` (a document's id is its memory id)
``==``, ``!=``                    ``$eq``, ``$ne`` (``!=`` keeps a document without the key,
                                  as Haystack does)
``== None``, ``!= None``          the key is absent / present (a ``None`` meta value is kept
                                  as absent, so this is exact)
``>`` ``>=`` ``<`` ``<=``         ``$gt`` ``$gte`` ``$lt`` ``$lte`` on numbers, or on ISO 8601
                                  strings (compared as text: write dates alike); ``None``
                                  matches nothing, as in Haystack
``in``, ``not in``                ``$in``, ``$nin`` (a list; ``None`` in it means absent)
``AND``, ``OR``                   ``$and``, ``$or`` (nested groups nest)
``NOT``                           not all of its conditions: the negation of each, by De
                                  Morgan's laws (``==``/``!=`` and ``in``/``not in`` swap; a
                                  range's negation is the opposite range or the key absent)
================================  ===========================================================

Refused, each with the reason: the fields ``content`` (rankseam's filters do not look into the
text: search it with :class:`~rankseam_haystack.RankseamRetriever`), ``embedding``,
``sparse_embedding``, ``blob`` and ``score``; a nested path ``meta.a.b`` (rankseam's keys are
flat); ``==``/``!=`` against a list or a dict (rankseam compares single values); a range over
text that is not an ISO 8601 date, or over a list; ``in``/``not in`` without a list; an
unknown operator; a malformed filter (a key missing); and a value rankseam refuses
(``ValidationError``), re-raised as :class:`FilterError` with the filter's place.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from haystack.errors import FilterError as HaystackFilterError

from rankseam.errors import ValidationError
from rankseam.plugin.adapters import check_filter

__all__ = ["COMPARISONS", "LOGICAL", "FilterError", "where_from_filters"]

#: The comparison operators Haystack's filters use (all are supported).
COMPARISONS = ("==", "!=", ">", ">=", "<", "<=", "in", "not in")
#: The logical operators of a group.
LOGICAL = ("AND", "OR", "NOT")

#: The metadata key that holds what a Haystack document has beyond text and meta (see
#: rankseam_haystack.documents); a filter may not name it.
RESERVED_KEY = "_haystack"

_RANGES = {">": "$gt", ">=": "$gte", "<": "$lt", "<=": "$lte"}
#: The opposite of each range (its negation where the key is present).
_OPPOSITE = {"$gt": "$lte", "$gte": "$lt", "$lt": "$gte", "$lte": "$gt"}
#: A filter every memory passes, and one no memory passes (a memory always has an id).
TRUE: dict[str, Any] = {"memory_id": {"$exists": True}}
FALSE: dict[str, Any] = {"memory_id": {"$exists": False}}
#: Document fields that are not filterable here, with the reason.
_NOT_FILTERABLE = {
    "content": "rankseam's filters do not look into the text; search it with "
    "RankseamRetriever (its query), or filter on meta",
    "embedding": "an embedding is not a filterable value",
    "sparse_embedding": "a sparse embedding is not a filterable value",
    "blob": "rankseam does not store blobs",
    "score": "a score belongs to a query's answer, not to the stored document",
    "meta": "name a key: meta.KEY",
}


class FilterError(HaystackFilterError, ValidationError):
    """A Haystack filter rankseam cannot apply exactly, or a malformed one: Haystack's
    ``FilterError`` (what Haystack code catches) and rankseam's ``ValidationError``."""


def where_from_filters(
    filters: Mapping[str, Any] | None, name: str = "filters"
) -> dict[str, Any] | None:
    """``filters`` (Haystack's syntax) as a rankseam ``where`` mapping; ``None`` for ``None``
    or ``{}`` (every document). Anything rankseam cannot apply with Haystack's meaning is a
    :class:`FilterError` naming its place (``filters['conditions'][1]``)."""
    if filters is None:
        return None
    if not isinstance(filters, Mapping):
        raise FilterError(
            f"{name} must be a mapping in Haystack's filter syntax, got {type(filters).__name__}"
        )
    if not filters:
        return None
    where = _node(filters, name, negate=False)
    try:
        check_filter(where, name)
    except ValidationError as exc:
        raise FilterError(f"{name}: rankseam refuses the filter it maps to: {exc}") from None
    return where


def _node(node: Any, at: str, *, negate: bool) -> dict[str, Any]:
    if not isinstance(node, Mapping):
        raise FilterError(f"{at}: a condition must be a mapping, got {type(node).__name__}")
    if "field" in node:
        return _comparison(node, at, negate=negate)
    return _group(node, at, negate=negate)


def _group(node: Mapping[str, Any], at: str, *, negate: bool) -> dict[str, Any]:
    """A group, or (``negate``) its negation. NOT holds when not all of its conditions hold:
    the OR of their negations; a negated AND is the OR of the negations, a negated OR the AND
    of them, a negated NOT the AND of the conditions."""
    if "operator" not in node:
        raise FilterError(f"{at}: 'operator' key missing in a group (one of {', '.join(LOGICAL)})")
    if "conditions" not in node:
        raise FilterError(f"{at}: 'conditions' key missing in a group")
    operator, conditions = node["operator"], node["conditions"]
    if operator not in LOGICAL:
        raise FilterError(
            f"{at}: unknown logical operator {operator!r}; use one of {', '.join(LOGICAL)} "
            "(a comparison needs a 'field')"
        )
    if not isinstance(conditions, list):
        raise FilterError(f"{at}['conditions'] must be a list, got {type(conditions).__name__}")
    inner = negate != (operator == "NOT")  # whether each condition is negated
    every = (operator == "AND") != negate  # $and, else $or (a NOT is an OR of negations)
    parts = [
        _node(condition, f"{at}['conditions'][{i}]", negate=inner)
        for i, condition in enumerate(conditions)
    ]
    if not parts:
        return TRUE if every else FALSE  # all([]) holds, any([]) does not
    if len(parts) == 1:
        return parts[0]
    return {"$and" if every else "$or": parts}


def _key(field: Any, at: str) -> str:
    if not isinstance(field, str) or not field:
        raise FilterError(f"{at}['field'] must be a non-empty string, got {field!r}")
    if field == "id":
        return "memory_id"
    if field in _NOT_FILTERABLE:
        raise FilterError(f"{at}: the field {field!r} cannot be filtered: {_NOT_FILTERABLE[field]}")
    if field.startswith("meta."):
        key = field[len("meta.") :]
    elif "." not in field:
        key = field  # a legacy filter: a bare name is a meta key, as Haystack reads it
    else:
        raise FilterError(f"{at}: unknown field {field!r}; name a meta key as meta.KEY, or 'id'")
    if not key or "." in key:
        raise FilterError(
            f"{at}: {field!r} is a path into nested meta, which rankseam's filters do not "
            "follow (its keys are flat); store the value under a top-level meta key"
        )
    if key == RESERVED_KEY:
        raise FilterError(f"{at}: the meta key {RESERVED_KEY!r} is reserved by rankseam-haystack")
    return f"metadata.{key}"


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _comparison(node: Mapping[str, Any], at: str, *, negate: bool) -> dict[str, Any]:
    if "operator" not in node:
        raise FilterError(f"{at}: 'operator' key missing in a comparison")
    if "value" not in node:
        raise FilterError(f"{at}: 'value' key missing in a comparison")
    key = _key(node["field"], at)
    operator, value = node["operator"], node["value"]
    where = f"{at} (field {node['field']!r}, operator {operator!r})"
    if operator in ("==", "!="):
        equal = (operator == "==") != negate
        if value is None:
            return {key: {"$exists": not equal}}
        if isinstance(value, datetime):
            value = value.isoformat()
        if not _is_scalar(value):
            raise FilterError(
                f"{where}: compares a whole {type(value).__name__}; rankseam compares text, "
                "numbers and booleans only"
            )
        return {key: {"$eq" if equal else "$ne": value}}
    if operator in _RANGES:
        return _range(key, _RANGES[operator], value, where, negate=negate)
    if operator in ("in", "not in"):
        if not isinstance(value, list):
            raise FilterError(f"{where}: the value must be a list, got {type(value).__name__}")
        inside = (operator == "in") != negate
        absent = None in value  # None in the list: a document without the key
        values = [v.isoformat() if isinstance(v, datetime) else v for v in value if v is not None]
        for v in values:
            if not _is_scalar(v):
                raise FilterError(
                    f"{where}: a list value holds a {type(v).__name__}; rankseam compares text, "
                    "numbers and booleans only"
                )
        parts: list[dict[str, Any]]
        if inside:
            parts = [{key: {"$in": values}}] if values else []
            if absent:
                parts.append({key: {"$exists": False}})
            return parts[0] if len(parts) == 1 else ({"$or": parts} if parts else FALSE)
        parts = [{key: {"$nin": values}}] if values else []
        if absent:
            parts.append({key: {"$exists": True}})
        return parts[0] if len(parts) == 1 else ({"$and": parts} if parts else TRUE)
    raise FilterError(
        f"{at}: unknown comparison operator {operator!r}; use one of {', '.join(COMPARISONS)}"
    )


def _range(key: str, ours: str, value: Any, where: str, *, negate: bool) -> dict[str, Any]:
    """``key OP value``, or (``negate``) its negation: the opposite range, or the key absent
    (Haystack's range is false where the document has no value)."""
    if value is None:
        return TRUE if negate else FALSE  # Haystack: a range against None holds for nothing
    if isinstance(value, datetime):
        value = value.isoformat()
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise FilterError(
                f"{where}: ranges compare numbers or ISO 8601 dates, got the text {value!r}"
            ) from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise FilterError(
            f"{where}: ranges compare numbers or ISO 8601 dates, got a {type(value).__name__}"
        )
    if not negate:
        return {key: {ours: value}}
    return {"$or": [{key: {_OPPOSITE[ours]: value}}, {key: {"$exists": False}}]}
