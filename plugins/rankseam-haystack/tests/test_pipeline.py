"""The components in real Haystack pipelines: retriever -> ranker, a question answered from
stored memories, the async pipeline, and a pipeline saved and loaded again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from haystack import Document, Pipeline, component
from haystack.components.builders import AnswerBuilder, PromptBuilder
from haystack.core.errors import DeserializationError

from rankseam_haystack import RankseamDocumentStore, RankseamRanker, RankseamRetriever

MEMORIES = [
    ("m1", "Dana's birthday dinner is on Friday at the Thai place", {"user": "dana"}),
    ("m2", "Dana's birthday dinner is Friday at the Thai place on Main Street", {"user": "dana"}),
    ("m3", "Sam's flight to Lisbon leaves on Tuesday at 7am", {"user": "sam"}),
    ("m4", "The weekly standup moved to 9:30", {"user": "team"}),
    ("m5", "Dana is allergic to peanuts", {"user": "dana"}),
]
TEMPLATE = """Answer from the memories.
{% for doc in documents %}memory: {{ doc.content }}
{% endfor %}question: {{ question }}
answer:"""


@component
class FirstMemoryGenerator:
    """A stand-in for an LLM (the tests run offline): it answers with the first memory of its
    prompt, so the answer is the memory the retriever and ranker put first."""

    @component.output_types(replies=list[str])
    def run(self, prompt: str) -> dict[str, list[str]]:
        first = next(line for line in prompt.splitlines() if line.startswith("memory: "))
        return {"replies": [first.removeprefix("memory: ")]}


@pytest.fixture
def store(document_store: RankseamDocumentStore) -> RankseamDocumentStore:
    document_store.write_documents(
        [Document(id=key, content=text, meta=meta) for key, text, meta in MEMORIES]
    )
    return document_store


def retrieve_and_rank(store: RankseamDocumentStore, pipeline: Any) -> Any:
    pipeline.add_component("retriever", RankseamRetriever(store, top_k=4, reranker="none"))
    pipeline.add_component("ranker", RankseamRanker("mmr", options={"lambda": 0.0}, top_k=2))
    pipeline.connect("retriever.documents", "ranker.documents")
    return pipeline


def test_retriever_then_ranker(store: RankseamDocumentStore) -> None:
    pipeline = retrieve_and_rank(store, Pipeline())
    question = "when is dana's birthday dinner"
    out = pipeline.run({"retriever": {"query": question}, "ranker": {"query": question}})
    docs = out["ranker"]["documents"]
    ids = [d.id for d in docs]
    assert ids[0] == "m1" and "m2" not in ids  # diversified
    assert docs[0].meta["memory_id"] == "m1" and docs[0].meta["rerank"]["coarse_rank"] == 1
    assert docs[0].meta["rerank"]["trace"]["policy_id"] == "rankseam.rerank.mmr.v1"
    assert all(isinstance(d.score, float) for d in docs)


def test_a_pipeline_answers_a_question_from_stored_memories(
    store: RankseamDocumentStore,
) -> None:
    pipeline = Pipeline()
    pipeline.add_component("retriever", RankseamRetriever(store, top_k=4))
    pipeline.add_component("ranker", RankseamRanker("mmr", top_k=2))
    pipeline.add_component("prompt", PromptBuilder(TEMPLATE, required_variables=["documents"]))
    pipeline.add_component("llm", FirstMemoryGenerator())
    pipeline.add_component("answer", AnswerBuilder())
    pipeline.connect("retriever.documents", "ranker.documents")
    pipeline.connect("ranker.documents", "prompt.documents")
    pipeline.connect("prompt.prompt", "llm.prompt")
    pipeline.connect("llm.replies", "answer.replies")
    pipeline.connect("ranker.documents", "answer.documents")
    question = "what is sam's flight time to lisbon"
    out = pipeline.run(
        {
            "retriever": {"query": question, "filters": None},
            "ranker": {"query": question},
            "prompt": {"question": question},
            "answer": {"query": question},
        }
    )
    [answer] = out["answer"]["answers"]
    assert answer.data == "Sam's flight to Lisbon leaves on Tuesday at 7am"
    assert answer.query == question
    assert answer.documents[0].meta["memory_id"] == "m3"  # the answer cites the memory
    assert answer.documents[0].meta["revision"] == 1


def test_filters_reach_the_search_inside_a_pipeline(store: RankseamDocumentStore) -> None:
    pipeline = retrieve_and_rank(store, Pipeline())
    dana = {"field": "meta.user", "operator": "==", "value": "dana"}
    question = "flight to lisbon"
    out = pipeline.run(
        {"retriever": {"query": question, "filters": dana}, "ranker": {"query": question}}
    )
    assert {d.meta["user"] for d in out["ranker"]["documents"]} == {"dana"}


def test_a_pipeline_run_async(
    store: RankseamDocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Haystack 3's ``Pipeline.run_async`` runs each component's ``run_async``."""
    question = "when is dana's birthday dinner"
    inputs = {"retriever": {"query": question}, "ranker": {"query": question}}
    pipeline = retrieve_and_rank(store, Pipeline())
    sync = pipeline.run(inputs)["ranker"]["documents"]

    def not_this(*args: object, **kwargs: object) -> None:
        raise AssertionError("the async pipeline called the synchronous run")

    for name in ("retriever", "ranker"):
        monkeypatch.setattr(pipeline.get_component(name), "run", not_this)
    out = asyncio.run(pipeline.run_async(inputs))["ranker"]["documents"]
    assert [(d.id, d.score) for d in out] == [(d.id, d.score) for d in sync]


def test_a_saved_pipeline_loads_when_its_user_trusts_the_module(
    store: RankseamDocumentStore,
) -> None:
    question = "when is dana's birthday dinner"
    inputs = {"retriever": {"query": question}, "ranker": {"query": question}}
    pipeline = retrieve_and_rank(store, Pipeline())
    saved = pipeline.dumps()
    with pytest.raises(DeserializationError, match="allowlist"):
        Pipeline.loads(saved)  # Haystack refuses modules its user has not trusted
    loaded = Pipeline.loads(saved, allowed_modules=["rankseam_haystack"])
    try:
        first = [d.id for d in pipeline.run(inputs)["ranker"]["documents"]]
        assert [d.id for d in loaded.run(inputs)["ranker"]["documents"]] == first
    finally:
        loaded.get_component("retriever").document_store.close()
