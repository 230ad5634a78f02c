"""The importance prior: ranks the memories other channels admitted by their importance.

It never admits a memory on its own (``admits = False``). Equal importances share a rank (and
add the same amount in the convex fusion, where importance counts at weight
:data:`IMPORTANCE_WEIGHT`), so a store where every memory has the default importance 0.5 is
ranked exactly as without it. It runs on every store (``rankseam.plugin.stores.ImportanceReader``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rankseam.plugin import CandidateSourceRegister, hookimpl
from rankseam.plugin.channels import ScoredKey, ScoreSpec, SourceRequest
from rankseam.plugin.embedders import EmbedderDescriptor
from rankseam.plugin.stores import ImportanceReader, ScoredKeys

__all__ = ["IMPORTANCE_WEIGHT", "ImportanceSource"]

#: The prior's weight in the convex fusion (lexical counts 1): a tie-breaker between
#: memories that match about equally well, never a reason to rank a poor match first.
IMPORTANCE_WEIGHT = 0.1


class ImportanceSource:
    admits = False
    needs_query_vector = False
    reads = (ImportanceReader,)

    def score_spec(self, embedder: EmbedderDescriptor | None, /) -> ScoreSpec:
        return ScoreSpec(scale="unit", weight=IMPORTANCE_WEIGHT)

    def candidates(self, request: SourceRequest, /) -> Sequence[ScoredKey]:
        if not request.admitted:
            return []
        scores = request.reader.importance(request.admitted)
        if not scores:
            return ScoredKeys.empty()
        keys = np.fromiter(scores, dtype=np.int64, count=len(scores))
        values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
        # best first, ties by key (as sorting by key, then stably by importance descending)
        order = np.lexsort((keys, -values))
        return ScoredKeys(keys[order], values[order])

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ImportanceSource:
        """The source; it takes no options (registered with ``options=()``, so the host
        refuses any before this is called)."""
        return cls()


def _importance(options: Mapping[str, Any], context: object) -> ImportanceSource:
    return ImportanceSource.from_options(options)


@hookimpl
def register_candidate_sources(register: CandidateSourceRegister) -> None:
    """Registers this channel, on every store (its reader protocol is part of every store's)."""
    register(
        "importance",
        _importance,
        summary="importance prior over admitted candidates",
        options=(),
    )
