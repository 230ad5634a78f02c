"""The candidate-source contract.

A candidate source is a component registered through ``register_candidate_sources``. The
search calls :meth:`CandidateSource.candidates` once per query inside the search's short read
transaction and fuses the ranked lists of all configured sources (see
:mod:`rankseam.search.fusion`).

- A source with ``admits = True`` (lexical, vector) *admits* memories: its hits enter the
  fusion, and its name appears in each hit's ``matched_by``.
- A source with ``admits = False`` (importance) is a *prior*: it only ranks what admitting
  sources already found (``request.admitted``); it never brings in a memory on its own.

A source answers ``[(row_key, score), ...]``, best first, at most ``request.k`` long. Row keys
come from ``request.reader`` (the store's snapshot, a :class:`~rankseam.plugin.StoreReader`); a
source that knows a memory by its :class:`~rankseam.types.MemoryRef` converts it with
``request.reader.resolve(ref)``. Higher scores are better; equal scores share a rank in fusion.

The built-in sources (lexical, vector, importance) run on every store: ``request.reader`` is a
:class:`~rankseam.plugin.StoreReader`, the whole read contract, whose channel methods a store
implements in its own query language. A plugin may also register a source for one store only
(``store="NAME"``), which may use further methods of that store's reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs
import numpy as np

from rankseam.embedding import EmbedderDescriptor
from rankseam.store.readers import ScoredKey

if TYPE_CHECKING:
    from rankseam.store.contract import StoreReader

__all__ = ["CandidateSource", "ScoredKey", "SourceRequest", "over_fetch"]


def over_fetch(pool: int) -> int:
    """How many candidates each source returns for a coarse pool of ``pool``."""
    return max(4 * pool, 32)


@attrs.frozen(eq=False)
class SourceRequest:
    reader: StoreReader
    namespace: str
    query: str
    k: int
    query_vector: np.ndarray | None = None
    embedder: EmbedderDescriptor | None = None
    admitted: tuple[int, ...] = ()


@runtime_checkable
class CandidateSource(Protocol):
    """What a candidate source implements (see the module docstring)."""

    admits: bool
    needs_query_vector: bool

    def candidates(self, request: SourceRequest, /) -> Sequence[ScoredKey]: ...
