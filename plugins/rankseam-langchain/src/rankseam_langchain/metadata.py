"""What a rankseam hit or rerank adds to a LangChain ``Document``'s metadata (one place)."""

from __future__ import annotations

from typing import Any

from rankseam.types import Hit, SearchTrace


def hit_metadata(hit: Hit, trace: SearchTrace, *, with_trace: bool) -> dict[str, Any]:
    """The citation (namespace, memory id, revision), scores and, optionally, the rerank trace.

    The memory's own stored metadata is kept under ``memory_metadata`` so that it can never
    overwrite the citation keys.
    """
    out: dict[str, Any] = {
        "namespace": hit.ref.namespace,
        "memory_id": hit.ref.memory_id,
        "revision": hit.ref.revision,
        "score": hit.score,
        "rerank_score": hit.rerank_score,
        "matched_by": list(hit.matched_by),
        "memory_metadata": dict(hit.metadata),
    }
    if with_trace:
        out["rerank_trace"] = None if trace.rerank is None else trace.rerank.to_dict()
    return out
