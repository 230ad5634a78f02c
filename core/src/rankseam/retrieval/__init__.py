"""Built-in candidate sources (lexical, vector, importance) and fusion. See docs/store.md."""

from rankseam.retrieval.base import CandidateSource, ScoredKey, SourceRequest, over_fetch
from rankseam.retrieval.fusion import DEFAULT_WEIGHTS, RRF_K, ChannelList, Fused, fuse
from rankseam.retrieval.importance import ImportanceSource
from rankseam.retrieval.lexical import LexicalSource, match_expression, query_terms
from rankseam.retrieval.vector import VectorSource

__all__ = [
    "DEFAULT_WEIGHTS",
    "RRF_K",
    "CandidateSource",
    "ChannelList",
    "Fused",
    "ImportanceSource",
    "LexicalSource",
    "ScoredKey",
    "SourceRequest",
    "VectorSource",
    "fuse",
    "match_expression",
    "over_fetch",
    "query_terms",
]
