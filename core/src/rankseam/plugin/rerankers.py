"""The reranker role: the Protocol a reranker implements and the seam's helpers (the pool as
the seam hands it over, building such a pool, the host's rank normalisation, the pool bound and
the default text cut). docs/plugin-api/rerankers.md says what each name is for, and
docs/writing-plugins.md ("What a reranker must do") what the host expects; a reranker
registers itself with :class:`rankseam.plugin.RerankerRegister`.

The names are defined in the host's internal modules and re-exported here, the one place a
plugin imports them from.
"""

from __future__ import annotations

from rankseam.seam import (
    DEFAULT_MAX_CHARS,
    MAX_POOL,
    CandidateViews,
    Reranker,
    make_candidates,
    normalize_ranks,
)

__all__ = [
    "DEFAULT_MAX_CHARS",
    "MAX_POOL",
    "CandidateViews",
    "Reranker",
    "make_candidates",
    "normalize_ranks",
]
