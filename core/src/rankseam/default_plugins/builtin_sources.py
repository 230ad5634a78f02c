"""Built-in candidate sources of the embedded store: lexical, vector, importance. They run on
the SQLite store only (``store="sqlite"``): they use its reader's FTS5 and vector queries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankseam.plugin import CandidateSourceRegister, hookimpl
from rankseam.retrieval.importance import ImportanceSource
from rankseam.retrieval.lexical import LexicalSource
from rankseam.retrieval.vector import VectorSource


def _lexical(options: Mapping[str, Any], context: object) -> LexicalSource:
    return LexicalSource.from_options(options)


def _vector(options: Mapping[str, Any], context: object) -> VectorSource:
    return VectorSource.from_options(options)


def _importance(options: Mapping[str, Any], context: object) -> ImportanceSource:
    return ImportanceSource.from_options(options)


@hookimpl
def register_candidate_sources(register: CandidateSourceRegister) -> None:
    register(
        "lexical",
        _lexical,
        summary="FTS5 BM25 over OR-joined quoted query terms",
        options=("stopwords", "max_df", "max_postings", "max_scoring_postings", "budget_from"),
        store="sqlite",
    )
    register(
        "vector",
        _vector,
        summary="cosine over stored vectors of the active embedder",
        options=("min_score",),
        store="sqlite",
    )
    register(
        "importance",
        _importance,
        summary="importance prior over admitted candidates",
        options=(),
        store="sqlite",
    )
