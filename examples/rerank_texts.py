"""Rerank texts you already have (from any retriever) with an installed rankseam reranker."""

from __future__ import annotations

import json

import rankseam

TEXTS = [
    "Dana's birthday dinner is on Friday at the Thai place",
    "Dana's birthday dinner: Friday, Thai place on Main Street",  # a near-duplicate
    "Moved the weekly standup to 9:30",
    "Bob's cat only eats salmon-flavoured food",
]


def main() -> None:
    reranker = rankseam.open_reranker("mmr", options={"lambda": 0.3})
    result = reranker.rerank("when is dana's dinner?", TEXTS, limit=3)
    for hit in result.hits:  # memory_id is the text's 1-based input position
        print(hit.ref.memory_id, hit.text)
    trace = result.trace.to_dict()["rerank"]
    print(json.dumps({k: trace[k] for k in ("policy_id", "status", "selected_ranks")}))


if __name__ == "__main__":
    main()
