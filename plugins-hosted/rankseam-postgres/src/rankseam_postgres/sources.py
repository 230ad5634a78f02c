"""The PostgreSQL store's candidate sources: ``lexical``, ``vector`` and ``importance``, as the
embedded store has them, in PostgreSQL's query language. They are registered for this store
only (``store="postgres"``), so ``[search] sources = ["lexical", "vector", "importance"]``
means these on a ``postgresql://`` store and the FTS5 ones on an SQLite file.

**Lexical.** The query is cut into the same bag of terms as the embedded store's (word tokens,
lower-cased, English stop words dropped, at most 32, OR-joined: a question never turns into an
AND). Each term goes through the store's text search configuration (``english``: Snowball
stemming) to its lexemes, and the live revisions of the namespace that hold any of them (the
partial GIN index) are ranked by ``ranking``:

- ``bm25`` (default): Okapi BM25 with FTS5's constants and idf (``k1 = 1.2``, ``b = 0.75``,
  ``idf = ln((N - n + 0.5) / (n + 0.5))``), term frequencies from the ``tsvector`` positions,
  document lengths in word tokens, ``N`` and the mean length per namespace (kept by every
  write), ``n`` counted per lexeme (memoised per namespace version);
- ``ts_rank_cd`` / ``ts_rank``: PostgreSQL's own ranking functions (``normalization``
  option, default 0). They know no inverse document frequency: measured on the dev sets they
  rank far below BM25 (docs/plugins/postgres.md).

``max_df`` and ``max_postings`` prune frequent lexemes as the embedded store prunes terms.

**Vector.** Cosine (inner product in L2-normalised spaces) over the namespace's live vectors of
the active embedder's space: exact below 20 000 live memories, through the space's HNSW index
above. **Importance** is the prior of the embedded store, unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rankseam.errors import ConfigurationError
from rankseam.plugin import (
    DEFAULT_FUSION_WEIGHT,
    EmbedderDescriptor,
    ScoredKey,
    ScoreSpec,
    SourceRequest,
    check_options,
    is_real,
    query_terms,
)
from rankseam_postgres.store import PostgresReader

__all__ = [
    "IMPORTANCE_WEIGHT",
    "MAX_POSTINGS",
    "PRUNE_MIN_ROWS",
    "RANKINGS",
    "PgImportanceSource",
    "PgLexicalSource",
    "PgVectorSource",
]

#: Lexical rankings (``[sources.lexical] ranking``); the first is the default.
RANKINGS = ("bm25", "ts_rank_cd", "ts_rank")
#: Frequent-lexeme pruning applies from this many live memories on (as the embedded store).
PRUNE_MIN_ROWS = 1000
#: Default posting budget of one query (as the embedded store).
MAX_POSTINGS = 30_000
#: The prior's weight in the convex fusion (as the embedded store).
IMPORTANCE_WEIGHT = 0.1


def _reader(request: SourceRequest) -> PostgresReader:
    reader = request.reader
    if not isinstance(reader, PostgresReader):
        raise ConfigurationError(
            "a PostgreSQL candidate source ran on another store's reader; it runs only on "
            "a postgresql:// store"
        )
    return reader


class PgLexicalSource:
    """Full-text search with BM25 (default) or PostgreSQL's ``ts_rank_cd`` / ``ts_rank``."""

    admits = True
    needs_query_vector = False

    def __init__(
        self,
        *,
        ranking: str = "bm25",
        normalization: int = 0,
        stopwords: bool = True,
        max_df: float = 0.2,
        max_postings: int = MAX_POSTINGS,
    ) -> None:
        self.ranking = ranking
        self.normalization = normalization
        self.stopwords = stopwords
        self.max_df = max_df
        self.max_postings = max_postings

    def score_spec(self, embedder: EmbedderDescriptor | None, /) -> ScoreSpec:
        return ScoreSpec(scale="max", weight=1.0)

    def candidates(self, request: SourceRequest, /) -> Sequence[ScoredKey]:
        reader = _reader(request)
        terms = query_terms(request.query, stopwords=self.stopwords)
        if not terms:
            return []
        weights: dict[str, float] = {}
        for lexemes in reader.lexemes(terms):
            for lex in dict.fromkeys(lexemes):
                weights[lex] = weights.get(lex, 0.0) + 1.0
        if not weights:
            return []
        rows = reader.live_count(request.namespace)
        if rows >= PRUNE_MIN_ROWS and (self.max_df < 1.0 or rows > self.max_postings):
            kept = self._affordable(reader, request.namespace, list(weights), rows)
            weights = {lex: w for lex, w in weights.items() if lex in kept}
        if self.ranking == "bm25":
            return reader.bm25(request.namespace, weights, request.k)
        return reader.ts_rank(
            request.namespace,
            list(weights),
            request.k,
            cover_density=self.ranking == "ts_rank_cd",
            normalization=self.normalization,
        )

    def _affordable(
        self, reader: PostgresReader, namespace: str, lexemes: list[str], rows: int
    ) -> set[str]:
        """``lexemes`` without those above ``max_df`` and, rarest first, those that would
        take the query over its posting budget."""
        cap = int(self.max_df * rows) if self.max_df < 1.0 else rows
        probe = min(cap, self.max_postings) + 1
        df = {x: reader.document_frequency(namespace, x, probe) for x in lexemes}
        if all(n >= probe for n in df.values()) and probe <= cap:
            df = {x: reader.document_frequency(namespace, x, cap + 1) for x in lexemes}
        budget = self.max_postings
        kept: set[str] = set()
        for lex in sorted((x for x in lexemes if df[x] <= cap), key=lambda x: (df[x], x)):
            if df[lex] <= budget or not kept:
                kept.add(lex)
                budget -= df[lex]
        return kept

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> PgLexicalSource:
        check_options(
            "candidate source 'lexical' (postgres)",
            options,
            ["ranking", "normalization", "stopwords", "max_df", "max_postings"],
        )
        ranking = options.get("ranking", "bm25")
        if ranking not in RANKINGS:
            raise ConfigurationError(
                f"[sources.lexical] ranking must be one of {', '.join(RANKINGS)}, got {ranking!r}"
            )
        norm = options.get("normalization", 0)
        if isinstance(norm, bool) or not isinstance(norm, int) or not 0 <= norm <= 63:
            raise ConfigurationError(
                f"[sources.lexical] normalization must be an integer bit mask 0..63 (see "
                f"PostgreSQL's ts_rank), got {norm!r}"
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
        return cls(
            ranking=ranking,
            normalization=norm,
            stopwords=stop,
            max_df=float(max_df),
            max_postings=postings,
        )


class PgVectorSource:
    """Cosine over the stored vectors of the active embedder's space (pgvector)."""

    admits = True
    needs_query_vector = True

    def __init__(self, *, min_score: float | None = None) -> None:
        self.min_score = min_score

    def score_spec(self, embedder: EmbedderDescriptor | None, /) -> ScoreSpec:
        weight = None if embedder is None else embedder.fusion_weight
        return ScoreSpec(scale="unit", weight=DEFAULT_FUSION_WEIGHT if weight is None else weight)

    def candidates(self, request: SourceRequest, /) -> Sequence[ScoredKey]:
        if request.query_vector is None or request.embedder is None:
            return []
        hits = _reader(request).vector(
            request.namespace, request.embedder, request.query_vector, request.k
        )
        if self.min_score is not None:
            hits = [(rid, s) for rid, s in hits if s >= self.min_score]
        return hits

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> PgVectorSource:
        check_options("candidate source 'vector' (postgres)", options, ["min_score"])
        value = options.get("min_score")
        if value is not None and not is_real(value):
            raise ConfigurationError(f"[sources.vector] min_score must be a number, got {value!r}")
        return cls(min_score=None if value is None else float(value))


class PgImportanceSource:
    """The importance prior: ranks what admitting sources found by importance."""

    admits = False
    needs_query_vector = False

    def score_spec(self, embedder: EmbedderDescriptor | None, /) -> ScoreSpec:
        return ScoreSpec(scale="unit", weight=IMPORTANCE_WEIGHT)

    def candidates(self, request: SourceRequest, /) -> Sequence[ScoredKey]:
        if not request.admitted:
            return []
        scores = _reader(request).importance(request.admitted)
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> PgImportanceSource:
        check_options("candidate source 'importance' (postgres)", options, [])
        return cls()
