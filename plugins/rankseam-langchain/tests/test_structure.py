"""A memory's thread, position and derived_from reach LangChain documents' metadata under those
names (real langchain-core, a real store)."""

from __future__ import annotations

from langchain_core.documents import Document

import rankseam
from rankseam_langchain import RankseamRetriever


def test_documents_carry_the_memorys_place_in_its_conversation(memory: rankseam.Memory) -> None:
    memory.add("Dana picked the Thai place for dinner", memory_id="t1", thread="chat-7",
               position=3)  # fmt: skip
    memory.add("Dinner with Dana is at the Thai place", memory_id="f1", derived_from="t1")
    docs = RankseamRetriever(memory=memory, k=10).invoke("dinner with dana at the thai place")
    by_id = {d.id: d for d in docs}
    assert all(isinstance(d, Document) for d in docs)
    turn, fact = by_id["t1"].metadata, by_id["f1"].metadata
    assert (turn["thread"], turn["position"], turn["derived_from"]) == ("chat-7", 3.0, None)
    assert (fact["thread"], fact["position"], fact["derived_from"]) == (None, None, "t1")
    stored = memory.get("t1")
    assert turn["thread"] == stored.thread and turn["position"] == stored.position
