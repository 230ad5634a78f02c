"""The learned reranker's features: one row per pool candidate, from the pool alone.

**The API the training code uses (stable; a change bumps** :data:`FEATURE_SET` **):**

- :data:`FEATURE_SET` (``"pool-v1"``) and :data:`FEATURES`, the column names in order; a model
  file names both, and loading refuses a model of another feature set.
- :func:`compute` ``(query, candidates, neighbours=None) -> (n, F) float64``: the rows of one
  pool. ``candidates`` is the pool in coarse order (the seam's ``CandidateViews`` or any
  sequence of :class:`rankseam.types.Candidate`); ``neighbours`` is a callable ``i -> tuple of
  rankseam.types.Neighbour`` (``candidates.neighbours`` when the reranker declared
  ``needs_neighbours = NEIGHBOUR_WINDOW``), or ``None`` (the neighbourhood features are then
  0). Vectors are read when the views carry them (``needs_embeddings = True``).
- :data:`PAIR_FEATURES` and :func:`compute_pairs` ``(query, texts) -> (m, P)``: the columns
  that need only the query and one text (what a decision backend sees: no pool, no channel
  scores). ``compute(...)[:, PAIR_INDEX]`` equals ``compute_pairs(query, texts of the pool)``:
  a decision head trained on those columns of pool rows scores single requests the same way.
- :class:`rankseam_learned.pools.PoolRecorder`: a reranker object for ``Memory.search`` that
  records each search's rows, refs and sources (the same views, window and vectors the
  ``learned`` reranker gets) and answers the coarse order.

What the features are (docs/plugins/learned.md lists them):

- coarse score and rank, normalised within the pool (min-max, z, ratio to the top);
- each channel's (``lexical``, ``vector``, ``importance``, ``context``) raw score, whether it
  admitted the candidate, its rank and min-max score within the pool;
- query-term coverage: plain, by 5-letter prefix, and weighted by a within-pool IDF (the
  candidate views carry no store-wide term statistics); query bigrams (phrases), numbers and
  capitalised names found in the text; lengths;
- neighbourhood and source: whether the memory just before / after in its thread is in the
  pool and its score, the query coverage of those neighbours' texts (a short reply is found
  through the turn it answers), how much of the pool shares its thread, whether its source
  (``derived_from``) or a memory derived from it is in the pool and their scores, its place
  in its source group;
- near-duplicates within the pool: token-set Jaccard over the pool's token bit matrix (one
  matrix product, no pairwise set operations: cheap for long documents too);
- a semantic cosine when the views carry vectors: to the pool's top candidate, the largest
  to a higher candidate, to the pool's centroid.

Nothing here queries the store: the neighbours are the host's one call per search.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence

import numpy as np

from rankseam.plugin.channels import query_terms
from rankseam.plugin.rerankers import CandidateViews
from rankseam.types import Candidate, Neighbour

__all__ = [
    "CHANNELS",
    "FEATURES",
    "FEATURE_SET",
    "NEIGHBOUR_WINDOW",
    "PAIR_FEATURES",
    "PAIR_INDEX",
    "Neighbours",
    "compute",
    "compute_pairs",
]

#: The feature set's name; a change of any column's meaning or order bumps its version.
FEATURE_SET = "pool-v1"
#: The channels whose scores are features (the host's built-in channel names).
CHANNELS: tuple[str, ...] = ("lexical", "vector", "importance", "context")
#: The neighbours the features read: one before and one after each candidate.
NEIGHBOUR_WINDOW: tuple[int, int] = (1, 1)

#: ``i -> the neighbours of candidate i`` (``CandidateViews.neighbours``).
Neighbours = Callable[[int], Sequence[Neighbour]]

#: Columns computed from the query and one text alone (see the module docstring).
PAIR_FEATURES: tuple[str, ...] = (
    "query_terms",
    "term_coverage",
    "prefix_coverage",
    "term_hits",
    "bigram_coverage",
    "query_has_number",
    "number_coverage",
    "query_has_name",
    "name_coverage",
    "text_has_number",
    "log_chars",
    "log_tokens",
)

_COARSE = (
    "coarse_score",
    "coarse_rank",
    "coarse_rank_recip",
    "coarse_minmax",
    "coarse_z",
    "coarse_ratio_top",
    "pool_size",
    "importance",
)
_CHANNEL = tuple(
    f"{channel}_{what}"
    for channel in CHANNELS
    for what in ("matched", "score", "rank_norm", "minmax")
)
_POOL_TEXT = ("idf_coverage", "idf_coverage_minmax", "rel_log_tokens")
_STRUCTURE = (
    "has_thread",
    "prev_in_pool",
    "next_in_pool",
    "prev_minmax",
    "next_minmax",
    "prev_coverage",
    "next_coverage",
    "thread_share",
    "thread_best_other",
    "is_derived",
    "source_in_pool",
    "source_minmax",
    "derived_in_pool",
    "derived_best_minmax",
    "group_place",
)
_DUPLICATES = ("jaccard_max_above", "jaccard_max", "near_dup_count")
_SEMANTIC = ("has_vectors", "cos_top", "cos_max_above", "cos_centroid")

#: Every column, in order.
FEATURES: tuple[str, ...] = (
    _COARSE + _CHANNEL + PAIR_FEATURES + _POOL_TEXT + _STRUCTURE + _DUPLICATES + _SEMANTIC
)
#: Where :data:`PAIR_FEATURES` sit in a row of :data:`FEATURES`.
PAIR_INDEX: tuple[int, ...] = tuple(FEATURES.index(name) for name in PAIR_FEATURES)

_TOKEN = re.compile(r"\w+", re.UNICODE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_NAME = re.compile(r"\b[A-Z][\w'-]+")
_NEAR_DUP = 0.8
_PREFIX = 5


class _Query:
    """The query's parts every row compares with."""

    __slots__ = ("bigrams", "names", "numbers", "prefixes", "terms")

    def __init__(self, query: str) -> None:
        self.terms: tuple[str, ...] = tuple(query_terms(query))
        self.prefixes = frozenset(t[:_PREFIX] for t in self.terms)
        self.bigrams = tuple(itertools.pairwise(self.terms))
        self.numbers = frozenset(_NUMBER.findall(query))
        words = query.split()
        # a capitalised word that does not open the question (its first word is capitalised
        # anyway), and is not a stop word: a name
        rest = " ".join(words[1:])
        terms = set(self.terms)
        self.names = frozenset(m.lower() for m in _NAME.findall(rest) if m.lower() in terms)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _coverage(q: _Query, token_set: set[str]) -> float:
    if not q.terms:
        return 0.0
    return sum(t in token_set for t in q.terms) / len(q.terms)


def _pair_row(q: _Query, text: str, tokens: list[str], token_set: set[str]) -> list[float]:
    n_terms = len(q.terms)
    hits = sum(t in token_set for t in q.terms)
    prefixes = {t[:_PREFIX] for t in token_set}
    prefix_hits = sum(p in prefixes for p in q.prefixes)
    if q.bigrams:
        pairs = set(itertools.pairwise(tokens))
        bigram = sum(b in pairs for b in q.bigrams) / len(q.bigrams)
    else:
        bigram = 0.0
    numbers = set(_NUMBER.findall(text))
    number_cov = len(q.numbers & numbers) / len(q.numbers) if q.numbers else 0.0
    name_cov = sum(n in token_set for n in q.names) / len(q.names) if q.names else 0.0
    return [
        float(n_terms),
        hits / n_terms if n_terms else 0.0,
        prefix_hits / len(q.prefixes) if q.prefixes else 0.0,
        float(hits),
        bigram,
        float(bool(q.numbers)),
        number_cov,
        float(bool(q.names)),
        name_cov,
        float(bool(numbers)),
        math.log1p(len(text)),
        math.log1p(len(tokens)),
    ]


def compute_pairs(query: str, texts: Sequence[str]) -> np.ndarray:
    """The :data:`PAIR_FEATURES` rows of ``texts`` against ``query``: ``(len(texts), P)``."""
    q = _Query(query)
    out = np.zeros((len(texts), len(PAIR_FEATURES)), dtype=np.float64)
    for i, text in enumerate(texts):
        tokens = _tokens(text)
        out[i] = _pair_row(q, text, tokens, set(tokens))
    return out


def _minmax(values: np.ndarray) -> np.ndarray:
    lo = values.min()
    span = values.max() - lo
    if not np.isfinite(span) or span <= 0:
        return np.ones_like(values)
    return (values - lo) / span


def _rank_norm(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Rank within the pool of the present values (1 = highest) over n; absent: 1 + 1/n."""
    n = len(values)
    out = np.full(n, 1.0 + 1.0 / n)
    idx = np.flatnonzero(present)
    if idx.size:
        order = idx[np.argsort(-values[idx], kind="stable")]
        out[order] = (np.arange(1, idx.size + 1)) / n
    return out


def _jaccard(token_sets: list[set[str]]) -> np.ndarray:
    """Pairwise token-set Jaccard; the diagonal is 0. Each set becomes one integer bit mask
    over the pool's own vocabulary (exact, and the same in every process, unlike ``hash``),
    so a pair costs one AND and one popcount however long the texts are: no pairwise set
    operations, no matrix product (BLAS threads cost more than the work at this size)."""
    vocabulary: dict[str, int] = {}
    masks = []
    for tokens in token_sets:
        bits = np.zeros(len(vocabulary) + len(tokens), dtype=np.uint8)
        bits[[vocabulary.setdefault(t, len(vocabulary)) for t in tokens]] = 1
        masks.append(int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little"))
    sizes = [len(tokens) for tokens in token_sets]
    n = len(token_sets)
    jac = np.zeros((n, n))
    for i in range(n):
        mi, si = masks[i], sizes[i]
        for j in range(i):
            union = si + sizes[j]
            if union:
                inter = (mi & masks[j]).bit_count()
                jac[i, j] = jac[j, i] = inter / (union - inter)
    return jac


def _embeddings(candidates: Sequence[Candidate]) -> np.ndarray | None:
    if isinstance(candidates, CandidateViews):
        stacked = candidates.embeddings()
        return None if stacked is None else np.asarray(stacked, dtype=np.float64)
    vectors = [c.embedding for c in candidates]
    if any(v is None for v in vectors):
        return None
    dims = {len(v) for v in vectors if v is not None}
    spaces = {c.embedding_space for c in candidates}
    if len(dims) != 1 or len(spaces) != 1 or 0 in dims:
        return None
    return np.array(vectors, dtype=np.float64)


def _semantic(matrix: np.ndarray | None, n: int) -> np.ndarray:
    out = np.zeros((n, len(_SEMANTIC)))
    if matrix is None or not np.isfinite(matrix).all():
        return out
    norms = np.linalg.norm(matrix, axis=1)
    if (norms <= 0).any():
        return out
    unit = matrix / norms[:, None]
    cos = np.einsum("ij,kj->ik", unit, unit)  # not BLAS: its threads cost more at this size
    out[:, 0] = 1.0
    out[:, 1] = cos[0]
    above = np.where(np.tri(n, k=-1, dtype=bool), cos, -1.0)
    out[1:, 2] = above[1:].max(axis=1)
    centroid = unit.mean(axis=0)
    c_norm = np.linalg.norm(centroid)
    if c_norm > 0:
        out[:, 3] = np.einsum("ij,j->i", unit, centroid / c_norm)
    return out


def compute(
    query: str, candidates: Sequence[Candidate], neighbours: Neighbours | None = None
) -> np.ndarray:
    """The ``(n, len(FEATURES))`` float64 rows of the pool ``candidates`` (coarse order)."""
    n = len(candidates)
    out = np.zeros((n, len(FEATURES)), dtype=np.float64)
    if n == 0:
        return out
    q = _Query(query)
    pool = list(candidates)
    col = 0

    # coarse --------------------------------------------------------------------------------
    scores = np.fromiter((c.score for c in pool), np.float64, n)
    ranks = np.arange(1, n + 1, dtype=np.float64)
    coarse_mm = _minmax(scores)
    std = scores.std()
    top = scores.max()
    out[:, 0] = scores
    out[:, 1] = ranks
    out[:, 2] = 1.0 / ranks
    out[:, 3] = coarse_mm
    out[:, 4] = (scores - scores.mean()) / std if std > 0 else 0.0
    out[:, 5] = scores / top if top > 0 else 0.0
    out[:, 6] = float(n)
    out[:, 7] = np.fromiter((c.importance for c in pool), np.float64, n)
    col = len(_COARSE)

    # channels ------------------------------------------------------------------------------
    for channel in CHANNELS:
        matched = np.fromiter((channel in c.matched_by for c in pool), np.float64, n)
        raw = np.fromiter((c.channel_scores.get(channel, math.nan) for c in pool), np.float64, n)
        present = np.isfinite(raw)
        values = np.where(present, raw, 0.0)
        out[:, col] = matched
        out[:, col + 1] = values
        out[:, col + 2] = _rank_norm(values, present)
        if present.any():
            mm = _minmax(values[present])
            out[present, col + 3] = mm
        col += 4

    # pair text features --------------------------------------------------------------------
    texts = [c.text for c in pool]
    token_lists = [_tokens(t) for t in texts]
    token_sets = [set(t) for t in token_lists]
    for i in range(n):
        out[i, col : col + len(PAIR_FEATURES)] = _pair_row(
            q, texts[i], token_lists[i], token_sets[i]
        )
    log_tokens = out[:, col + PAIR_FEATURES.index("log_tokens")]
    col += len(PAIR_FEATURES)

    # pool text features: within-pool IDF ---------------------------------------------------
    if q.terms:
        df = np.array([sum(t in s for s in token_sets) for t in q.terms], dtype=np.float64)
        idf = np.log((n + 1.0) / (df + 0.5))
        idf = np.maximum(idf, 0.0)
        total = idf.sum()
        has = np.array([[t in s for t in q.terms] for s in token_sets], dtype=np.float64)
        weighted = has @ idf / total if total > 0 else has.mean(axis=1)
        out[:, col] = weighted
        out[:, col + 1] = _minmax(weighted)
    out[:, col + 2] = log_tokens - np.median(log_tokens)
    col += len(_POOL_TEXT)

    # structure: neighbours, threads, sources -----------------------------------------------
    ids = [c.ref.memory_id for c in pool]
    index_of: dict[str, int] = {}
    for i, memory_id in enumerate(ids):
        index_of.setdefault(memory_id, i)
    threads = [c.thread for c in pool]
    sources = [c.derived_from for c in pool]
    thread_count: dict[str, int] = {}
    thread_best: dict[str, list[int]] = {}
    for i, thread in enumerate(threads):
        if thread is not None:
            thread_count[thread] = thread_count.get(thread, 0) + 1
            thread_best.setdefault(thread, []).append(i)
    derived_of: dict[str, list[int]] = {}
    for i, source in enumerate(sources):
        if source is not None:
            derived_of.setdefault(source, []).append(i)
    seen_groups: dict[str, int] = {}
    for i in range(n):
        row = out[i]
        thread = threads[i]
        if thread is not None:
            row[col] = 1.0
            if neighbours is not None:
                for nb in neighbours(i):
                    if nb.offset not in (-1, 1):
                        continue
                    at = 1 if nb.offset == -1 else 2
                    j = index_of.get(nb.ref.memory_id)
                    if j is not None:
                        row[col + at] = 1.0
                        row[col + at + 2] = coarse_mm[j]
                    # a neighbour in the pool was tokenised already (texts cut alike)
                    nb_tokens = token_sets[j] if j is not None else set(_tokens(nb.text))
                    row[col + at + 4] = _coverage(q, nb_tokens)
            row[col + 7] = thread_count[thread] / n
            others = [j for j in thread_best[thread] if j != i]
            row[col + 8] = max(coarse_mm[j] for j in others) if others else 0.0
        source = sources[i]
        if source is not None:
            row[col + 9] = 1.0
            j = index_of.get(source)
            if j is not None:
                row[col + 10] = 1.0
                row[col + 11] = coarse_mm[j]
        derived = [j for j in derived_of.get(ids[i], ()) if j != i]
        if derived:
            row[col + 12] = len(derived)
            row[col + 13] = max(coarse_mm[j] for j in derived)
        group = source if source is not None else ids[i]
        row[col + 14] = seen_groups.get(group, 0)
        seen_groups[group] = seen_groups.get(group, 0) + 1
    col += len(_STRUCTURE)

    # near-duplicates -----------------------------------------------------------------------
    jac = _jaccard(token_sets)
    if n > 1:
        lower = np.tril(jac, k=-1)
        out[:, col] = lower.max(axis=1)
        out[:, col + 1] = jac.max(axis=1)
        out[:, col + 2] = (jac >= _NEAR_DUP).sum(axis=1)
    col += len(_DUPLICATES)

    # semantic ------------------------------------------------------------------------------
    out[:, col : col + len(_SEMANTIC)] = _semantic(_embeddings(pool), n)
    col += len(_SEMANTIC)
    assert col == len(FEATURES)
    return out
