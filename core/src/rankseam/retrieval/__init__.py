"""Built-in candidate sources (lexical, vector, importance) and fusion. See docs/store.md."""

from rankseam.retrieval.base import CandidateSource, ScoredKey, SourceRequest, over_fetch
from rankseam.retrieval.fusion import (
    DEFAULT_FUSION,
    FUSION_METHODS,
    RRF_K,
    ChannelList,
    Fused,
    ScoreSpec,
    fuse,
    score_spec_of,
)
from rankseam.retrieval.importance import ImportanceSource
from rankseam.retrieval.lexical import LexicalSource, match_expression, query_terms
from rankseam.retrieval.vector import VectorSource

__all__ = [
    "DEFAULT_FUSION",
    "FUSION_METHODS",
    "RRF_K",
    "CandidateSource",
    "ChannelList",
    "Fused",
    "ImportanceSource",
    "LexicalSource",
    "ScoreSpec",
    "ScoredKey",
    "SourceRequest",
    "VectorSource",
    "fuse",
    "match_expression",
    "over_fetch",
    "query_terms",
    "score_spec_of",
]
