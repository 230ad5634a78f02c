"""Built-in candidate sources: lexical, vector, importance. They run on every store, through the
reader protocols every store implements (``rankseam.plugin.StoreReader``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankseam.plugin import CandidateSourceRegister, hookimpl
from rankseam.retrieval.importance import ImportanceSource
from rankseam.retrieval.lexical import LexicalOptions, LexicalSource
from rankseam.retrieval.vector import VectorOptions, VectorSource


def _lexical(options: LexicalOptions, context: object) -> LexicalSource:
    return LexicalSource.from_options(options)


def _vector(options: VectorOptions, context: object) -> VectorSource:
    return VectorSource.from_options(options)


def _importance(options: Mapping[str, Any], context: object) -> ImportanceSource:
    return ImportanceSource.from_options(options)


@hookimpl
def register_candidate_sources(register: CandidateSourceRegister) -> None:
    register(
        "lexical",
        _lexical,
        summary="BM25 over OR-joined query terms (the store's full-text index)",
        options=LexicalOptions,
    )
    register(
        "vector",
        _vector,
        summary="cosine over stored vectors of the active embedder",
        options=VectorOptions,
    )
    register(
        "importance",
        _importance,
        summary="importance prior over admitted candidates",
        options=(),
    )
