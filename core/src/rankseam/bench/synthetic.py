"""Deterministic synthetic data for the latency benchmark: texts, queries, vectors, hits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from rankseam.types import Hit, MemoryRef

__all__ = ["pool_hits", "queries", "texts", "unit_vectors", "vocabulary"]

_SYLLABLES = (
    "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "pe", "da", "gu", "fi", "ho", "ja", "be",
    "zo", "wi", "xu", "qe", "ly",
)  # fmt: skip


def vocabulary(size: int = 4000, seed: int = 7) -> list[str]:
    """``size`` distinct pseudo-words of 2–4 syllables (no real text is involved)."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        n = int(rng.integers(2, 5))
        words["".join(_SYLLABLES[int(i)] for i in rng.integers(0, len(_SYLLABLES), n))] = None
    return list(words)


def _zipf_words(rng: np.random.Generator, vocab: list[str], n: int) -> list[str]:
    idx = np.minimum(rng.zipf(1.3, n) - 1, len(vocab) - 1)
    return [vocab[int(i)] for i in idx]


def texts(count: int, *, seed: int = 11) -> Iterator[dict[str, Any]]:
    """``count`` ingest records (ids ``m<N>``) of 8–24 Zipf-distributed pseudo-words."""
    vocab = vocabulary()
    rng = np.random.default_rng(seed)
    for i in range(count):
        words = _zipf_words(rng, vocab, int(rng.integers(8, 25)))
        yield {"id": f"m{i}", "text": " ".join(words)}


def queries(count: int, *, seed: int = 13) -> list[str]:
    """``count`` queries of 3–6 pseudo-words, skewed towards common words."""
    vocab = vocabulary()
    rng = np.random.default_rng(seed)
    return [" ".join(_zipf_words(rng, vocab, int(rng.integers(3, 7)))) for _ in range(count)]


def unit_vectors(n: int, dims: int, *, seed: int = 17) -> np.ndarray:
    """``n`` random unit vectors (float32), shape ``(n, dims)``."""
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, dims)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return m


def pool_hits(n: int, *, scores: np.ndarray | None = None, namespace: str = "bench") -> list[Hit]:
    """``n`` coarse hits (ranks = order, descending scores unless given)."""
    if scores is None:
        scores = np.linspace(1.0, 0.1, n)
    return [
        Hit(
            ref=MemoryRef(namespace, f"c{i}", 1),
            text=f"candidate {i}",
            score=float(scores[i]),
            matched_by=("vector",),
        )
        for i in range(n)
    ]


# --------------------------------------------------------------------- LoCoMo-derived corpus


def _locomo_pool(path: str | None = None) -> tuple[list[tuple[str, str]], list[str]]:
    """The LoCoMo dev memories ``(id, text)`` of every conversation (ids prefixed with the
    conversation) and its category 1–4 questions, in file order."""
    from rankseam.bench.datasets import HEADLINE_CATEGORIES, load_locomo

    data = load_locomo(path)
    memories = [(f"{c.name}/{r.id}", r.text) for c in data.collections for r in c.records]
    questions = [
        q.text for c in data.collections for q in c.queries if q.category in HEADLINE_CATEGORIES
    ]
    return memories, questions


def locomo_texts(
    count: int, *, seed: int = 11, path: str | None = None
) -> Iterator[dict[str, Any]]:
    """``count`` ingest records derived from LoCoMo dev (read at run time, never shipped).

    The first records are the real LoCoMo memories (turns and observations of all five
    conversations, one namespace); every further record splices the first half of one real
    turn's words (its speaker included) onto the second half of another's, so word and
    document frequencies stay those of real conversation (speaker names in a few per cent of
    memories, a long Zipf tail) at any size. Ids: ``<conversation>/<dia_id>`` for real
    memories, ``x<N>`` for derived ones.
    """
    memories, _questions = _locomo_pool(path)
    for mid, text in memories[:count]:
        yield {"id": mid, "text": text}
    if count <= len(memories):
        return
    words = [text.split() for _mid, text in memories]
    rng = np.random.default_rng(seed)
    n = len(words)
    for i in range(count - len(memories)):
        a, b = rng.integers(0, n, 2)
        wa, wb = words[int(a)], words[int(b)]
        cut_a = max(1, len(wa) // 2)
        cut_b = len(wb) // 2
        yield {"id": f"x{i}", "text": " ".join(wa[:cut_a] + wb[cut_b:])}


def locomo_queries(count: int, *, path: str | None = None) -> list[str]:
    """The first ``count`` LoCoMo dev questions of categories 1–4 (repeated if fewer)."""
    _memories, questions = _locomo_pool(path)
    return [questions[i % len(questions)] for i in range(count)]
