"""The filter grammar (docs/filters.md): what a filter mapping means, what is refused and how,
and that a parsed filter reads back from the mapping it shows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankseam.errors import ValidationError
from rankseam.store.filters import (
    MAX_FILTER_NODES,
    MAX_IN_VALUES,
    AllOf,
    AnyOf,
    Condition,
    Not,
    matches,
    parse_where,
    scoped,
)
from rankseam.testing.filters import filters as where_filters
from rankseam.testing.filters import metadata_values, thread_names

NO_FIELDS: dict[str, Any] = {}


def test_a_bare_value_is_equality_and_several_keys_all_hold() -> None:
    assert parse_where({"topic": "food"}) == Condition(None, "topic", "eq", ("food",))
    both = parse_where({"topic": "food", "year": {"$gte": 2020, "$lt": 2024}})
    assert both == AllOf(
        (
            Condition(None, "topic", "eq", ("food",)),
            AllOf(
                (
                    Condition(None, "year", "gte", (2020,)),
                    Condition(None, "year", "lt", (2024,)),
                )
            ),
        )
    )
    assert parse_where(None) is None
    assert parse_where({}) is None


def test_negations_and_combinators() -> None:
    assert parse_where({"a": {"$ne": 1}}) == Not(Condition(None, "a", "eq", (1,)))
    assert parse_where({"a": {"$nin": [1, 2]}}) == Not(Condition(None, "a", "in", (1, 2)))
    assert parse_where({"a": {"$exists": False}}) == Not(Condition(None, "a", "exists"))
    assert parse_where({"$or": [{"a": 1}, {"b": 2}]}) == AnyOf(
        (Condition(None, "a", "eq", (1,)), Condition(None, "b", "eq", (2,)))
    )


def test_fields_and_metadata_keys_named_like_fields() -> None:
    assert parse_where({"thread": "t1"}) == Condition("thread", "thread", "eq", ("t1",))
    assert parse_where({"metadata.thread": "t1"}) == Condition(None, "thread", "eq", ("t1",))
    assert parse_where({"metadata.topic": 1}) == Condition(None, "topic", "eq", (1,))
    # a flat key with a dot is a key, not a path
    assert parse_where({"a.b": 1}) == Condition(None, "a.b", "eq", (1,))


def test_dates_on_created_at_and_position() -> None:
    when = datetime(2026, 12, 7, 15, 0, tzinfo=UTC)
    expected = Condition("created_at", "created_at", "gte", (when.timestamp(),))
    assert parse_where({"created_at": {"$gte": when}}) == expected
    assert parse_where({"created_at": {"$gte": "2026-12-07T15:00:00+00:00"}}) == expected
    assert parse_where({"position": {"$lt": 3}}) == Condition("position", "position", "lt", (3,))
    # text on metadata is text, even when it looks like a date
    assert parse_where({"day": {"$gte": "2026-12-07"}}) == Condition(
        None, "day", "gte", ("2026-12-07",)
    )


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("topic=food", "where must be a mapping"),
        ({"a": {"$regex": "x"}}, "unknown operator '\\$regex'"),
        ({"$nor": [{"a": 1}]}, "unknown combinator '\\$nor'"),
        ({"$or": []}, "\\$or takes a non-empty list"),
        ({"$and": "a"}, "\\$and takes a non-empty list"),
        ({"$or": [{}]}, "an empty filter inside \\$or"),
        ({"a": None}, "None matches nothing"),
        ({"a": {}}, "an empty mapping tests nothing"),
        ({"a": {"$in": "abc"}}, "\\$in takes a list of values"),
        ({"a": {"$in": []}}, f"\\$in takes 1 to {MAX_IN_VALUES} values"),
        ({"a": {"$in": list(range(MAX_IN_VALUES + 1))}}, "takes 1 to"),
        ({"a": {"$exists": "yes"}}, "\\$exists takes true or false"),
        ({"a": {"$gt": True}}, "ranges compare numbers, dates or text"),
        ({"a": [1, 2]}, "values are text, numbers or booleans, got list"),
        ({"a": float("nan")}, "numbers must be finite"),
        ({"thread": 7}, "thread holds text, got the number 7"),
        ({"thread": True}, "thread holds text, not booleans"),
        ({"importance": "high"}, "importance holds numbers"),
        ({"created_at": {"$gte": "yesterday"}}, "expected a date .* got 'yesterday'"),
        ({"n": 2**60}, "an integer beyond"),
        ({"": 1}, "a key has 1 to"),
        ({"metadata.": 1}, "'metadata.' must be followed by a key"),
        ({1: 1}, "keys must be strings"),
        ({"a": "x\x00"}, "no NUL"),
    ],
)
def test_a_bad_filter_is_refused_naming_where(where: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_where(where)


def test_the_error_names_the_place_in_the_filter() -> None:
    with pytest.raises(ValidationError, match=r"where\['\$or'\]\[1\]\['year'\]\['\$gte'\]"):
        parse_where({"$or": [{"a": 1}, {"year": {"$gte": [2020]}}]})


def test_a_filter_is_bounded() -> None:
    big = {"$and": [{f"k{i}": i} for i in range(MAX_FILTER_NODES + 1)]}
    with pytest.raises(ValidationError, match=f"more than {MAX_FILTER_NODES} conditions"):
        parse_where(big)


def test_comparisons_are_typed() -> None:
    meta = {"n": 1, "s": "1", "b": True, "l": [1], "z": None}
    assert matches(parse_where({"n": 1.0}), meta, NO_FIELDS)
    assert not matches(parse_where({"n": "1"}), meta, NO_FIELDS)
    assert not matches(parse_where({"s": 1}), meta, NO_FIELDS)
    assert not matches(parse_where({"b": 1}), meta, NO_FIELDS)
    assert matches(parse_where({"b": True}), meta, NO_FIELDS)
    assert not matches(parse_where({"n": True}), meta, NO_FIELDS)
    assert not matches(parse_where({"l": 1}), meta, NO_FIELDS)  # a list equals nothing
    assert not matches(parse_where({"s": {"$gt": 0}}), meta, NO_FIELDS)
    assert matches(parse_where({"s": {"$gt": "0"}}), meta, NO_FIELDS)
    assert not matches(parse_where({"b": {"$gte": "a"}}), meta, NO_FIELDS)
    # $exists: present, whatever the value (null included)
    assert matches(parse_where({"z": {"$exists": True}}), meta, NO_FIELDS)
    assert matches(parse_where({"q": {"$exists": False}}), meta, NO_FIELDS)


def test_negations_match_memories_that_lack_the_key() -> None:
    assert matches(parse_where({"topic": {"$ne": "food"}}), {}, NO_FIELDS)
    assert matches(parse_where({"topic": {"$nin": ["food"]}}), {"topic": 3}, NO_FIELDS)
    assert not matches(parse_where({"topic": {"$ne": "food"}}), {"topic": "food"}, NO_FIELDS)


def test_fields_are_tested_on_the_memory_not_its_metadata() -> None:
    fields = {"thread": "t1", "position": 2, "importance": 0.5}
    meta = {"thread": "other"}
    assert matches(parse_where({"thread": "t1"}), meta, fields)
    assert matches(parse_where({"metadata.thread": "other"}), meta, fields)
    assert not matches(parse_where({"derived_from": {"$exists": True}}), meta, fields)
    assert matches(parse_where({"position": {"$gte": 2, "$lt": 3}}), meta, fields)


def test_scoped_adds_a_thread_and_a_time_window() -> None:
    node = scoped(parse_where({"a": 1}), thread="t1", since=10, until="1970-01-01T00:01:00+00:00")
    assert node == AllOf(
        (
            Condition(None, "a", "eq", (1,)),
            Condition("thread", "thread", "eq", ("t1",)),
            Condition("created_at", "created_at", "gte", (10.0,)),
            Condition("created_at", "created_at", "lt", (60.0,)),
        )
    )
    assert scoped(None) is None
    with pytest.raises(ValidationError, match="thread must be a non-empty string"):
        scoped(None, thread="")


@settings(max_examples=300, deadline=None)
@given(where_filters())
def test_a_parsed_filter_reads_back_from_what_it_shows(where: dict[str, Any]) -> None:
    node = parse_where(where)
    assert node is not None
    assert parse_where(node.to_dict()) == node


@settings(max_examples=300, deadline=None)
@given(where_filters(), metadata_values(), thread_names())
def test_shown_filters_mean_what_they_meant(
    where: dict[str, Any], meta: dict[str, Any], thread: str | None
) -> None:
    node = parse_where(where)
    fields = {"thread": thread, "importance": 0.5, "position": 1}
    again = parse_where(node.to_dict() if node is not None else None)
    assert matches(node, meta, fields) == matches(again, meta, fields)


@given(st.lists(metadata_values(), min_size=1, max_size=5), where_filters())
@settings(max_examples=100, deadline=None)
def test_or_and_and_are_their_parts(metas: list[dict[str, Any]], where: dict[str, Any]) -> None:
    node = parse_where(where)
    other = parse_where({"topic": "food"})
    assert node is not None and other is not None
    for meta in metas:
        either = matches(AnyOf((node, other)), meta, NO_FIELDS)
        both = matches(AllOf((node, other)), meta, NO_FIELDS)
        one, two = matches(node, meta, NO_FIELDS), matches(other, meta, NO_FIELDS)
        assert either == (one or two)
        assert both == (one and two)
