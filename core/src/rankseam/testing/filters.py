"""Generated filters and memories for property tests of the filter contract (docs/filters.md):
a store's filtered search and listing must answer what the reference meaning
(``matches``) answers over the same memories.

:func:`filters` draws filter mappings as a user writes them (``where=``), over a small set of
keys and values so that drawn filters and drawn memories meet often; :func:`metadata_values`
draws the metadata of a memory from the same keys and values (including the values no filter
equals: lists, objects, ``null``).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["FILTER_KEYS", "filters", "metadata_values", "thread_names"]

#: The metadata keys drawn filters and memories share (one of them named like a field, one
#: with characters that are special in JSON paths and SQL).
FILTER_KEYS = ("topic", "year", "score", "flag", 'we"ird.key', "thread")

_TEXT = st.sampled_from(["food", "travel", "Food", "", "2024-01-05", "é", "o'clock"])
_NUMBER = st.sampled_from([0, 1, 2, 2.5, -1, 2020, 2024, 10**6])
_SCALAR = st.one_of(_TEXT, _NUMBER, st.booleans())
_ODD = st.sampled_from([None, [1, 2], {"a": 1}, []])


def thread_names() -> st.SearchStrategy[str | None]:
    """A memory's thread, or none."""
    return st.sampled_from([None, "t1", "t2", "t3"])


def metadata_values() -> st.SearchStrategy[dict[str, Any]]:
    """The metadata of one memory over :data:`FILTER_KEYS`."""
    return st.dictionaries(st.sampled_from(FILTER_KEYS), st.one_of(_SCALAR, _ODD), max_size=4)


def _metadata_key() -> st.SearchStrategy[str]:
    return st.sampled_from(FILTER_KEYS).map(lambda k: f"metadata.{k}" if k == "thread" else k)


def _condition() -> st.SearchStrategy[dict[str, Any]]:
    metadata = st.one_of(
        st.builds(lambda k, v: {k: v}, _metadata_key(), _SCALAR),
        st.builds(
            lambda k, op, v: {k: {op: v}},
            _metadata_key(),
            st.sampled_from(["$eq", "$ne"]),
            _SCALAR,
        ),
        st.builds(
            lambda k, op, v: {k: {op: v}},
            _metadata_key(),
            st.sampled_from(["$in", "$nin"]),
            st.lists(_SCALAR, min_size=1, max_size=4),
        ),
        st.builds(
            lambda k, op, v: {k: {op: v}},
            _metadata_key(),
            st.sampled_from(["$gt", "$gte", "$lt", "$lte"]),
            st.one_of(_TEXT, _NUMBER),
        ),
        st.builds(lambda k, v: {k: {"$exists": v}}, _metadata_key(), st.booleans()),
    )
    fields = st.one_of(
        st.builds(lambda t: {"thread": t}, st.sampled_from(["t1", "t2", "t3"])),
        st.builds(lambda v: {"thread": {"$exists": v}}, st.booleans()),
        st.builds(
            lambda op, v: {"importance": {op: v}},
            st.sampled_from(["$gt", "$gte", "$lt", "$lte", "$eq", "$ne"]),
            st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]),
        ),
        st.builds(
            lambda op, v: {"position": {op: v}},
            st.sampled_from(["$gt", "$gte", "$lt", "$lte"]),
            st.sampled_from([0, 1, 2, 3]),
        ),
    )
    return st.one_of(metadata, fields)


def filters(max_leaves: int = 6) -> st.SearchStrategy[dict[str, Any]]:
    """Filter mappings as a user writes them: conditions, nested in ``$and`` / ``$or``."""
    return st.recursive(
        _condition(),
        lambda inner: st.one_of(
            st.builds(lambda parts: {"$and": parts}, st.lists(inner, min_size=1, max_size=3)),
            st.builds(lambda parts: {"$or": parts}, st.lists(inner, min_size=1, max_size=3)),
        ),
        max_leaves=max_leaves,
    )
