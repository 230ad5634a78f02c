"""The search settings the LangChain classes share: which keywords a retriever call or a
vector store search takes, and LangChain's ``filter`` read as rankseam's ``where``
(docs/filters.md), and how a call's settings override the owner's. One place, so that the
retriever and the vector store read a filter and a call's reranker exactly alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankseam.plugin.adapters import FILTER_ARGUMENTS, check_filter

__all__ = ["CALL_ARGUMENTS", "FILTER", "SEARCH_ARGUMENTS", "layered", "search_settings"]

#: The ``Memory.search`` settings a LangChain call may give (``filter``, LangChain's word for
#: a filter, is ``where``).
SEARCH_ARGUMENTS = (
    "namespace",
    "reranker",
    "reranker_options",
    "pool",
    "on_error",
    *FILTER_ARGUMENTS,
)
#: What the retriever's ``invoke``/``ainvoke`` accept as keyword arguments, and what its
#: ``search_kwargs`` may hold: ``k`` and the search settings; each overrides the retriever's
#: attribute of the same name for that call only.
CALL_ARGUMENTS = ("k", *SEARCH_ARGUMENTS)
#: LangChain's word for a filter (``search_kwargs={"filter": ...}``, ``invoke(q, filter=...)``,
#: ``similarity_search(q, filter=...)``).
FILTER = "filter"
#: Keyword arguments LangChain itself passes through ``invoke`` (read by its callbacks).
_LANGCHAIN_ARGUMENTS = frozenset({"verbose"})


def search_settings(
    given: Mapping[str, Any],
    where: str,
    *,
    owner: str = "RankseamRetriever",
    accepted: tuple[str, ...] = CALL_ARGUMENTS,
) -> dict[str, Any]:
    """``given`` (``search_kwargs``, a call's keywords) checked, with ``filter`` named
    ``where``: a key outside ``accepted`` (and ``filter``) is a ``TypeError`` naming
    ``owner``, a filter given twice too, and a filter is checked at once (a mistake is a
    ``rankseam.ValidationError`` naming its place)."""
    unknown = sorted(set(given) - {*accepted, FILTER} - _LANGCHAIN_ARGUMENTS)
    if unknown:
        raise TypeError(
            f"{owner} got unexpected {where} {unknown}; it accepts "
            f"{[*accepted, FILTER]} (filter is LangChain's name for where)"
        )
    out = {k: v for k, v in given.items() if k in accepted}
    if FILTER in given:
        if "where" in given:
            raise TypeError(
                f"{owner} got both filter and where in {where}; give one (filter is "
                "LangChain's name for where)"
            )
        out["where"] = check_filter(given[FILTER], FILTER)
    elif "where" in out:
        out["where"] = check_filter(out["where"], "where")
    return out


def layered(names: tuple[str, ...], *layers: Mapping[str, Any]) -> dict[str, Any]:
    """The settings ``names`` of one search: each of ``layers`` (the owner's settings first,
    then ``search_kwargs``, then the call's keywords) overrides the ones before it, name by
    name. ``reranker_options`` belong to the reranker of their layer: a layer that names a
    ``reranker`` without ``reranker_options`` drops the options of the layers before it (a
    call's ``reranker="none"`` or ``reranker="identity"`` never gets the options the
    retriever's ``mmr`` was given)."""
    out: dict[str, Any] = {}
    for layer in layers:
        if "reranker" in layer and "reranker_options" not in layer:
            out["reranker_options"] = None
        out.update((name, layer[name]) for name in names if name in layer)
    return out
