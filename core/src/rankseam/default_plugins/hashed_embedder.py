"""The default embedder ``hashed``: hashed word and character n-grams, L2-normalised.

Built on scikit-learn's ``HashingVectorizer``: deterministic (MurmurHash3), no fitting, no
vocabulary, no download. Word unigrams catch shared words, character n-grams (within word
boundaries) catch inflections and typos. The two hashed vectors are mixed with
``char_weight``, densified to float32 and L2-normalised. A text with no features (empty or
only punctuation) embeds to the zero vector. Options (``[embedders.hashed]``): ``dimensions``
(default 256), ``char_ngrams`` (default ``[3, 5]``), ``word_ngrams`` (default ``[1, 1]``),
``char_weight`` (default 0.5), ``stop_words`` (default false: when true, English stop words
are dropped before hashing, unless nothing else is left). Every option is part of the
descriptor, so changing one is a new vector space (``rankseam reembed`` fills it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rankseam.errors import ConfigurationError
from rankseam.plugin import EmbedderDescriptor, EmbedderRegister, check_options, hookimpl

__all__ = ["FUSION_WEIGHT", "HashedEmbedder"]

#: The vector channel's weight in the convex fusion (lexical: 1). Hashed n-grams are a weak,
#: lexical-like channel: chosen on the development data (docs/benchmarks.md, "Fusion"), where
#: 0.2-0.3 was best on both sets and 0.7 or more fell below BM25 alone on SciFact.
FUSION_WEIGHT = 0.3

_OPTIONS = ("dimensions", "char_ngrams", "word_ngrams", "char_weight", "stop_words")
_WORD = re.compile(r"\w+", re.UNICODE)


def _range(name: str, value: Any) -> tuple[int, int]:
    ok = (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and 1 <= value[0] <= value[1] <= 8
    )
    if not ok:
        raise ConfigurationError(
            f"[embedders.hashed] {name} must be [low, high] with 1 <= low <= high <= 8, "
            f"got {value!r}"
        )
    return int(value[0]), int(value[1])


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
        from sklearn.feature_extraction import FeatureHasher
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, HashingVectorizer

        self._stop = frozenset(ENGLISH_STOP_WORDS) if stop_words else None

        self.dimensions = dimensions
        self.char_weight = char_weight
        # The analyzers of HashingVectorizer, hashed by FeatureHasher directly: the same
        # features and hashes as HashingVectorizer.transform, without its per-call overhead.
        self._word_analyzer = HashingVectorizer(
            analyzer="word", ngram_range=word_ngrams, lowercase=True
        ).build_analyzer()
        self._char_analyzer = HashingVectorizer(
            analyzer="char_wb", ngram_range=char_ngrams, lowercase=True
        ).build_analyzer()
        self._hasher = FeatureHasher(
            n_features=dimensions, input_type="string", alternate_sign=True, dtype=np.float32
        )
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

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        if self._stop is not None:
            texts = [self._content(t) for t in texts]
        w = self.char_weight
        words = _unit_rows(self._hasher.transform(self._word_analyzer(t) for t in texts).toarray())
        chars = _unit_rows(self._hasher.transform(self._char_analyzer(t) for t in texts).toarray())
        return _unit_rows(words * np.float32(1.0 - w) + chars * np.float32(w))

    def _content(self, text: str) -> str:
        """``text`` without English stop words (unchanged if nothing else is left)."""
        assert self._stop is not None
        words = [w for w in _WORD.findall(text.lower()) if w not in self._stop]
        return " ".join(words) if words else text

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> HashedEmbedder:
        check_options("embedder 'hashed'", options, _OPTIONS)
        dims = options.get("dimensions", 256)
        if isinstance(dims, bool) or not isinstance(dims, int) or not 16 <= dims <= 65536:
            raise ConfigurationError(
                f"[embedders.hashed] dimensions must be an integer in 16..65536, got {dims!r}"
            )
        weight = options.get("char_weight", 0.5)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
            raise ConfigurationError(
                f"[embedders.hashed] char_weight must be a number in [0, 1], got {weight!r}"
            )
        stop = options.get("stop_words", False)
        if not isinstance(stop, bool):
            raise ConfigurationError(
                f"[embedders.hashed] stop_words must be true or false, got {stop!r}"
            )
        return cls(
            dimensions=dims,
            stop_words=stop,
            char_ngrams=_range("char_ngrams", options.get("char_ngrams", (3, 5))),
            word_ngrams=_range("word_ngrams", options.get("word_ngrams", (1, 1))),
            char_weight=float(weight),
        )


def _factory(options: Mapping[str, Any], context: object) -> HashedEmbedder:
    return HashedEmbedder.from_options(options)


@hookimpl
def register_embedders(register: EmbedderRegister) -> None:
    register("hashed", _factory, summary="hashed word + char n-grams (scikit-learn), no download")
