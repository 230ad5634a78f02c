"""LlamaIndex's ``MetadataFilters`` as rankseam's ``where`` (rankseam docs/filters.md).

Every filter LlamaIndex writes maps onto rankseam's filter grammar where it has the same
meaning, and is refused, naming its place and operator, where it has none: a filter is never
dropped or loosened.

=======================  =============================================================
LlamaIndex               rankseam ``where``
=======================  =============================================================
``==``, ``!=``           ``{"key": {"$eq": v}}``, ``{"key": {"$ne": v}}`` (``!=`` keeps a
                         memory without the key, as LlamaIndex's own stores do)
``>`` ``>=`` ``<`` ``<=``  ``$gt``, ``$gte``, ``$lt``, ``$lte``
``in``, ``nin``          ``$in``, ``$nin`` (a list of values)
``is_empty``             ``{"key": {"$exists": False}}``: the memory has no such key
                         (rankseam tests presence: a stored ``null``, ``""`` or ``[]`` is a
                         value, and is not empty to it)
``AND``, ``OR``          ``$and``, ``$or`` (nested ``MetadataFilters`` nest)
``NOT``                  none of the filters holds: the negation of each (``==`` and
                         ``!=``, ``in`` and ``nin``, ``is_empty`` and exists swap; a nested
                         group by De Morgan's laws), all of them
=======================  =============================================================

Refused: ``any``, ``all``, ``contains`` (they test the elements of a list value, which
rankseam's filters do not look into), ``text_match`` and ``text_match_insensitive`` (substring
tests), any operator a later LlamaIndex adds, and ``NOT`` over a range (the opposite of
``> 5`` is not ``<= 5`` where a memory lacks the key or holds text: write the range you mean).

Keys are the node metadata keys the retriever writes: a stored metadata key, or the
memory's fields ``thread``, ``position``, ``derived_from``, ``memory_id`` (and
``created_at``, ``importance``); values are checked as rankseam checks them (typed:
``1`` is not ``"1"``).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

from rankseam.errors import ValidationError
from rankseam.plugin.adapters import check_filter

__all__ = ["SUPPORTED_OPERATORS", "where_from_filters"]

#: LlamaIndex's operators and rankseam's for each.
_OPERATORS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}
#: The opposite of each operator a ``NOT`` may negate exactly.
_NEGATED = {"$eq": "$ne", "$ne": "$eq", "$in": "$nin", "$nin": "$in"}
#: The LlamaIndex operators a filter may use.
SUPPORTED_OPERATORS = (*(op.value for op in _OPERATORS), FilterOperator.IS_EMPTY.value)
#: Why an operator has no exact meaning in rankseam's grammar.
_WHY = {
    FilterOperator.ANY: "tests the elements of a list value",
    FilterOperator.ALL: "tests the elements of a list value",
    FilterOperator.CONTAINS: "tests the elements of a list value",
    FilterOperator.TEXT_MATCH: "tests for a substring",
    FilterOperator.TEXT_MATCH_INSENSITIVE: "tests for a substring",
}


def where_from_filters(
    filters: MetadataFilters | None, name: str = "filters"
) -> dict[str, Any] | None:
    """``filters`` as a rankseam ``where`` mapping (None for None or no filters). A filter
    with no exact meaning in rankseam's grammar, or a value rankseam refuses, is a
    :class:`rankseam.ValidationError` naming its place (``filters.filters[1]``), its key and
    its operator."""
    if filters is None:
        return None
    if not isinstance(filters, MetadataFilters):
        raise ValidationError(
            f"{name} must be LlamaIndex's MetadataFilters, got {type(filters).__name__}; a "
            "rankseam filter mapping such as {'user': 'dana'} goes in where="
        )
    if not filters.filters:
        return None  # no filters: every memory, as LlamaIndex reads it
    return _group(filters, name, negate=False)


def _group(filters: MetadataFilters, at: str, *, negate: bool) -> dict[str, Any]:
    """The group, or (``negate``) its negation. AND holds when all its filters hold, OR when
    one does, NOT when none does (all of their negations hold); a group's negation is, by De
    Morgan's laws, the other combination of its filters' negations."""
    condition = FilterCondition(filters.condition or FilterCondition.AND)
    if not filters.filters:
        raise ValidationError(f"{at}: an empty MetadataFilters inside a filter; leave it out")
    negated = negate != (condition == FilterCondition.NOT)  # whether each filter is negated
    every = negate if condition == FilterCondition.OR else not negate  # $and, else $or
    parts = []
    for i, item in enumerate(filters.filters):
        where = f"{at}.filters[{i}]"
        if isinstance(item, MetadataFilters):
            parts.append(_group(item, where, negate=negated))
        elif isinstance(item, MetadataFilter):
            parts.append(_leaf(item, where, negate=negated))
        else:
            raise ValidationError(
                f"{where}: expected a MetadataFilter or MetadataFilters, got {type(item).__name__}"
            )
    if len(parts) == 1:
        return parts[0]
    return {"$and" if every else "$or": parts}


def _leaf(item: MetadataFilter, at: str, *, negate: bool) -> dict[str, Any]:
    key, value = item.key, item.value
    operator = FilterOperator(item.operator)
    if operator == FilterOperator.IS_EMPTY:
        if value is not None:
            raise ValidationError(
                f"{at} (key {key!r}, operator 'is_empty'): is_empty takes no value (value=None), "
                f"got {value!r}"
            )
        return _checked({key: {"$exists": negate}}, at)
    ours = _OPERATORS.get(operator)
    if ours is None:
        why = _WHY.get(operator, "has no meaning rankseam knows")
        raise ValidationError(
            f"{at} (key {key!r}): the operator {operator.value!r} {why}, which rankseam's "
            f"filters cannot do exactly; use one of {', '.join(SUPPORTED_OPERATORS)}"
        )
    if negate:
        opposite = _NEGATED.get(ours)
        if opposite is None:
            raise ValidationError(
                f"{at} (key {key!r}): NOT over the operator {operator.value!r} has no exact "
                "meaning (a memory without the key, or with a value of another type, holds "
                "neither the range nor its opposite); write the opposite range itself"
            )
        ours = opposite
    return _checked({key: {ours: value}}, at)


def _checked(where: dict[str, Any], at: str) -> dict[str, Any]:
    """``where`` checked as rankseam checks a filter, a mistake named from ``at``."""
    check_filter(where, at)
    return where
