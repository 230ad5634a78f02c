"""A LlamaIndex RetrieverQueryEngine: rankseam retrieves, a rankseam reranker postprocesses
(diversifies) what it retrieved. MockLLM stands in for your LLM, so this runs offline."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine

import rankseam
from rankseam_llamaindex import RankseamNodePostprocessor, RankseamRetriever

MEMORIES = {
    "dinner": "Dana's birthday dinner is on Friday at the Thai place",
    "dinner-obs": "Dana's birthday dinner: Friday, Thai place on Main Street",
    "standup": "Moved the weekly standup to 9:30",
}


def main(folder: Path) -> None:
    with rankseam.open_memory(folder / "llamaindex.sqlite3") as memory:
        for memory_id, text in MEMORIES.items():
            memory.add(text, memory_id=memory_id, metadata={"source": "example"})
        engine = RetrieverQueryEngine.from_args(
            RankseamRetriever.from_defaults(memory, similarity_top_k=3, reranker="none"),
            llm=MockLLM(),
            node_postprocessors=[
                RankseamNodePostprocessor.from_defaults("mmr", top_n=2, options={"lambda": 0.0})
            ],
        )
        response = engine.query("dana's birthday dinner")
        for node in response.source_nodes:
            meta = node.node.metadata  # flat: the citation, the scores, what was stored
            rerank = meta["rerank"]
            print(
                node.node.node_id,
                meta["revision"],
                meta["source"],
                f"coarse rank {rerank['coarse_rank']}",
                f"score {node.score:.3f}",
                rerank["trace"]["status"],
            )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
