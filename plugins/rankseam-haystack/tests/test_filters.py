"""Haystack's filters on RankseamDocumentStore: each supported form answers what Haystack's
own reference (haystack.utils.filters.document_matches_filter, its in-memory store's meaning)
answers; each form rankseam cannot apply exactly is a FilterError naming its place."""

from __future__ import annotations

from typing import Any

import pytest
from haystack.dataclasses import Document
from haystack.errors import FilterError as HaystackFilterError
from haystack.utils.filters import document_matches_filter

from rankseam.errors import ValidationError
from rankseam_haystack import RankseamDocumentStore
from rankseam_haystack.filters import FilterError, where_from_filters

DOCS = [
    Document(id="a", content="alpha", meta={"year": 2020, "tag": "x", "date": "2021-01-05"}),
    Document(id="b", content="beta", meta={"year": 2024, "tag": "y", "date": "2024-06-30"}),
    Document(id="c", content="gamma", meta={"year": 2026, "tag": None}),
    Document(id="d", content="delta", meta={"tag": "x", "flag": True}),
    Document(id="e", content="epsilon", meta={"year": 2024.0, "thread": "t1"}),
]


def cmp(field: str, operator: str, value: Any) -> dict[str, Any]:
    return {"field": field, "operator": operator, "value": value}


SUPPORTED = [
    cmp("meta.year", "==", 2024),
    cmp("meta.year", "!=", 2024),
    cmp("meta.tag", "==", None),
    cmp("meta.tag", "!=", None),
    cmp("meta.year", ">", 2020),
    cmp("meta.year", ">=", 2024),
    cmp("meta.year", "<", 2026),
    cmp("meta.year", "<=", 2024),
    cmp("meta.year", ">", None),
    cmp("meta.date", ">", "2022-01-01"),
    cmp("meta.date", "<=", "2021-01-05"),
    cmp("meta.tag", "in", ["x", "z"]),
    cmp("meta.tag", "in", ["y", None]),
    cmp("meta.tag", "in", []),
    cmp("meta.tag", "not in", ["x"]),
    cmp("meta.tag", "not in", ["x", None]),
    cmp("meta.flag", "==", True),
    cmp("tag", "==", "x"),  # a legacy filter: a bare name is a meta key
    cmp("id", "in", ["a", "e", "zz"]),
    cmp("meta.thread", "==", "t1"),  # a meta key named like a rankseam field stays meta
    {"operator": "AND", "conditions": [cmp("meta.tag", "==", "x"), cmp("meta.year", ">", 2000)]},
    {"operator": "OR", "conditions": [cmp("meta.tag", "==", "y"), cmp("meta.flag", "==", True)]},
    {"operator": "NOT", "conditions": [cmp("meta.tag", "==", "x"), cmp("meta.year", "<", 2021)]},
    {"operator": "NOT", "conditions": [cmp("meta.year", ">", 2020)]},
    {"operator": "NOT", "conditions": [cmp("meta.year", ">=", 2024), cmp("meta.tag", "in", ["y"])]},
    {"operator": "NOT", "conditions": [cmp("meta.tag", "not in", ["x", None])]},
    {
        "operator": "NOT",
        "conditions": [
            {"operator": "OR", "conditions": [cmp("meta.tag", "==", "y"), cmp("id", "==", "d")]},
            {"operator": "NOT", "conditions": [cmp("meta.year", "==", 2026)]},
        ],
    },
    {"operator": "AND", "conditions": []},
    {"operator": "OR", "conditions": []},
    {"operator": "NOT", "conditions": []},
    {"operator": "OR", "conditions": [{"operator": "NOT", "conditions": []}, cmp("id", "==", "b")]},
]


@pytest.fixture
def store(document_store: RankseamDocumentStore) -> RankseamDocumentStore:
    document_store.write_documents(DOCS)
    return document_store


@pytest.mark.parametrize("filters", SUPPORTED, ids=[str(f) for f in SUPPORTED])
def test_each_supported_filter_answers_what_haystack_answers(
    store: RankseamDocumentStore, filters: dict[str, Any]
) -> None:
    expected = [d.id for d in DOCS if document_matches_filter(filters, d)]
    assert [d.id for d in store.filter_documents(filters)] == expected


def test_a_none_meta_value_reads_back_and_counts_as_absent(
    store: RankseamDocumentStore,
) -> None:
    [c] = store.filter_documents(cmp("id", "==", "c"))
    assert c.meta == {"year": 2026, "tag": None}
    assert store.memory.get("c").metadata.get("tag", "absent") == "absent"


REFUSED = [
    (cmp("content", "==", "alpha"), "do not look into the text"),
    (cmp("embedding", "==", [1.0]), "'embedding' cannot be filtered"),
    (cmp("score", ">", 0.5), "belongs to a query"),
    (cmp("meta.person.name", "==", "x"), "nested meta"),
    (cmp("meta._haystack", "==", "x"), "reserved"),
    (cmp("other.field", "==", "x"), "unknown field"),
    (cmp("meta.year", "==", [2024]), "compares a whole list"),
    (cmp("meta.year", ">", "soon"), "ISO 8601"),
    (cmp("meta.year", ">", [1]), "ranges compare numbers or ISO 8601 dates, got a list"),
    (cmp("meta.year", "in", 2024), "must be a list"),
    (cmp("meta.year", "not in", (2024,)), "must be a list"),
    (cmp("meta.year", "in", [{"a": 1}]), "holds a dict"),
    (cmp("meta.year", "~", 1), "unknown comparison operator '~'"),
    ({"operator": "XOR", "conditions": []}, "unknown logical operator 'XOR'"),
    ({"conditions": [cmp("id", "==", "a")]}, "'operator' key missing"),
    ({"operator": "AND"}, "'conditions' key missing"),
    ({"operator": "AND", "conditions": cmp("id", "==", "a")}, "must be a list"),
    ({"field": "meta.year", "value": 1}, "'operator' key missing"),
    ({"field": "meta.year", "operator": "=="}, "'value' key missing"),
    ({"operator": "OR", "conditions": [cmp("meta.year", "in", list(range(1001)))]}, "refuses"),
]


@pytest.mark.parametrize(("filters", "message"), REFUSED, ids=[m for _, m in REFUSED])
def test_what_rankseam_cannot_apply_is_a_filter_error_never_ignored(
    store: RankseamDocumentStore, filters: dict[str, Any], message: str
) -> None:
    with pytest.raises(FilterError, match=message) as raised:
        store.filter_documents(filters)
    assert isinstance(raised.value, HaystackFilterError)  # what Haystack code catches
    assert isinstance(raised.value, ValidationError)  # and what rankseam code catches


def test_the_error_names_the_place_in_the_filter() -> None:
    nested = {"operator": "AND", "conditions": [cmp("id", "==", "a"), cmp("content", "==", "x")]}
    with pytest.raises(FilterError, match=r"^filters\['conditions'\]\[1\]: the field 'content'"):
        where_from_filters(nested)


def test_no_filters_is_every_document(store: RankseamDocumentStore) -> None:
    assert where_from_filters(None) is None and where_from_filters({}) is None
    assert [d.id for d in store.filter_documents()] == [d.id for d in DOCS]
    with pytest.raises(FilterError, match="must be a mapping"):
        where_from_filters([cmp("id", "==", "a")])  # type: ignore[arg-type]


def test_ranges_over_dates_compare_iso_text_as_rankseam_does() -> None:
    """Haystack compares parsed datetimes; rankseam compares ISO 8601 text by code point
    (docs/filters.md), the same order for dates written alike."""
    assert where_from_filters(cmp("meta.date", ">=", "2024-01-01")) == {
        "metadata.date": {"$gte": "2024-01-01"}
    }
