"""The lexical channel: BM25 over a natural-language query treated as a bag of terms. It runs on
every store through the reader's lexical methods (``rankseam.plugin.stores.LexicalReader``): this
module decides which terms are searched and how the scores are fused; the store computes BM25
in its own query language (the SQLite store: FTS5; rankseam-postgres: ``tsvector``).

The user's text never reaches a query language: it is split into word tokens (``\\w+``,
Unicode-aware), lower-cased and stop words dropped (:func:`query_terms`); the store is handed
these plain words (:class:`~rankseam.plugin.stores.LexicalQuery`) and treats every one as text,
never as an operator, so ``NEAR``, ``*``, ``-``, ``:``, ``^``, quotes and unbalanced parentheses
are all plain text. The terms are OR-joined (not AND): a question matches memories that share
only some of its words; BM25 ranks those that share more, and rarer, words first.

In a store of at least :data:`PRUNE_MIN_ROWS` live memories, terms found in more than
``max_df`` (default 0.2) of them are dropped from the query. BM25 weighs such terms little (an
inverse document frequency of at most ln 4 = 1.4, against 5–10 for the content words of a
question; above one half FTS5 clamps it to almost zero), but scoring their long posting lists
is what makes an OR query slow at 100k memories. Live memories and document frequencies are
counted over what the store's text index covers (``LexicalReader.live_count``). Measured:
LoCoMo recall@10 of the lexical channel 0.669 with ``max_df = 1`` (off), 0.668 with 0.2; at
100k synthetic memories, p95 of searches whose words are often frequent went from 82 ms (0.5)
to 38 ms (0.2).

Relative pruning does not bound the work in a large store: at a million memories a term in
5 % of them still has 50 000 postings, and FTS5 computes BM25 for every row any term of an OR
query matches (about a microsecond each). So in a store of more than ``budget_from`` (default
:data:`BUDGET_FROM`) live memories the question's terms share two **posting budgets**, taken
rarest first:

- terms whose document frequencies sum to at most ``max_postings`` (default
  :data:`MAX_POSTINGS`; the rarest term is always one) **find** memories: every memory that
  holds one of them is scored;
- the more frequent ones, while theirs sum to at most ``max_scoring_postings`` (default
  :data:`MAX_SCORING_POSTINGS`), only **score**: each adds its BM25 to the memories the
  finding terms found (exactly what it would add in the full OR query), but a memory that
  holds only frequent terms is not found. When even the rarest term is over ``max_postings``,
  a memory must hold it and one of the scoring terms;
- terms beyond both budgets are dropped.

The memories found are ranked by the BM25 of all kept terms, as the full OR query would rank
them. What is given up is the memories that hold frequent terms only; they rank low in a
large store, where the rare words of a question carry its meaning. Stores of at most
``budget_from`` memories are searched with every term under ``max_df`` (an OR query over
20 000 short memories is scored in a few milliseconds), so the LoCoMo and SciFact dev
figures do not depend on the budgets; docs/store.md measures them at 100k and 1M memories.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from rankseam.plugin import CandidateSourceRegister, hookimpl, option, parse_options
from rankseam.plugin.channels import (
    MAX_TERMS,
    STOPWORDS,
    ScoredKey,
    ScoreSpec,
    SourceRequest,
    query_terms,
)
from rankseam.plugin.embedders import EmbedderDescriptor
from rankseam.plugin.stores import LexicalQuery, LexicalReader

__all__ = [
    "BUDGET_FROM",
    "MAX_POSTINGS",
    "MAX_SCORING_POSTINGS",
    "MAX_TERMS",
    "STOPWORDS",
    "LexicalOptions",
    "LexicalSource",
    "query_terms",
]

#: Frequent-term pruning applies from this many live memories on.
PRUNE_MIN_ROWS = 1000
#: Default posting budget of the terms that find memories (see the module docstring).
MAX_POSTINGS = 5_000
#: Default posting budget of the more frequent terms that only score.
MAX_SCORING_POSTINGS = 100_000
#: Default size above which the budgets apply (live memories in the store).
BUDGET_FROM = 20_000


class LexicalSource:
    """FTS5 BM25; score = ``-bm25`` (higher is better, unbounded): fusion divides it by the
    query's best BM25 and counts it at weight 1, the reference the other weights are set
    against."""

    admits = True
    needs_query_vector = False
    reads = (LexicalReader,)

    def __init__(
        self,
        *,
        stopwords: bool = True,
        max_df: float = 0.2,
        max_postings: int = MAX_POSTINGS,
        max_scoring_postings: int = MAX_SCORING_POSTINGS,
        budget_from: int = BUDGET_FROM,
    ) -> None:
        self.stopwords = stopwords
        self.max_df = max_df
        self.max_postings = max_postings
        self.max_scoring_postings = max_scoring_postings
        self.budget_from = budget_from

    def score_spec(self, embedder: EmbedderDescriptor | None, /) -> ScoreSpec:
        return ScoreSpec(scale="max", weight=1.0)

    def candidates(self, request: SourceRequest, /) -> Sequence[ScoredKey]:
        reader = request.reader
        namespace = request.namespace
        terms = query_terms(request.query, stopwords=self.stopwords)
        scoring: list[str] = []
        over = False
        if terms:
            rows = reader.live_count(namespace)
            if rows > self.budget_from:
                terms, scoring, over = self._budgeted(reader, namespace, terms, rows)
            elif rows >= PRUNE_MIN_ROWS and self.max_df < 1.0:
                cap = int(self.max_df * rows)
                terms = [
                    t for t in terms if reader.document_frequency(namespace, t, cap + 1) <= cap
                ]
        if not terms:
            return []
        # when even the rarest term is over the budget, a memory must also hold a scoring
        # term (that query scores only the memories that hold both)
        return reader.lexical(
            LexicalQuery(
                namespace,
                request.k,
                terms,
                scoring,
                require_scoring=bool(scoring and over),
                where=request.where,
            )
        )

    def _budgeted(
        self, reader: LexicalReader, namespace: str, terms: list[str], rows: int
    ) -> tuple[list[str], list[str], bool]:
        """The terms that find memories and those that only score (each in the question's
        order), without those above ``max_df``, rarest first within the two budgets; and
        whether the rarest term alone is over ``max_postings``."""
        cap = int(self.max_df * rows) if self.max_df < 1.0 else rows
        budget, scoring_budget = self.max_postings, self.max_scoring_postings
        probe = min(cap, budget + scoring_budget) + 1  # counting stops there: bounded
        df = {t: reader.document_frequency(namespace, t, probe) for t in terms}
        if all(n >= probe for n in df.values()) and probe <= cap:
            # every term is over the budgets: count them up to max_df to find the rarest
            df = {t: reader.document_frequency(namespace, t, cap + 1) for t in terms}
        finding: set[str] = set()
        scoring: set[str] = set()
        for term in sorted((t for t in terms if df[t] <= cap), key=lambda t: (df[t], t)):
            if not finding or (df[term] <= budget and not scoring):
                finding.add(term)
                budget -= df[term]
            elif df[term] <= scoring_budget:
                scoring.add(term)
                scoring_budget -= df[term]
        over = budget < 0  # the rarest term alone overdrew the budget
        return [t for t in terms if t in finding], [t for t in terms if t in scoring], over

    @classmethod
    def from_options(cls, options: LexicalOptions | Mapping[str, Any]) -> LexicalSource:
        """The source of ``[sources.lexical]`` options (checked, or a table to check)."""
        if not isinstance(options, LexicalOptions):
            options = parse_options(LexicalOptions, options, "sources.lexical")
        return cls(**attrs.asdict(options, recurse=False))


@attrs.frozen
class LexicalOptions:
    """The options of the ``lexical`` source (``[sources.lexical]``; the module docstring
    explains pruning and the posting budgets)."""

    stopwords: bool = option(True, help="drop English stop words from the query")
    max_df: float = option(
        0.2, gt=0, le=1, help="drop terms found in more than this share of the memories"
    )
    max_postings: int = option(
        MAX_POSTINGS, ge=1, help="posting budget of the terms that find memories (large stores)"
    )
    max_scoring_postings: int = option(
        MAX_SCORING_POSTINGS, ge=0, help="posting budget of the frequent terms that only score"
    )
    budget_from: int = option(
        BUDGET_FROM, ge=0, help="live memories above which the posting budgets apply"
    )


def _lexical(options: LexicalOptions, context: object) -> LexicalSource:
    return LexicalSource.from_options(options)


@hookimpl
def register_candidate_sources(register: CandidateSourceRegister) -> None:
    """Registers this channel, on every store (its reader protocol is part of every store's)."""
    register(
        "lexical",
        _lexical,
        summary="BM25 over OR-joined query terms (the store's full-text index)",
        options=LexicalOptions,
    )
