"""A memory's thread, position and derived_from reach LlamaIndex nodes' metadata under those
names (real llama-index-core, a real store)."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore

import rankseam
from rankseam_llamaindex import RankseamRetriever


def test_nodes_carry_the_memorys_place_in_its_conversation(memory: rankseam.Memory) -> None:
    memory.add("Dana picked the Thai place for dinner", memory_id="t1", thread="chat-7",
               position=3)  # fmt: skip
    memory.add("Dinner with Dana is at the Thai place", memory_id="f1", derived_from="t1")
    nodes = RankseamRetriever(memory, similarity_top_k=10).retrieve(
        "dinner with dana at the thai place"
    )
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    by_id = {n.node.metadata["memory_id"]: n.node.metadata for n in nodes}
    turn, fact = by_id["t1"], by_id["f1"]
    assert (turn["thread"], turn["position"], turn["derived_from"]) == ("chat-7", 3.0, None)
    assert (fact["thread"], fact["position"], fact["derived_from"]) == (None, None, "t1")
