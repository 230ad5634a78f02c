"""The ``similarity`` decision backend: cosine(query, candidate) against two thresholds.

For the rerank question (``decision_kind == "memory.rerank"``; the query is
``request.evidence[0]``, the candidate text is ``request.subject``):

- ``cosine >= yes_threshold`` -> YES
- ``cosine < no_threshold``   -> NO
- otherwise                   -> ABSTAIN

``rationale`` carries the score (``"cosine 0.4312; yes >= 0.45, no < 0.2"``). Any other decision
kind (the write gate's "is this worth remembering?", or a kind this backend does not know)
is answered ABSTAIN with a rationale saying so: similarity to a query is no answer to them.

The defaults were chosen on LoCoMo (docs/plugins/sentence-transformers.md has the evidence).
Each text is embedded alone (no padding, so the score does not depend on what else is being
scored) and vectors are kept in a bounded LRU cache, so a rerank over n candidates encodes at
most n + 1 texts. Each evaluation reports one call; ``input_tokens`` counts the tokens actually
encoded for it (0 when both texts were cached).
The model runs in a worker thread, so ``evaluate`` does not block the event loop.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from rankseam.errors import ConfigurationError
from rankseam.plugin import parse_options
from rankseam.plugin.decision import (
    RERANK_DECISION_KIND,
    DecisionOutcome,
    DecisionRequest,
    DecisionResult,
)
from rankseam.types import Usage
from rankseam_sentence_transformers.model import LoadedModel, ModelFiles, load_model, resolve_model
from rankseam_sentence_transformers.options import (
    DEFAULT_CACHE_SIZE,
    DEFAULT_NO_THRESHOLD,
    DEFAULT_YES_THRESHOLD,
    SimilarityOptions,
)

__all__ = [
    "DEFAULT_NO_THRESHOLD",
    "DEFAULT_YES_THRESHOLD",
    "POLICY_ID",
    "SimilarityDecisionBackend",
    "SimilarityOptions",
]

POLICY_ID = "rankseam.decision.similarity.v1"
_WHERE = "decision backend 'similarity'"


class SimilarityDecisionBackend:
    """Embedding cosine between query and candidate -> yes / abstain / no."""

    policy_id = POLICY_ID
    deterministic = True

    def __init__(
        self,
        files: ModelFiles,
        *,
        yes_threshold: float = DEFAULT_YES_THRESHOLD,
        no_threshold: float = DEFAULT_NO_THRESHOLD,
        device: str = "cpu",
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        if not no_threshold <= yes_threshold:
            raise ConfigurationError(
                f"{_WHERE}: no_threshold ({no_threshold}) must not exceed yes_threshold "
                f"({yes_threshold}); cosines between them abstain"
            )
        self.files = files
        self.yes_threshold = yes_threshold
        self.no_threshold = no_threshold
        self.device = device
        self._model: LoadedModel | None = None
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()

    @property
    def descriptor(self) -> Mapping[str, Any]:
        return {
            "name": "similarity",
            "model": self.files.name,
            "model_revision": self.files.revision,
            "yes_threshold": self.yes_threshold,
            "no_threshold": self.no_threshold,
        }

    @property
    def model(self) -> LoadedModel:
        if self._model is None:
            self._model = load_model(self.files, self.device)
        return self._model

    def _vectors(self, texts: list[str]) -> tuple[list[np.ndarray], list[str]]:
        """The unit vectors of ``texts`` and the texts that had to be encoded (cache misses).

        Each text is encoded alone (batch of one: no padding, so a vector never depends on
        what it was batched with) and kept in a bounded LRU cache: a rerank asks about one
        query many times, and a store's memories recur across queries.
        """
        found: dict[str, np.ndarray] = {}
        with self._cache_lock:
            for text in texts:
                vector = self._cache.get(text)
                if vector is not None:
                    self._cache.move_to_end(text)
                    found[text] = vector
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        for text in missing:
            found[text] = self.model.encode([text], batch_size=1, normalize=True)[0]
            with self._cache_lock:
                self._cache[text] = found[text]
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return [found[t] for t in texts], missing

    def cosine(self, query: str, text: str) -> float:
        """The score a verdict is based on: cosine of the two unit vectors."""
        (q, t), _ = self._vectors([query, text])
        return float(np.dot(q, t))

    def decide(self, request: DecisionRequest) -> DecisionResult:
        """The verdict, synchronously (``evaluate`` runs this in a worker thread)."""
        if request.decision_kind != RERANK_DECISION_KIND or not request.evidence:
            return DecisionResult(
                DecisionOutcome.ABSTAIN,
                self.policy_id,
                Usage.zero(),
                rationale=f"similarity answers only {RERANK_DECISION_KIND!r} with a query; "
                f"abstaining on {request.decision_kind!r}",
            )
        (query_vector, subject_vector), encoded = self._vectors(
            [request.evidence[0], request.subject]
        )
        score = float(np.dot(query_vector, subject_vector))
        tokens = self.model.count_tokens(encoded) if encoded else 0
        usage = Usage(calls=1, input_tokens=tokens, output_tokens=0)
        outcome = DecisionOutcome.of_score(
            score, yes_threshold=self.yes_threshold, no_threshold=self.no_threshold
        )
        rationale = f"cosine {score:.4f}; yes >= {self.yes_threshold:g}, no < {self.no_threshold:g}"
        return DecisionResult(outcome, self.policy_id, usage, rationale=rationale)

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        import asyncio  # on first use: loading the plugin does not import asyncio

        return await asyncio.to_thread(self.decide, request)

    @classmethod
    def from_options(
        cls, options: SimilarityOptions | Mapping[str, Any]
    ) -> SimilarityDecisionBackend:
        """The backend of ``options``: as the host checked them, or the
        ``[decision_backends.similarity]`` table (checked here)."""
        if not isinstance(options, SimilarityOptions):
            options = parse_options(SimilarityOptions, options, "decision_backends.similarity")
        return cls(
            resolve_model(options.model),
            yes_threshold=options.yes_threshold,
            no_threshold=options.no_threshold,
            device=options.device,
            cache_size=options.cache_size,
        )

    def __repr__(self) -> str:
        return (
            f"SimilarityDecisionBackend(model={self.files.name!r}, "
            f"yes_threshold={self.yes_threshold}, no_threshold={self.no_threshold})"
        )
