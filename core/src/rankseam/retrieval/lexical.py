"""The lexical channel: FTS5 BM25 over a natural-language query treated as a bag of terms.

The user's text never reaches FTS5 query syntax: it is split into word tokens (``\\w+``,
Unicode-aware), lower-cased, stop words dropped, and each remaining term is wrapped in double
quotes (an FTS5 string, in which nothing is an operator) and the terms are OR-joined. So
``NEAR``, ``*``, ``-``, ``:``, ``^``, quotes and unbalanced parentheses are all plain text.
OR-joining (not FTS5's implicit AND) lets a question match memories that share only some of
its words; BM25 ranks those that share more, and rarer, words first.

In a store of at least :data:`PRUNE_MIN_ROWS` live memories, terms found in more than
``max_df`` (default 0.2) of them are dropped from the query. BM25 weighs such terms little (an
inverse document frequency of at most ln 4 = 1.4, against 5–10 for the content words of a
question; above one half FTS5 clamps it to almost zero), but scoring their long posting lists
is what makes an OR query slow at 100k memories. Measured: LoCoMo recall@10 of the lexical
channel 0.669 with ``max_df = 1`` (off), 0.668 with 0.2; at 100k synthetic memories, p95 of
searches whose words are often frequent went from 82 ms (0.5) to 38 ms (0.2).

Relative pruning does not bound the work in a large store: at a million memories a term in
5 % of them still has 50 000 postings, and FTS5 scores every row any term matches. So the
terms also share a **posting budget** (``max_postings``, default :data:`MAX_POSTINGS`): the
question's terms are taken rarest first while their document frequencies sum to at most the
budget (the rarest term is always kept); the more frequent ones are dropped. A store of up to
that many memories is never affected (one term cannot exceed it), so the LoCoMo and SciFact
dev figures are unchanged; docs/store.md measures its effect at 100k and 1M memories.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

from rankseam.errors import ConfigurationError
from rankseam.plugin import (
    EmbedderDescriptor,
    ScoredKey,
    ScoreSpec,
    SourceRequest,
    check_options,
    is_real,
)

__all__ = ["MAX_TERMS", "STOPWORDS", "LexicalSource", "match_expression", "query_terms"]

#: Most terms kept from one query (the first ones, after stop words are dropped).
MAX_TERMS = 32
#: Frequent-term pruning applies from this many live memories on.
PRUNE_MIN_ROWS = 1000
#: Default posting budget of one query (see the module docstring).
MAX_POSTINGS = 30_000

_TOKEN = re.compile(r"\w+", re.UNICODE)


class _FtsReader(Protocol):
    """What this source uses of the SQLite store's reader (it runs on that store only)."""

    def live_count(self) -> int: ...

    def document_frequency(self, term: str, cap: int, /) -> int: ...

    def lexical(self, match: str, namespace: str, k: int, /) -> list[tuple[int, float]]: ...


#: English function words and question words; they match most memories and rank none.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t d ll m re ve don didn doesn isn wasn weren won wouldn shouldn couldn also ever
    """.split()
)


def query_terms(query: str, *, stopwords: bool = True) -> list[str]:
    """Distinct terms of ``query`` in order of first appearance (at most :data:`MAX_TERMS`)."""
    seen: dict[str, None] = {}
    for token in _TOKEN.findall(query.lower()):
        if len(token) < 2 and not token.isdigit():
            continue
        if stopwords and token in STOPWORDS:
            continue
        seen.setdefault(token, None)
    terms = list(seen)
    if not terms and stopwords:
        return query_terms(query, stopwords=False)
    return terms[:MAX_TERMS]


def match_expression(query: str, *, stopwords: bool = True) -> str | None:
    """The FTS5 MATCH string for ``query``: quoted terms joined with OR; ``None`` if the query
    has no word at all (the lexical channel then returns nothing)."""
    terms = query_terms(query, stopwords=stopwords)
    return _or_joined(terms) if terms else None


def _fts5_string(term: str) -> str:
    """``term`` as an FTS5 string: in double quotes, inner quotes doubled; nothing in it is an
    operator."""
    return '"' + term.replace('"', '""') + '"'


def _or_joined(terms: Sequence[str]) -> str:
    return " OR ".join(_fts5_string(t) for t in terms)


class LexicalSource:
    """FTS5 BM25; score = ``-bm25`` (higher is better, unbounded): fusion divides it by the
    query's best BM25 and counts it at weight 1, the reference the other weights are set
    against."""

    admits = True
    needs_query_vector = False

    def __init__(
        self, *, stopwords: bool = True, max_df: float = 0.2, max_postings: int = MAX_POSTINGS
    ) -> None:
        self.stopwords = stopwords
        self.max_df = max_df
        self.max_postings = max_postings

    def score_spec(self, embedder: EmbedderDescriptor | None, /) -> ScoreSpec:
        return ScoreSpec(scale="max", weight=1.0)

    def candidates(self, request: SourceRequest, /) -> Sequence[ScoredKey]:
        reader = cast(_FtsReader, request.reader)
        terms = query_terms(request.query, stopwords=self.stopwords)
        if terms:
            rows = reader.live_count()
            if rows >= PRUNE_MIN_ROWS and (self.max_df < 1.0 or rows > self.max_postings):
                terms = self._affordable(reader, terms, rows)
        if not terms:
            return []
        return reader.lexical(_or_joined(terms), request.namespace, request.k)

    def _affordable(self, reader: _FtsReader, terms: list[str], rows: int) -> list[str]:
        """``terms`` without those above ``max_df`` and, rarest first, those that would take
        the query over its posting budget (in the question's order)."""
        cap = int(self.max_df * rows) if self.max_df < 1.0 else rows
        probe = min(cap, self.max_postings) + 1  # counting stops there: the probe is bounded
        df = {t: reader.document_frequency(_fts5_string(t), probe) for t in terms}
        if all(n >= probe for n in df.values()) and probe <= cap:
            # every term is over the budget: count them up to max_df to keep the rarest
            df = {t: reader.document_frequency(_fts5_string(t), cap + 1) for t in terms}
        budget = self.max_postings
        kept: set[str] = set()
        for term in sorted((t for t in terms if df[t] <= cap), key=lambda t: (df[t], t)):
            if df[term] <= budget or not kept:
                kept.add(term)
                budget -= df[term]
        return [t for t in terms if t in kept]

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> LexicalSource:
        check_options(
            "candidate source 'lexical'", options, ["stopwords", "max_df", "max_postings"]
        )
        stop = options.get("stopwords", True)
        if not isinstance(stop, bool):
            raise ConfigurationError(
                f"[sources.lexical] stopwords must be true or false, got {stop!r}"
            )
        max_df = options.get("max_df", 0.2)
        if not is_real(max_df) or not 0 < max_df <= 1:
            raise ConfigurationError(
                f"[sources.lexical] max_df must be a number in (0, 1], got {max_df!r}"
            )
        postings = options.get("max_postings", MAX_POSTINGS)
        if isinstance(postings, bool) or not isinstance(postings, int) or postings < 1:
            raise ConfigurationError(
                f"[sources.lexical] max_postings must be an integer >= 1, got {postings!r}"
            )
        return cls(stopwords=stop, max_df=float(max_df), max_postings=postings)
