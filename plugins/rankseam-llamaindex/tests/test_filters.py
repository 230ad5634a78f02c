"""LlamaIndex ``MetadataFilters`` through RankseamRetriever, with real llama-index-core objects
over a real store: each operator that maps gives what LlamaIndex's own reference filter
(``build_metadata_filter_fn``, what its in-memory vector store runs) gives over the same node
metadata; AND, OR, NOT and nesting combine as LlamaIndex reads them; an operator with no exact
meaning in rankseam's filters is an error naming it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.llms.mock import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.core.vector_stores.utils import build_metadata_filter_fn

import rankseam
from rankseam_llamaindex import RankseamRetriever
from rankseam_llamaindex.filters import SUPPORTED_OPERATORS, where_from_filters

QUERY = "dinner"
START = 1_796_083_200  # 2026-12-01T00:00:00+00:00
DAY = 86_400

#: Every memory mentions dinner, so an unfiltered search finds them all: what a filtered one
#: finds is what the filter keeps.
MEMORIES: dict[str, dict[str, Any]] = {
    "d1": {"text": "Dana's birthday dinner is at Luigi's",
           "metadata": {"user": "dana", "year": 2026, "tag": "birthday"}},
    "d2": {"text": "Dana prefers window seats at dinner",
           "metadata": {"user": "dana", "year": 2024, "tag": "seating"}},
    "s1": {"text": "Sam's birthday dinner is in May",
           "metadata": {"user": "sam", "year": 2026, "tag": "birthday"}},
    "s2": {"text": "Sam cooks dinner on Sundays", "metadata": {"user": "sam", "year": 2025}},
    "c1": {"text": "planning the dinner in the chat", "thread": "chat-7", "position": 1},
}  # fmt: skip


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[rankseam.Memory]:
    with rankseam.open_memory(tmp_path / "m.sqlite3") as mem:
        mem.ingest(
            {"id": memory_id, "created_at": START + i * DAY, **record}
            for i, (memory_id, record) in enumerate(MEMORIES.items())
        )
        yield mem


def ids(nodes: list[Any]) -> list[str]:
    return sorted(n.node.node_id for n in nodes)


def retrieve(memory: rankseam.Memory, **settings: Any) -> list[str]:
    return ids(RankseamRetriever(memory, similarity_top_k=10, **settings).retrieve(QUERY))


def reference(filters: MetadataFilters, memory: rankseam.Memory) -> list[str]:
    """What LlamaIndex's own filter keeps, over the metadata of the nodes the retriever
    returns unfiltered."""
    nodes = {n.node.node_id: n.node.metadata for n in RankseamRetriever(
        memory, similarity_top_k=10).retrieve(QUERY)}  # fmt: skip
    assert sorted(nodes) == sorted(MEMORIES)
    keep = build_metadata_filter_fn(lambda node_id: nodes[node_id], filters)
    return sorted(node_id for node_id in nodes if keep(node_id))


def f(key: str, value: Any, operator: str = "==") -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=FilterOperator(operator))


LEAVES = [
    f("user", "dana"),
    f("year", 2026),
    f("user", "dana", "!="),  # a memory without the key passes, in both
    f("year", 2025, ">"),
    f("year", 2025, ">="),
    f("year", 2025, "<"),
    f("year", 2025, "<="),
    f("user", ["sam", "nobody"], "in"),
    f("tag", ["birthday"], "nin"),
    f("tag", None, "is_empty"),
    f("thread", "chat-7"),  # the memory's thread, as the node's metadata shows it
    f("memory_id", ["d1", "s2"], "in"),
]


#: Each leaf alone (AND) and negated (NOT: none of them holds); NOT over a range is refused
#: (test_not_over_a_range_is_refused).
CASES = [
    (leaf, condition)
    for leaf in LEAVES
    for condition in (FilterCondition.AND, FilterCondition.NOT)
    if condition == FilterCondition.AND or leaf.operator.value not in (">", ">=", "<", "<=")
]


@pytest.mark.parametrize(
    ("leaf", "condition"),
    CASES,
    ids=[f"{c.value} {x.key} {x.operator.value} {x.value}" for x, c in CASES],
)
def test_each_operator_means_what_llamaindex_means(
    memory: rankseam.Memory, leaf: MetadataFilter, condition: FilterCondition
) -> None:
    filters = MetadataFilters(filters=[leaf], condition=condition)
    expected = reference(filters, memory)
    assert 0 < len(expected) < len(MEMORIES) or leaf.operator.value == "!="
    assert retrieve(memory, filters=filters) == expected


@pytest.mark.parametrize(
    "condition", [FilterCondition.AND, FilterCondition.OR, FilterCondition.NOT]
)
def test_conditions_combine_as_llamaindex_combines_them(
    memory: rankseam.Memory, condition: FilterCondition
) -> None:
    filters = MetadataFilters(
        filters=[f("user", "dana"), f("tag", ["birthday"], "in")], condition=condition
    )
    expected = reference(filters, memory)
    assert retrieve(memory, filters=filters) == expected
    assert (
        expected
        == {
            FilterCondition.AND: ["d1"],
            FilterCondition.OR: ["d1", "d2", "s1"],
            FilterCondition.NOT: ["c1", "s2"],
        }[condition]
    )


def test_nested_filters(memory: rankseam.Memory) -> None:
    # (user == sam AND year >= 2026) OR thread == chat-7
    sam_recent = MetadataFilters(filters=[f("user", "sam"), f("year", 2026, ">=")])
    nested = MetadataFilters(
        filters=[sam_recent, f("thread", "chat-7")], condition=FilterCondition.OR
    )
    assert retrieve(memory, filters=nested) == ["c1", "s1"]
    # NOT of a nested group: none of (dana's, or a birthday) -> De Morgan's laws
    either = MetadataFilters(
        filters=[f("user", "dana"), f("tag", "birthday")], condition=FilterCondition.OR
    )
    assert retrieve(memory, filters=MetadataFilters(
        filters=[either], condition=FilterCondition.NOT)) == ["c1", "s2"]  # fmt: skip
    # NOT of NOT: at least one of them holds
    neither = MetadataFilters(
        filters=[f("user", "dana"), f("thread", "chat-7")], condition=FilterCondition.NOT
    )
    assert retrieve(memory, filters=MetadataFilters(
        filters=[neither], condition=FilterCondition.NOT)) == ["c1", "d1", "d2"]  # fmt: skip
    assert where_from_filters(nested) == {
        "$or": [
            {"$and": [{"user": {"$eq": "sam"}}, {"year": {"$gte": 2026}}]},
            {"thread": {"$eq": "chat-7"}},
        ]
    }


def test_no_filters_is_every_memory(memory: rankseam.Memory) -> None:
    assert retrieve(memory, filters=MetadataFilters(filters=[])) == sorted(MEMORIES)
    assert where_from_filters(None) is None


@pytest.mark.parametrize(
    "operator", ["text_match", "text_match_insensitive", "contains", "any", "all"]
)
def test_an_operator_without_an_exact_meaning_is_refused_naming_it(
    memory: rankseam.Memory, operator: str
) -> None:
    value: Any = ["birthday"] if operator in ("any", "all") else "birth"
    filters = MetadataFilters(filters=[f("user", "dana"), f("tag", value, operator)])
    with pytest.raises(rankseam.ValidationError) as raised:
        RankseamRetriever(memory, filters=filters)
    message = str(raised.value)
    assert f"filters.filters[1] (key 'tag'): the operator {operator!r}" in message
    assert "use one of" in message and ", ".join(SUPPORTED_OPERATORS) in message


def test_not_over_a_range_is_refused(memory: rankseam.Memory) -> None:
    filters = MetadataFilters(filters=[f("year", 2025, ">")], condition=FilterCondition.NOT)
    with pytest.raises(rankseam.ValidationError, match=r"NOT over the operator '>'"):
        RankseamRetriever(memory, filters=filters)
    # inside a NOT group, nested: the same
    nested = MetadataFilters(
        filters=[MetadataFilters(filters=[f("user", "sam"), f("year", 2025, "<=")])],
        condition=FilterCondition.NOT,
    )
    with pytest.raises(rankseam.ValidationError, match=r"filters\.filters\[0\]\.filters\[1\]"):
        RankseamRetriever(memory, filters=nested)


@pytest.mark.parametrize(
    ("filters", "says"),
    [
        (MetadataFilters(filters=[f("tag", "x", "is_empty")]), "is_empty takes no value"),
        (
            MetadataFilters(filters=[f("user", "dana", "in")]),
            "filters.filters[0]['user']['$in']: $in takes a list of values",
        ),
        (
            MetadataFilters(filters=[f("thread", 7)]),
            "filters.filters[0]['thread']['$eq']: thread holds text",
        ),
        (MetadataFilters(filters=[f("user", None)]), "None matches nothing"),
        (
            MetadataFilters(filters=[f("user", "dana"), MetadataFilters(filters=[])]),
            "filters.filters[1]: an empty MetadataFilters",
        ),
        ({"user": "dana"}, "filters must be LlamaIndex's MetadataFilters"),
    ],
)
def test_a_filter_rankseam_cannot_read_is_a_clear_error(
    memory: rankseam.Memory, filters: Any, says: str
) -> None:
    with pytest.raises(rankseam.ValidationError) as raised:
        RankseamRetriever(memory, filters=filters)
    assert says in str(raised.value)


def test_where_thread_time_scope_and_cut_off(memory: rankseam.Memory) -> None:
    assert retrieve(memory, where={"$or": [{"user": "sam"}, {"year": 2024}]}) == [
        "d2",
        "s1",
        "s2",
    ]
    assert retrieve(memory, thread="chat-7") == ["c1"]
    assert retrieve(memory, since="2026-12-02T00:00:00+00:00", until=START + 3 * DAY) == [
        "d2",
        "s1",
    ]
    dana = MetadataFilters(filters=[f("user", "dana")])
    assert retrieve(memory, filters=dana, since=START + DAY) == ["d2"]
    every = RankseamRetriever(memory, similarity_top_k=10).retrieve(QUERY)
    scores = sorted((n.node.metadata["coarse_score"] for n in every), reverse=True)
    assert len(set(scores)) > 1
    cut = (scores[0] + scores[1]) / 2
    kept = RankseamRetriever(memory, similarity_top_k=10, min_score=cut).retrieve(QUERY)
    assert sorted(n.node.metadata["coarse_score"] for n in kept) == sorted(
        s for s in scores if s >= cut
    )
    with pytest.raises(TypeError, match="both filters and where"):
        RankseamRetriever(memory, filters=dana, where={"user": "dana"})
    with pytest.raises(rankseam.ValidationError, match=r"where\['a'\]\['\$regex'\]"):
        RankseamRetriever(memory, where={"a": {"$regex": "x"}})


def test_filters_set_later_apply_and_from_defaults_takes_them(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever.from_defaults(
        memory, similarity_top_k=10, filters=MetadataFilters(filters=[f("user", "sam")])
    )
    assert ids(retriever.retrieve(QUERY)) == ["s1", "s2"]
    retriever.filters = MetadataFilters(filters=[f("year", 2024)])
    assert ids(retriever.retrieve(QUERY)) == ["d2"]
    assert ids(asyncio.run(retriever.aretrieve(QUERY))) == ["d2"]


def test_a_query_engine_answers_from_the_filtered_nodes(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(
        memory, similarity_top_k=10, filters=MetadataFilters(filters=[f("user", "dana")])
    )
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query("where is dana's birthday dinner?")
    assert sorted(n.node.node_id for n in response.source_nodes) == ["d1", "d2"]
