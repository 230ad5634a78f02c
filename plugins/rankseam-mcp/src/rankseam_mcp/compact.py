"""The compact answers of ``memory_search`` and ``memory_list`` (their default; ``verbose: true``
answers everything): each hit or memory's citation and text, its metadata and place in a
thread only where it has them, the namespace said once for the whole answer, and the rerank
trace's policy and status (its reason and fallback only when there is one)."""

from __future__ import annotations

from typing import Any

__all__ = ["compact_hit", "compact_memory", "compact_rerank"]


def _cited(data: dict[str, Any], namespace: str, keep: tuple[str, ...]) -> dict[str, Any]:
    """The fields ``keep`` of a hit or memory (empty metadata and the structure fields it has
    none of left out), after checking that it is of ``namespace``, which the answer says
    once."""
    out = {k: data[k] for k in keep if k in data and (k not in _STRUCTURE or data[k] is not None)}
    if data.get("namespace") != namespace:  # never expected: one search reads one namespace
        out["namespace"] = data.get("namespace")
    if not out.get("metadata"):
        out.pop("metadata", None)
    if out.get("deleted") is False:
        out.pop("deleted")
    return out


#: A memory's place in a conversation (left out of compact answers when it has none).
_STRUCTURE = ("thread", "position", "derived_from")
#: What a compact answer keeps of a hit, and of a listed memory.
_HIT_KEEP = ("memory_id", "revision", "score", "text", "metadata", *_STRUCTURE)
_MEMORY_KEEP = ("memory_id", "revision", "text", "metadata", "deleted", *_STRUCTURE)


def compact_hit(hit: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A hit as a compact answer holds it: the citation, score (to 4 decimals), text, metadata
    and place in a thread where it has them."""
    out = _cited(hit, namespace, _HIT_KEEP)
    if isinstance(out.get("score"), float):
        out["score"] = round(out["score"], 4)
    return out


def compact_rerank(rerank: dict[str, Any] | None) -> dict[str, Any] | None:
    """The policy and its status; the reason and the fallback only when there is one."""
    if rerank is None:
        return None
    out = {"policy_id": rerank.get("policy_id"), "status": rerank.get("status")}
    if rerank.get("reason"):
        out["reason"] = rerank["reason"]
    if rerank.get("used_fallback"):
        out["used_fallback"] = True
    return out


def compact_memory(memory: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A listed memory as a compact answer holds it: the citation, text, metadata, whether it
    is deleted (only when it is) and its place in a thread where it has them."""
    return _cited(memory, namespace, _MEMORY_KEEP)
