"""The search settings the LangChain classes share: which keywords a retriever call or a
vector store search takes, and LangChain's ``filter`` read as rankseam's ``where``
(docs/filters.md). One place, so that the retriever and the vector store read a filter
exactly alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankseam.plugin.adapters import FILTER_ARGUMENTS, check_filter

__all__ = ["CALL_ARGUMENTS", "FILTER", "SEARCH_ARGUMENTS", "search_settings"]

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
