"""The candidate-source role (a retrieval channel): the Protocol a channel implements, what it
receives and answers, how it declares its scores to fusion, and how the built-in lexical
channel turns a question into terms. docs/plugin-api/channels.md says what each name is for,
and docs/writing-plugins.md ("Candidate sources and embedders") how fusion reads a channel; a
channel registers itself with :class:`rankseam.plugin.CandidateSourceRegister`. The store
snapshot a channel reads (``request.reader``) is described in :mod:`rankseam.plugin.stores`.

The names are defined in the host's internal modules and re-exported here, the one place a
plugin imports them from.
"""

from __future__ import annotations

from rankseam.embedding import DEFAULT_FUSION_SCALE, DEFAULT_FUSION_WEIGHT
from rankseam.search.channels.base import CandidateSource, ScoredKey, SourceRequest
from rankseam.search.fusion import ScoreSpec
from rankseam.search.neighbours import ThreadNeighbours, thread_neighbours
from rankseam.search.terms import MAX_TERMS, STOPWORDS, query_terms

__all__ = [
    "DEFAULT_FUSION_SCALE",
    "DEFAULT_FUSION_WEIGHT",
    "MAX_TERMS",
    "STOPWORDS",
    "CandidateSource",
    "ScoreSpec",
    "ScoredKey",
    "SourceRequest",
    "ThreadNeighbours",
    "query_terms",
    "thread_neighbours",
]
