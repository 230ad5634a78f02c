"""Recording the feature rows of real searches: what training reads.

:class:`PoolRecorder` is a reranker object for ``Memory.search(query, reranker=recorder)``:
it asks the host for exactly what the ``learned`` reranker asks for (the neighbour window of
:mod:`rankseam_learned.features`, the stored vectors), computes the rows with the same
:func:`~rankseam_learned.features.compute`, keeps them as a :class:`RecordedPool`, and
answers the coarse order (so the search's hits are the default's). Rows recorded this way are
the rows the reranker scores at search time: training and serving cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from rankseam.types import Candidate, RerankDecision
from rankseam_learned.features import FEATURE_SET, NEIGHBOUR_WINDOW, compute

__all__ = ["PoolRecorder", "RecordedPool"]


@attrs.frozen(eq=False)
class RecordedPool:
    """One search's pool: the query, its rows (``(n, F)``, coarse order), and per candidate
    the memory id, the source group (``derived_from`` or the id itself) and the thread."""

    query: str
    rows: np.ndarray
    memory_ids: tuple[str, ...]
    groups: tuple[str, ...]
    threads: tuple[str | None, ...]
    feature_set: str = FEATURE_SET


@attrs.define
class PoolRecorder:
    """A reranker object that records each pool it is handed (see the module docstring)."""

    policy_id: ClassVar[str] = "rankseam.rerank.learned-recorder.v1"
    needs_event_loop: ClassVar[bool] = False
    needs_neighbours: ClassVar[tuple[int, int]] = NEIGHBOUR_WINDOW
    needs_embeddings: ClassVar[bool] = True
    deterministic: ClassVar[bool] = True

    pools: list[RecordedPool] = attrs.field(factory=list)

    @property
    def descriptor(self) -> dict[str, Any]:
        return {"name": "learned-recorder", "feature_set": FEATURE_SET}

    async def rerank(
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision:
        neighbours = getattr(candidates, "neighbours", None)
        rows = compute(query, candidates, neighbours)
        self.pools.append(
            RecordedPool(
                query=query,
                rows=rows,
                memory_ids=tuple(c.ref.memory_id for c in candidates),
                groups=tuple(
                    c.derived_from if c.derived_from is not None else c.ref.memory_id
                    for c in candidates
                ),
                threads=tuple(c.thread for c in candidates),
            )
        )
        return RerankDecision(tuple(range(1, min(limit, len(candidates)) + 1)))
