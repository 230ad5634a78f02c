"""The filter arguments of ``memory_search`` and ``memory_list`` (rankseam's docs/filters.md):
``where`` (an object), ``thread``, ``since`` and ``until`` (strings) and, on search,
``min_score`` (a number). Their schemas are strict like every other argument's (a string
``"{}"`` is not an object, ``"0.5"`` not a number); what a filter says is checked by the host,
whose error names the place of a mistake in it (``where['year']['$gte']: ...``) and becomes
the tool's error.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

__all__ = ["FILTERING", "MinScore", "Since", "ThreadScope", "Until", "Where", "scope"]

#: What a tool description says about filtering.
FILTERING = (
    "Narrow it with `where`, a filter object over the memories' metadata keys and their fields "
    "thread, position, derived_from, created_at, importance and memory_id: a key's value for "
    "equality, or its operators $eq $ne $in $nin $gt $gte $lt $lte $exists, combined with $and "
    "/ $or (the argument's description shows the form); `thread` keeps one conversation's "
    "memories; `since` / `until` (ISO 8601 dates) keep those stored at or after / before."
)

Where = Annotated[
    dict[str, Any] | None,
    Field(
        description=(
            'A filter object, e.g. {"user": "dana"} (equals), {"year": {"$gte": 2025}}, '
            '{"tag": {"$in": ["a", "b"]}}, {"draft": {"$exists": false}}, '
            '{"$or": [{"user": "dana"}, {"thread": "chat-7"}]}. Operators: $eq, $ne, $in, '
            "$nin, $gt, $gte, $lt, $lte, $exists; combine with $and / $or. Keys are metadata "
            "keys or the fields thread, position, derived_from, created_at, importance, "
            "memory_id (metadata.KEY for a metadata key named like a field)."
        )
    ),
]
ThreadScope = Annotated[
    str | None,
    Field(min_length=1, description="Only the memories of this thread (a conversation's id)."),
]
Since = Annotated[
    str | None,
    Field(
        min_length=1,
        description="Only memories stored at or after this date (ISO 8601, e.g. 2026-12-01).",
    ),
]
Until = Annotated[
    str | None,
    Field(min_length=1, description="Only memories stored before this date (ISO 8601)."),
]
MinScore = Annotated[
    float | None,
    Field(
        description=(
            "Leave out hits whose score is below it (the hit's `score`, 0..1 with the default "
            "fusion)."
        )
    ),
]


def scope(
    where: dict[str, Any] | None, thread: str | None, since: str | None, until: str | None
) -> dict[str, Any]:
    """The keyword arguments of ``Memory.list`` for a call's filter arguments (those given)."""
    given = {"where": where, "thread": thread, "since": since, "until": until}
    return {name: value for name, value in given.items() if value is not None}
