"""A LangChain ContextualCompressionRetriever: rankseam retrieves, a rankseam reranker
compresses (diversifies) what it retrieved."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from langchain_classic.retrievers import ContextualCompressionRetriever

import rankseam
from rankseam_langchain import RankseamCompressor, RankseamRetriever

MEMORIES = {
    "dinner": "Dana's birthday dinner is on Friday at the Thai place",
    "dinner-obs": "Dana's birthday dinner: Friday, Thai place on Main Street",
    "standup": "Moved the weekly standup to 9:30",
}


def main(folder: Path) -> None:
    with rankseam.open_memory(folder / "langchain.sqlite3") as memory:
        for memory_id, text in MEMORIES.items():
            memory.add(text, memory_id=memory_id)
        pipeline = ContextualCompressionRetriever(
            base_retriever=RankseamRetriever(memory=memory, k=3),
            base_compressor=RankseamCompressor(reranker="mmr", options={"lambda": 0.0}, top_n=2),
        )
        for doc in pipeline.invoke("dana's birthday dinner"):
            trace = doc.metadata["rerank"]["trace"]
            print(doc.metadata["memory_id"], doc.metadata["revision"], trace["status"])


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
