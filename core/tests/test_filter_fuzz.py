"""Filters are data, never SQL: a filter's keys and values are bound as parameters, so the SQL
a store runs depends on the filter's shape only; hostile keys and values are plain data; any
malformed filter is a clear ValidationError (docs/filters.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rankseam import open_memory
from rankseam.errors import ValidationError
from rankseam.sqlite.filters import compile_where
from rankseam.store.filters import parse_where

HOSTILE = [
    "'); DROP TABLE revisions; --",
    '" OR 1=1 --',
    "$.a",
    "a'b",
    "%(f_0)s",
    ":f_ns",
    "?",
    "\\",
    "é\u200b",
    "x" * 240,
]
_TEXT = st.text(min_size=1, max_size=40).filter(lambda s: "\x00" not in s)


def _shape(ops: list[str], keys: list[str], values: list[str]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for op, key, value in zip(ops, keys, values, strict=False):
        if op == "$exists":
            parts.append({key: {"$exists": True}})
        elif op in ("$in", "$nin"):
            parts.append({key: {op: [value, value + "!"]}})
        else:
            parts.append({key: {op: value}})
    return {"$or": parts}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["$eq", "$ne", "$in", "$nin", "$gt", "$lte", "$exists"]),
        min_size=1,
        max_size=5,
    ),
    st.data(),
)
def test_the_sql_depends_on_the_shape_only(ops: list[str], data: Any) -> None:
    n = len(ops)
    keys_a = data.draw(
        st.lists(_TEXT.filter(lambda k: not k.startswith("$")), min_size=n, max_size=n)
    )
    keys_b = data.draw(
        st.lists(_TEXT.filter(lambda k: not k.startswith("$")), min_size=n, max_size=n)
    )
    values_a = data.draw(st.lists(_TEXT, min_size=n, max_size=n))
    values_b = data.draw(st.lists(_TEXT, min_size=n, max_size=n))
    # the same kind of key (field or metadata) in both, so the shapes match
    keys_b = [f"m.{k}" for k in keys_b]
    keys_a = [f"m.{k}" for k in keys_a]
    sql_a, args_a = compile_where(parse_where(_shape(ops, keys_a, values_a)), "ns-a")
    sql_b, args_b = compile_where(parse_where(_shape(ops, keys_b, values_b)), "ns-b")
    # the SQL of this shape with keys and values of our own: every filter of the shape
    # compiles to it, whatever its texts
    markers = [f"m.key{i}" for i in range(n)], [f"value{i}" for i in range(n)]
    template, _ = compile_where(parse_where(_shape(ops, *markers)), "ns")
    assert sql_a == sql_b == template
    for text in [*keys_a, *values_a]:
        # a text the SQL's own words contain ("meta" of metadata_values) proves nothing
        if len(text) > 3 and text not in template:
            assert text not in sql_a
    assert set(args_a) == set(args_b)


def test_hostile_keys_and_values_are_plain_data(tmp_path: Path) -> None:
    with open_memory(tmp_path / "m.sqlite3") as memory:
        for i, text in enumerate(HOSTILE):
            memory.add(f"harbour note {i}", memory_id=f"m{i}", metadata={text: text})
        for i, text in enumerate(HOSTILE):
            listed = [m.ref.memory_id for m in memory.list(where={f"metadata.{text}": text})]
            assert listed == [f"m{i}"], text
            hits = memory.search("harbour", where={f"metadata.{text}": {"$in": [text]}})
            assert [h.ref.memory_id for h in hits.hits] == [f"m{i}"], text
        assert memory.stats()["memories"] == len(HOSTILE)  # every table is still there


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(
                st.one_of(
                    st.sampled_from(["$and", "$or", "$in", "$gt", "$exists", "a"]),
                    st.text(max_size=3),
                ),
                inner,
                max_size=3,
            ),
        ),
        max_leaves=10,
    )
)
def test_any_value_is_a_filter_or_a_validation_error(where: Any) -> None:
    try:
        node = parse_where(where)
    except ValidationError as exc:
        assert str(exc)  # says what is wrong
        return
    if node is not None:
        compile_where(node, "ns")  # a parsed filter always compiles
