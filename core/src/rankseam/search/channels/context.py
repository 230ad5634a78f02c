"""The context channel: the neighbours of the strongest candidates of the pool, in their
conversation, brought into the coarse pool (docs/store.md, "The context stage").

It is a channel of the ``context`` stage (``rankseam.plugin.channels``: ``stage =
"context"``): it runs after fusion, over the fused pool. For each of the ``strongest``
candidates (the pool's best, by fused score) that belongs to a thread, the store's reader
answers up to ``before`` memories just before it and ``after`` just after it in that thread
(``rankseam.plugin.stores.NeighbourReader``, from the search's own snapshot, by index ranges).
Each neighbour is answered with ``weight`` × the fused score of the candidate it neighbours
(its best such score); the host gives it the larger of that and its own fused score (0 when it
was not in the pool), adds ``context`` to its ``matched_by`` and orders the pool again. The
stage drops no fused candidate and adds at most the pool size: the pool at most doubles (with
the defaults, at most 30 neighbours join a pool of 30). So a short reply ("Yes, last
Tuesday!") is found through the question it answers, and a memory without a thread (a
document, an extracted fact) brings nothing.

The defaults (the 10 strongest, one neighbour before and two after, weight 0.8) were chosen on the
development data: docs/benchmarks.md, "Conversation structure", has the sweep and its figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from rankseam.plugin import CandidateSourceRegister, hookimpl, option, parse_options
from rankseam.plugin.channels import ScoredKey, SourceRequest, thread_neighbours
from rankseam.plugin.stores import NeighbourReader, ScoredKeys

__all__ = ["ContextOptions", "ContextSource"]

#: Most pool candidates whose neighbours are read (the largest pool).
MAX_STRONGEST = 200
#: Most neighbours read on each side of a candidate.
MAX_SIDE = 20


@attrs.frozen
class ContextOptions:
    """The options of the ``context`` channel (``[sources.context]``)."""

    strongest: int = option(
        10, ge=1, le=MAX_STRONGEST, help="how many of the pool's best candidates bring neighbours"
    )
    before: int = option(
        1, ge=0, le=MAX_SIDE, help="neighbours just before each such candidate in its thread"
    )
    after: int = option(
        2, ge=0, le=MAX_SIDE, help="neighbours just after each such candidate in its thread"
    )
    weight: float = option(
        0.8,
        ge=0,
        le=1,
        help="a neighbour's score: this times the score of the candidate it neighbours",
    )


class ContextSource:
    """The neighbours of the ``strongest`` best candidates, each scored ``weight`` × the
    candidate's fused score (see the module docstring)."""

    admits = True
    needs_query_vector = False
    stage = "context"
    reads = (NeighbourReader,)

    def __init__(
        self, *, strongest: int = 10, before: int = 1, after: int = 2, weight: float = 0.8
    ) -> None:
        self.strongest = strongest
        self.before = before
        self.after = after
        self.weight = weight

    def candidates(self, request: SourceRequest, /) -> Sequence[ScoredKey]:
        pool = request.pool
        if not len(pool) or not (self.before or self.after) or not self.weight:
            return ScoredKeys.empty()
        top = pool.row_keys[: self.strongest].tolist()
        # the reader offers NeighbourReader (checked when the store was opened); a neighbour
        # the search's filter rejects is left out, as every channel's own candidates are
        near = thread_neighbours(request.reader, top, self.before, self.after, where=request.where)
        if not near.placed:  # none of them in a thread (a store without conversations)
            return ScoredKeys.empty()
        scores = dict(zip(top, pool.scores[: len(top)].tolist(), strict=True))
        found: dict[int, float] = {}
        for key, placed in near.placed.items():
            score = self.weight * scores[key]
            for _offset, neighbour in placed:
                if score > found.get(neighbour, -1.0):
                    found[neighbour] = score
        if not found:
            return ScoredKeys.empty()
        # best first, ties by key; at most the pool size
        ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))[: request.k]
        return ScoredKeys.of(ranked)

    @classmethod
    def from_options(cls, options: ContextOptions | Mapping[str, Any]) -> ContextSource:
        """The source of ``[sources.context]`` options (checked, or a table to check)."""
        if not isinstance(options, ContextOptions):
            options = parse_options(ContextOptions, options, "sources.context")
        return cls(**attrs.asdict(options, recurse=False))


def _context(options: ContextOptions, context: object) -> ContextSource:
    return ContextSource.from_options(options)


@hookimpl
def register_candidate_sources(register: CandidateSourceRegister) -> None:
    """Registers this channel, on every store whose reader offers ``NeighbourReader`` (both
    built-in stores; another store is told at open time when it lacks it)."""
    register(
        "context",
        _context,
        summary="the neighbours of the pool's strongest candidates in their thread",
        options=ContextOptions,
    )
