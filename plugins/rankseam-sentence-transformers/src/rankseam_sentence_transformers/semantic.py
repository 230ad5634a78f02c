"""The ``semantic`` reranker: the coarse pool re-ordered by the model's cosine to the query.

For a pool of n candidates it embeds the query and the candidates' texts with the plugin's
model (the ONNX path when ONNX Runtime is installed: ``backend = "auto"``), and scores each
candidate

    fused = (1 - weight) * minmax(coarse score) + weight * minmax(cosine)

(min-max over the pool; a constant column counts 1.0 everywhere, so a pool whose cosines all
tie keeps its coarse order). The answer is every rank by ``fused``, best first (ties: coarse
order), cut to the limit, with ``fused`` as the per-rank score; the trace records each
candidate's cosine and whether its vector came from the cache.

Candidate vectors are kept in a bounded LRU cache keyed by the memory's identity (namespace,
memory id, revision) and checked against the text they were made from, so a pool's memories
that recur across searches are embedded once; the cache is shared by every ``semantic``
reranker of the same model and runtime in the process. ``deadline_s`` bounds the encoding: it
is checked between texts (int8) or batches, and a rerank past it fails with
``RerankError(reason="timeout")`` carrying what it spent (the search then raises, or with
``on_error="coarse"`` keeps the coarse order). Usage: one call per search that encoded
anything, ``input_tokens`` the tokens encoded (query included), 0 calls on a fully cached pool.

Where it pays, and where not (docs/plugins/sentence-transformers.md, "Reranker `semantic`"):
over a store built with the model-free ``hashed`` embedder it gains on both development sets;
a store embedded with the model at ingest does better on both, so use it where that is not
affordable or not done yet.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from rankseam.errors import RerankError
from rankseam.plugin.rerankers import CandidateViews
from rankseam.types import Candidate, CandidateRecord, RerankDecision, Usage
from rankseam_sentence_transformers.model import (
    Encoder,
    ModelFiles,
    Runtime,
    load_encoder,
    resolve_model,
)
from rankseam_sentence_transformers.options import (
    DEFAULT_SEMANTIC_WEIGHT,
    SemanticOptions,
)

__all__ = [
    "DEFAULT_SEMANTIC_WEIGHT",
    "SEMANTIC_POLICY_ID",
    "SemanticOptions",
    "SemanticReranker",
]

SEMANTIC_POLICY_ID = "rankseam.rerank.semantic.v1"
_QUERY_CACHE = 256


class VectorCache:
    """A bounded LRU of unit vectors by key, each checked against the text it came from."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, tuple[str, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, text: str) -> np.ndarray | None:
        with self._lock:
            item = self._items.get(key)
            if item is None or item[0] != text:
                return None
            self._items.move_to_end(key)
            return item[1]

    def put(self, key: Hashable, text: str, vector: np.ndarray) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[key] = (text, vector)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


_CACHES: dict[tuple[Path, str, Runtime, int], VectorCache] = {}
_CACHES_LOCK = threading.Lock()


def _shared_cache(files: ModelFiles, runtime: Runtime, size: int) -> VectorCache:
    with _CACHES_LOCK:
        return _CACHES.setdefault((files.path, files.revision, runtime, size), VectorCache(size))


def _minmax(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    if not high - low > 1e-12:
        return np.ones_like(values)
    return (values - low) / (high - low)


class SemanticReranker:
    """The coarse pool re-ordered by ``fused`` (see the module docstring)."""

    policy_id: ClassVar[str] = SEMANTIC_POLICY_ID
    deterministic: ClassVar[bool] = True
    needs_embeddings: ClassVar[bool] = False

    def __init__(
        self,
        options: SemanticOptions | None = None,
        *,
        files: ModelFiles | None = None,
        onnx: bool | None = None,
    ) -> None:
        self.options = options if options is not None else SemanticOptions()
        self.files = files if files is not None else resolve_model(self.options.model)
        if onnx is None:
            from rankseam_sentence_transformers.onnx_backend import export_available

            onnx = export_available()
        self.runtime = self.options.runtime(onnx)
        self.cache = _shared_cache(self.files, self.runtime, self.options.cache_size)
        self._queries = VectorCache(_QUERY_CACHE)

    @cached_property
    def encoder(self) -> Encoder:
        """The encoder (loaded on first use)."""
        return load_encoder(self.files, self.runtime)

    @property
    def descriptor(self) -> Mapping[str, Any]:
        return {
            "name": "semantic",
            "model": self.files.name,
            "model_revision": self.files.revision,
            "backend": self.runtime.backend,
            "quantize": self.runtime.quantize,
            "precision": self.runtime.precision,
            "max_seq_length": self.options.max_seq_length,
            "weight": self.options.weight,
            "rule": "(1-w)*minmax(coarse) + w*minmax(cosine)",
        }

    def _encode(self, texts: list[str], deadline: float, spent: list[int]) -> list[np.ndarray]:
        """Unit vectors of ``texts``, in chunks, stopping at the deadline."""
        step = 1 if self.runtime.quantize else self.options.batch_size
        vectors: list[np.ndarray] = []
        for start in range(0, len(texts), step):
            if time.monotonic() > deadline:
                raise RerankError(
                    f"semantic: encoding the pool passed deadline_s={self.options.deadline_s:g} "
                    f"after {start} of {len(texts)} texts; raise deadline_s, lower the pool or "
                    "max_seq_length, or use backend 'onnx' with quantize",
                    policy_id=self.policy_id,
                    reason="timeout",
                    usage=Usage(1, spent[0], 0) if spent[0] else Usage.zero(),
                )
            chunk, tokens = self.encoder.encode_counted(
                texts[start : start + step], batch_size=step, normalize=True
            )
            spent[0] += tokens
            vectors.extend(chunk)
        return vectors

    def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> RerankDecision:
        n = len(candidates)
        k = max(0, min(int(limit), n))
        if k == 0:
            return RerankDecision((), usage=Usage.zero())
        deadline = time.monotonic() + self.options.deadline_s
        spent = [0]
        query_vector = self._queries.get(query, query)
        if query_vector is None:
            (query_vector,) = self._encode([query], deadline, spent)
            self._queries.put(query, query, query_vector)
        keys = [(c.ref.namespace, c.ref.memory_id, c.ref.revision) for c in candidates]
        texts = [c.text for c in candidates]
        found = [self.cache.get(key, text) for key, text in zip(keys, texts, strict=True)]
        missing = [i for i, vector in enumerate(found) if vector is None]
        if missing:
            fresh = self._encode([texts[i] for i in missing], deadline, spent)
            for i, vector in zip(missing, fresh, strict=True):
                found[i] = vector
                self.cache.put(keys[i], texts[i], vector)
        matrix = np.stack(found)  # type: ignore[arg-type]
        cosine = matrix @ query_vector
        if isinstance(candidates, CandidateViews):
            coarse = np.asarray(candidates.scores(), dtype=np.float64)
        else:
            coarse = np.fromiter((c.score for c in candidates), np.float64, n)
        weight = self.options.weight
        fused = (1.0 - weight) * _minmax(coarse) + weight * _minmax(cosine.astype(np.float64))
        ranks = [c.rank for c in candidates]
        order = sorted(range(n), key=lambda i: (-fused[i], ranks[i]))[:k]
        fresh_rows = set(missing)
        records = tuple(
            CandidateRecord(
                ranks[i],
                "selected",
                0.0,
                Usage.zero(),
                f"cosine={cosine[i]:.4f} coarse={coarse[i]:.4f} fused={fused[i]:.4f}"
                + ("" if i in fresh_rows else " cached"),
            )
            for i in order
        )
        usage = Usage(1, spent[0], 0) if spent[0] else Usage.zero()
        return RerankDecision(
            tuple(ranks[i] for i in order),
            usage=usage,
            records=records,
            scores=tuple(float(fused[i]) for i in order),
        )

    @classmethod
    def from_options(cls, options: SemanticOptions | Mapping[str, Any]) -> SemanticReranker:
        if not isinstance(options, SemanticOptions):
            options = SemanticOptions.from_mapping(options)
        return cls(options)

    def __repr__(self) -> str:
        return (
            f"SemanticReranker(model={self.files.name!r}, backend={self.runtime.backend!r}, "
            f"precision={self.runtime.precision!r}, weight={self.options.weight})"
        )
