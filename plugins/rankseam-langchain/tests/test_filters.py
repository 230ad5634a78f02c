"""Filters through RankseamRetriever, against the real langchain-core over a real store
(rankseam docs/filters.md): LangChain's ``search_kwargs={"filter": ...}`` and
``invoke(query, filter=...)``, rankseam's ``where``/``thread``/``since``/``until``/
``min_score``, and a filter rankseam cannot read as a clear error naming it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from langchain_core.runnables import RunnableLambda

import rankseam
from rankseam.testing import FILTER_SAMPLE, sample_memory
from rankseam_langchain import RankseamRetriever

QUERY = "birthday dinner"
#: Each sample memory's time (epoch seconds): d1 2026-12-01, d2, s1, c1 a day apart after it.
CREATED = {record["id"]: record["created_at"] for record in FILTER_SAMPLE}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[rankseam.Memory]:
    with sample_memory(tmp_path / "m.sqlite3", FILTER_SAMPLE) as mem:
        yield mem


def ids(docs: list[Any]) -> list[str]:
    return sorted(d.metadata["memory_id"] for d in docs)


def test_search_kwargs_filter_is_where(memory: rankseam.Memory) -> None:
    assert ids(RankseamRetriever(memory=memory).invoke(QUERY)) == ["c1", "d1", "d2", "s1"]
    dana = RankseamRetriever(memory=memory, search_kwargs={"filter": {"user": "dana"}})
    docs = dana.invoke(QUERY)
    assert ids(docs) == ["d1", "d2"]
    assert {d.metadata["user"] for d in docs} == {"dana"}  # the stored metadata, beside ours
    # search_kwargs takes the retriever's other settings too, as a vector store retriever's
    one = RankseamRetriever(memory=memory, search_kwargs={"k": 1, "filter": {"user": "sam"}})
    assert ids(one.invoke(QUERY)) == ["s1"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"user": "dana"}, ["d1", "d2"]),
        ({"user": {"$eq": "dana"}}, ["d1", "d2"]),
        ({"user": {"$ne": "dana"}}, ["c1", "s1"]),  # a memory without the key passes $ne
        ({"user": {"$in": ["dana", "sam"]}}, ["d1", "d2", "s1"]),
        ({"user": {"$nin": ["dana"]}}, ["c1", "s1"]),
        ({"year": {"$gt": 2024}}, ["d1", "s1"]),
        ({"year": {"$lte": 2024}}, ["d2"]),
        ({"$and": [{"user": {"$eq": "dana"}}, {"year": {"$gte": 2025}}]}, ["d1"]),
        ({"$or": [{"user": "sam"}, {"thread": "chat-7"}]}, ["c1", "s1"]),
        ({"user": "dana", "year": 2024}, ["d2"]),
        ({"user": {"$exists": False}}, ["c1"]),
        ({"created_at": {"$gte": "2026-12-03T00:00:00+00:00"}}, ["c1", "s1"]),
    ],
)
def test_langchain_filter_dicts_are_ours(
    memory: rankseam.Memory, given: dict[str, Any], expected: list[str]
) -> None:
    retriever = RankseamRetriever(memory=memory, search_kwargs={"filter": given})
    assert ids(retriever.invoke(QUERY)) == expected
    assert ids(RankseamRetriever(memory=memory).invoke(QUERY, filter=given)) == expected


def test_a_call_filter_overrides_search_kwargs_which_overrides_where(
    memory: rankseam.Memory,
) -> None:
    retriever = RankseamRetriever(
        memory=memory, where={"user": "sam"}, search_kwargs={"filter": {"user": "dana"}}
    )
    assert ids(retriever.invoke(QUERY)) == ["d1", "d2"]
    assert ids(retriever.invoke(QUERY, filter={"thread": "chat-7"})) == ["c1"]
    assert ids(retriever.invoke(QUERY, where={"year": 2024})) == ["d2"]
    assert ids(RankseamRetriever(memory=memory, where={"user": "sam"}).invoke(QUERY)) == ["s1"]


def test_a_bound_filter_reaches_the_retriever_in_a_chain(memory: rankseam.Memory) -> None:
    """LangChain passes ``filter`` through ``Runnable.bind`` to ``invoke``."""
    retriever = RankseamRetriever(memory=memory)
    chain = RunnableLambda(lambda q: q.strip()) | retriever.bind(filter={"user": "dana"})
    assert ids(chain.invoke(f"  {QUERY}  ")) == ["d1", "d2"]
    assert ids(asyncio.run(chain.ainvoke(QUERY))) == ["d1", "d2"]


def test_thread_time_scope_and_cut_off(memory: rankseam.Memory) -> None:
    assert ids(RankseamRetriever(memory=memory, thread="chat-7").invoke(QUERY)) == ["c1"]
    window = RankseamRetriever(
        memory=memory, since="2026-12-02T00:00:00+00:00", until=CREATED["c1"]
    )
    assert ids(window.invoke(QUERY)) == ["d2", "s1"]
    assert ids(window.invoke(QUERY, since=CREATED["s1"])) == ["s1"]
    assert ids(RankseamRetriever(memory=memory).invoke(QUERY, thread="chat-7")) == ["c1"]
    every = RankseamRetriever(memory=memory).invoke(QUERY)
    scores = sorted((d.metadata["coarse_score"] for d in every), reverse=True)
    assert len(set(scores)) > 1
    cut = (scores[0] + scores[1]) / 2
    kept = RankseamRetriever(memory=memory, min_score=cut).invoke(QUERY)
    assert sorted(d.metadata["coarse_score"] for d in kept) == sorted(s for s in scores if s >= cut)
    again = RankseamRetriever(memory=memory, search_kwargs={"min_score": cut}).invoke(QUERY)
    assert ids(again) == ids(kept)


def test_async_filters_alike(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(memory=memory, search_kwargs={"filter": {"year": 2026}})
    assert ids(asyncio.run(retriever.ainvoke(QUERY))) == ["d1", "s1"]
    got = asyncio.run(retriever.ainvoke(QUERY, filter={"user": "sam"}))
    assert ids(got) == ["s1"]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"user": {"$like": "d%"}}, "filter['user']['$like']: unknown operator '$like'"),
        ({"text": {"$contains": "dinner"}}, "filter['text']['$contains']: unknown operator"),
        ({"$not": {"user": "dana"}}, "filter['$not']: unknown combinator '$not'"),
        ({"$or": []}, "filter['$or']: $or takes a non-empty list"),
        ({"user": None}, "filter['user']: None matches nothing"),
        ({"thread": 7}, "filter['thread']: thread holds text"),
        ({"year": {"$gte": True}}, "filter['year']['$gte']: ranges compare numbers"),
        ("user = 'dana'", "filter must be a mapping"),
        (lambda metadata: True, "filter must be a mapping"),  # FAISS takes a callable
    ],
)
def test_a_filter_rankseam_cannot_read_is_a_clear_error(
    memory: rankseam.Memory, given: Any, says: str
) -> None:
    with pytest.raises(rankseam.ValidationError) as raised:
        RankseamRetriever(memory=memory).invoke(QUERY, filter=given)
    assert says in str(raised.value)
    # given to the retriever, it fails when the retriever is made, naming the same place
    with pytest.raises(pydantic.ValidationError, match=r"filter") as made:
        RankseamRetriever(memory=memory, search_kwargs={"filter": given})
    assert says in str(made.value)


def test_unknown_search_kwargs_and_a_filter_given_twice_are_type_errors(
    memory: rankseam.Memory,
) -> None:
    for key in ("score_threshold", "fetch_k", "lambda_mult"):
        with pytest.raises(TypeError, match=rf"unexpected search_kwargs \['{key}'\]"):
            RankseamRetriever(memory=memory, search_kwargs={key: 0.5})
        with pytest.raises(TypeError, match=rf"unexpected keyword argument\(s\) \['{key}'\]"):
            RankseamRetriever(memory=memory).invoke(QUERY, **{key: 0.5})
    with pytest.raises(TypeError, match="both filter and where"):
        RankseamRetriever(memory=memory, search_kwargs={"filter": {}, "where": {}})
    with pytest.raises(TypeError, match="both filter and where"):
        RankseamRetriever(memory=memory).invoke(QUERY, filter={"a": 1}, where={"a": 1})
    with pytest.raises(pydantic.ValidationError, match=r"where\['a'\]\['\$regex'\]"):
        RankseamRetriever(memory=memory, where={"a": {"$regex": "x"}})
