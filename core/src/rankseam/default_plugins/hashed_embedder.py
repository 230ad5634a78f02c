"""The default embedder ``hashed``: hashed word and character n-grams, L2-normalised.

The features and hashes of scikit-learn's ``HashingVectorizer`` (MurmurHash3, signed; no
fitting, no vocabulary, no download). Small batches (a query) are hashed here in pure Python,
so a search never imports scikit-learn (about a second of start-up); larger batches use
scikit-learn's compiled hasher, once per distinct word. All paths give identical vectors
(tested against scikit-learn's own analyzers and hasher).

Word unigrams catch shared words, character n-grams (within word boundaries) catch
inflections and typos. The two hashed vectors are mixed with ``char_weight``, densified to
float32 and L2-normalised. A text with no features (empty or only punctuation) embeds to the
zero vector. Options (``[embedders.hashed]``): ``dimensions`` (default 256), ``char_ngrams``
(default ``[3, 5]``), ``word_ngrams`` (default ``[1, 1]``), ``char_weight`` (default 0.5),
``stop_words`` (default false: when true, English stop words are dropped before hashing,
unless nothing else is left). Every option is part of the descriptor, so changing one is a new
vector space (``rankseam reembed`` fills it).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import attrs
import numpy as np

from rankseam.plugin import EmbedderRegister, OptionError, hookimpl, option, parse_options
from rankseam.plugin.embedders import EmbedderDescriptor

__all__ = ["FUSION_WEIGHT", "HashedEmbedder", "HashedOptions"]

#: The vector channel's weight in the convex fusion (lexical: 1). Hashed n-grams are a weak,
#: lexical-like channel: chosen on the development data (docs/benchmarks.md, "Fusion"), where
#: 0.2-0.3 was best on both sets and 0.7 or more fell below BM25 alone on SciFact.
FUSION_WEIGHT = 0.3

_WORD = re.compile(r"\w+", re.UNICODE)


def _ordered(_inst: object, attr: attrs.Attribute[Any], value: tuple[int, int]) -> None:
    if value[0] > value[1]:
        raise OptionError(attr.name, f"must be [low, high] with low <= high, got {list(value)}")


@attrs.frozen
class HashedOptions:
    """The options of the ``hashed`` embedder (``[embedders.hashed]``)."""

    dimensions: int = option(256, ge=16, le=65536, help="vector dimensions (hash buckets)")
    char_ngrams: tuple[int, int] = option(
        (3, 5), ge=1, le=8, validator=_ordered, help="[low, high] character n-gram lengths"
    )
    word_ngrams: tuple[int, int] = option(
        (1, 1), ge=1, le=8, validator=_ordered, help="[low, high] word n-gram lengths"
    )
    char_weight: float = option(
        0.5, ge=0, le=1, help="weight of the character n-grams against the words"
    )
    stop_words: bool = option(False, help="drop English stop words before hashing words")


#: scikit-learn's default ``token_pattern`` (word analyzer) and whitespace split (char_wb).
_TOKEN = re.compile(r"(?u)\b\w\w+\b")

#: Batches up to this many texts are hashed in pure Python (no scikit-learn import).
SMALL_BATCH = 16

_MASK = 0xFFFFFFFF
_WHITE_SPACES = re.compile(r"\s\s+")


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def murmurhash3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of ``data``, as a signed int (scikit-learn's
    ``murmurhash3_32(data, seed, positive=False)``)."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _MASK
    n = len(data)
    end = n - n % 4
    for i in range(0, end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (_rotl((k * c1) & _MASK, 15) * c2) & _MASK
        h = (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & _MASK
    k = 0
    rest = n % 4
    if rest == 3:
        k ^= data[end + 2] << 16
    if rest >= 2:
        k ^= data[end + 1] << 8
    if rest >= 1:
        k ^= data[end]
        h ^= (_rotl((k * c1) & _MASK, 15) * c2) & _MASK
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


@functools.lru_cache(maxsize=1 << 15)
def _feature_hash(feature: str) -> int:
    """``murmurhash3_32`` of a feature's UTF-8 bytes, memoised: the n-grams of successive
    queries repeat, and hashing one in Python takes microseconds."""
    return murmurhash3_32(feature.encode("utf-8"))


def _word_features(text: str, ngrams: tuple[int, int]) -> list[str]:
    """HashingVectorizer(analyzer="word", lowercase=True, ngram_range=ngrams) features."""
    tokens = _TOKEN.findall(text.lower())
    low, high = ngrams
    if high == 1:
        return tokens
    out = list(tokens) if low == 1 else []
    for n in range(max(low, 2), min(high + 1, len(tokens) + 1)):
        out.extend(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return out


def _char_wb_features(text: str, ngrams: tuple[int, int]) -> list[str]:
    """HashingVectorizer(analyzer="char_wb", lowercase=True, ngram_range=ngrams) features."""
    low, high = ngrams
    words = _WHITE_SPACES.sub(" ", text.lower()).split()
    return [gram for word in words for gram in _char_wb_ngrams(word, low, high)]


def _hash_rows(rows: list[list[str]], dimensions: int) -> np.ndarray:
    """FeatureHasher(n_features=dimensions, input_type="string", alternate_sign=True)."""
    out = np.zeros((len(rows), dimensions), dtype=np.float32)
    edge = (2147483647 - (dimensions - 1)) % dimensions  # scikit-learn's index of -2**31
    for r, features in enumerate(rows):
        row = out[r]
        for feature in features:
            h = _feature_hash(feature)
            row[edge if h == -(2**31) else abs(h) % dimensions] += 1.0 if h >= 0 else -1.0
    return out


#: Words whose hashed features are kept (per embedder); the cache is emptied when full.
_CACHE_WORDS = 200_000


def _char_wb_ngrams(word: str, low: int, high: int) -> list[str]:
    """The character n-grams scikit-learn's ``char_wb`` analyzer takes from one word (already
    lower-cased), padded with one space on each side, in its order."""
    w = " " + word + " "
    w_len = len(w)
    out = []
    for n in range(low, high + 1):
        offset = 0
        out.append(w[offset : offset + n])
        while offset + n < w_len:
            offset += 1
            out.append(w[offset : offset + n])
        if offset == 0:  # a short word is counted once
            break
    return out


class _HashedBag:
    """Hashed features of a bag of units (words for ``char_wb``, tokens for word unigrams),
    computed once per distinct unit and summed per text.

    Summing each unit's integer feature counts (±1 per n-gram, alternate signs) adds exactly
    what scikit-learn's hasher adds over the text's n-gram list, so the result equals
    ``FeatureHasher.transform`` of the analyzer's output bit for bit (every value is a small
    integer, exact in float32), at a fraction of its Python work. Every unit seen gets a row
    in one sparse table (units × dims); a batch is one sparse product
    ``counts (texts × units) @ table``, so a known unit costs one dictionary lookup.
    """

    def __init__(self, hasher: Any, expand: Any) -> None:
        self._hasher = hasher  # a callable returning scikit-learn's FeatureHasher
        self._expand = expand  # unit -> list of feature strings
        self._lock = threading.Lock()
        self._ids: dict[str, int] = {}
        self._parts: list[Any] = []  # CSR blocks of rows, in id order
        self._table: Any = None  # their vertical stack (built when needed)

    def _rows_of(self, flat: Sequence[str]) -> tuple[np.ndarray, Any]:
        """The table row of each unit of ``flat`` (new units hashed and added) and the table."""
        import scipy.sparse as sp

        ids = self._ids
        with self._lock:
            missing = [u for u in dict.fromkeys(flat) if u not in ids]
            if missing:
                if len(ids) + len(missing) > _CACHE_WORDS:  # start afresh: bounded memory
                    ids.clear()
                    self._parts.clear()
                    missing = list(dict.fromkeys(flat))
                block = self._hasher().transform(self._expand(u) for u in missing).tocsr()
                block.sum_duplicates()
                for u in missing:
                    ids[u] = len(ids)
                self._parts.append(block)
                self._table = None
            if not self._parts:  # nothing seen yet, and no unit in this batch
                self._parts.append(sp.csr_matrix((0, self._hasher().n_features), dtype=np.float32))
            if self._table is None:
                self._table = sp.vstack(self._parts, format="csr")
                self._parts = [self._table]
            table = self._table
            rows = np.fromiter(map(ids.__getitem__, flat), dtype=np.int64, count=len(flat))
        return rows, table

    def transform(self, bags: list[list[str]]) -> np.ndarray:
        import scipy.sparse as sp

        flat = list(chain.from_iterable(bags))
        rows, table = self._rows_of(flat)
        indptr = np.zeros(len(bags) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, bags), dtype=np.int64, count=len(bags)), out=indptr[1:])
        counts = sp.csr_matrix(
            (np.ones(len(rows), dtype=np.float32), rows, indptr),
            shape=(len(bags), table.shape[0]),
        )
        return np.asarray((counts @ table).toarray(), dtype=np.float32)


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    """L2-normalise rows in place (float32); all-zero rows stay zero."""
    dense = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(dense, axis=1, keepdims=True)
    np.divide(dense, norms, out=dense, where=norms > 0)
    return dense


class HashedEmbedder:
    """Deterministic hashed n-gram embedder (see the module docstring)."""

    def __init__(
        self,
        *,
        dimensions: int = 256,
        char_ngrams: tuple[int, int] = (3, 5),
        word_ngrams: tuple[int, int] = (1, 1),
        char_weight: float = 0.5,
        stop_words: bool = False,
    ) -> None:
        self._stop: frozenset[str] | None = None
        if stop_words:  # scikit-learn's list; only this non-default option imports it here
            from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

            self._stop = frozenset(ENGLISH_STOP_WORDS)
        self.dimensions = dimensions
        self.char_weight = char_weight
        self._word_ngrams = word_ngrams
        self._char_ngrams = char_ngrams
        self._sklearn: tuple[Any, Any, Any] | None = None
        self._sklearn_lock = threading.Lock()
        low, high = char_ngrams
        self._chars = _HashedBag(self._hasher, lambda word: _char_wb_ngrams(word, low, high))
        # word unigrams (the default) hash each token alone; other ranges use the analyzer
        unigrams = word_ngrams == (1, 1)
        self._words = _HashedBag(self._hasher, lambda token: [token]) if unigrams else None
        self.descriptor = EmbedderDescriptor(
            name="hashed",
            fusion_weight=FUSION_WEIGHT,
            dimensions=dimensions,
            normalization="l2",
            revision=(
                f"1:w{word_ngrams[0]}-{word_ngrams[1]}:c{char_ngrams[0]}-{char_ngrams[1]}"
                f":cw{char_weight:g}" + (":sw" if stop_words else "")
            ),
        )

    def _compiled(self) -> tuple[Any, Any, Any]:
        """scikit-learn's word analyzer, char_wb analyzer and hasher (imported on first use:
        a large batch, or :meth:`reference_embed`)."""
        with self._sklearn_lock:
            if self._sklearn is None:
                from sklearn.feature_extraction import FeatureHasher
                from sklearn.feature_extraction.text import HashingVectorizer

                # The analyzers of HashingVectorizer, hashed by FeatureHasher directly: the same
                # features and hashes as HashingVectorizer.transform, without its overhead.
                word = HashingVectorizer(
                    analyzer="word", ngram_range=self._word_ngrams, lowercase=True
                ).build_analyzer()
                char = HashingVectorizer(
                    analyzer="char_wb", ngram_range=self._char_ngrams, lowercase=True
                ).build_analyzer()
                hasher = FeatureHasher(
                    n_features=self.dimensions,
                    input_type="string",
                    alternate_sign=True,
                    dtype=np.float32,
                )
                self._sklearn = (word, char, hasher)
            return self._sklearn

    def _hasher(self) -> Any:
        return self._compiled()[2]

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        if self._stop is not None:
            texts = [self._content(t) for t in texts]
        w = self.char_weight
        if len(texts) <= SMALL_BATCH:  # a query: pure Python, no scikit-learn import
            words = _unit_rows(
                _hash_rows([_word_features(t, self._word_ngrams) for t in texts], self.dimensions)
            )
            chars = _unit_rows(
                _hash_rows(
                    [_char_wb_features(t, self._char_ngrams) for t in texts], self.dimensions
                )
            )
            return _unit_rows(words * np.float32(1.0 - w) + chars * np.float32(w))
        lowered = [t.lower() for t in texts]
        if self._words is not None:
            words = _unit_rows(self._words.transform([_TOKEN.findall(t) for t in lowered]))
        else:
            word, _char, hasher = self._compiled()
            words = _unit_rows(hasher.transform(word(t) for t in texts).toarray())
        chars = _unit_rows(self._chars.transform([t.split() for t in lowered]))
        return _unit_rows(words * np.float32(1.0 - w) + chars * np.float32(w))

    def reference_embed(self, texts: Sequence[str], /) -> np.ndarray:
        """:meth:`embed` through scikit-learn's analyzers and hasher directly (slower); the
        two are equal bit for bit (tested)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        w = self.char_weight
        word, char, hasher = self._compiled()
        words = _unit_rows(hasher.transform(word(t) for t in texts).toarray())
        chars = _unit_rows(hasher.transform(char(t) for t in texts).toarray())
        return _unit_rows(words * np.float32(1.0 - w) + chars * np.float32(w))

    def _content(self, text: str) -> str:
        """``text`` without English stop words (unchanged if nothing else is left)."""
        assert self._stop is not None
        words = [w for w in _WORD.findall(text.lower()) if w not in self._stop]
        return " ".join(words) if words else text

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | HashedOptions) -> HashedEmbedder:
        """The embedder of the ``[embedders.hashed]`` table ``options`` (checked), or of
        options already checked."""
        if not isinstance(options, HashedOptions):
            options = parse_options(HashedOptions, options, "embedders.hashed")
        return cls(**attrs.asdict(options, recurse=False))


def _factory(options: HashedOptions, context: object) -> HashedEmbedder:
    return HashedEmbedder.from_options(options)


@hookimpl
def register_embedders(register: EmbedderRegister) -> None:
    register(
        "hashed",
        _factory,
        summary="hashed word + char n-grams (scikit-learn's features), no download",
        options=HashedOptions,
    )
