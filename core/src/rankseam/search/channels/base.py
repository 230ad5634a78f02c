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
come from ``request.reader`` (the store's snapshot, a
:class:`~rankseam.plugin.stores.StoreReader`); a source that knows a memory by its
:class:`~rankseam.types.MemoryRef` converts it with ``request.reader.resolve(ref)``. Higher
scores are better; equal scores share a rank in fusion.

The built-in sources (lexical, vector, importance) run on every store: ``request.reader`` is a
:class:`~rankseam.plugin.stores.StoreReader`, the whole read contract, whose channel methods a
store implements in its own query language. A plugin may also register a source for one store only
(``store="NAME"``), which may use further methods of that store's reader.

**Reader capabilities.** A source may declare the reader protocols it reads, ``reads`` (a tuple
of ``runtime_checkable`` Protocol classes; the built-in lexical channel declares
``(LexicalReader,)``). When a Memory opens its store, every declared protocol that is not part
of the whole read contract is checked on the store's snapshot, and a store that lacks one is
refused with a :class:`~rankseam.errors.ConfigurationError` naming the channel and the store.
A source that declares nothing reads only the whole read contract.

**Stages.** A source runs at one of two stages, its optional ``stage`` (default
:data:`RETRIEVE`):

- ``"retrieve"``: it answers for the query, before fusion (everything above);
- ``"context"`` (:data:`CONTEXT`): it runs after fusion, over the fused pool: ``request.pool``
  holds the pool's keys with their fused scores, best first, and the source answers keys with a
  score on the same scale (at most ``request.k``: the pool size). The host gives each answered
  key ``max(its fused score, the answered score)`` (a key not in the pool enters with the
  answered score), adds the source's name to its ``matched_by``, orders the pool again and cuts
  it to the pool size (:func:`rankseam.search.fusion.widen`). Keys that are not live in the
  snapshot are dropped. The built-in :mod:`.context` channel brings in the neighbours of the
  strongest candidates this way. Fusion's ``weights`` and ``scales`` do not apply to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs
import numpy as np

from rankseam.embedding import EmbedderDescriptor
from rankseam.store.filters import Filter
from rankseam.store.readers import ScoredKey, ScoredKeys

if TYPE_CHECKING:
    from rankseam.store.contract import StoreReader

__all__ = [
    "CONTEXT",
    "RETRIEVE",
    "STAGES",
    "CandidateSource",
    "ScoredKey",
    "SourceRequest",
    "channel_reads",
    "channel_stage",
    "over_fetch",
]

#: The stage of a source that answers for the query, before fusion (the default).
RETRIEVE = "retrieve"
#: The stage of a source that answers over the fused pool, after fusion.
CONTEXT = "context"
#: The stages a source may declare (its optional ``stage``).
STAGES = (RETRIEVE, CONTEXT)


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
    #: The search's filter, checked (``rankseam.plugin.stores.Filter``), or None: an admitting
    #: source answers only row keys of revisions that pass it, applied in its own store query
    #: (before its list is cut to ``k``), never afterwards.
    where: Filter | None = None
    #: For a ``"context"``-stage source: the fused pool, keys and fused scores, best first.
    pool: ScoredKeys = attrs.field(factory=ScoredKeys.empty)


@runtime_checkable
class CandidateSource(Protocol):
    """What a candidate source implements (see the module docstring)."""

    admits: bool
    needs_query_vector: bool

    def candidates(self, request: SourceRequest, /) -> Sequence[ScoredKey]: ...


def channel_reads(source: object) -> tuple[type, ...]:
    """The reader protocols ``source`` declares it reads (its optional ``reads``; see the module
    docstring), checked: a tuple of Protocol classes."""
    reads = getattr(source, "reads", ())
    if not isinstance(reads, tuple) or not all(isinstance(p, type) for p in reads):
        raise TypeError(
            f"{type(source).__name__}.reads must be a tuple of reader Protocol classes "
            f"(e.g. (LexicalReader,)), not {reads!r}"
        )
    return reads


def channel_stage(source: object) -> str:
    """The stage ``source`` declares (its optional ``stage``; see the module docstring),
    checked: one of :data:`STAGES`."""
    stage = getattr(source, "stage", RETRIEVE)
    if stage not in STAGES:
        raise TypeError(
            f"{type(source).__name__}.stage must be one of {', '.join(map(repr, STAGES))}, "
            f"not {stage!r}"
        )
    return str(stage)
