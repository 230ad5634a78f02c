"""The ``sentence-transformers`` embedder: a local sentence-transformers model, offline.

The descriptor is computed from the model files without loading the model (name, a sha256
fingerprint of the files as ``revision``, dimensions, normalisation), so opening a store is
cheap; the model loads on the first :meth:`embed`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rankseam.errors import ConfigurationError
from rankseam.plugin import EmbedderDescriptor
from rankseam_sentence_transformers.model import LoadedModel, ModelFiles, load_model, resolve_model
from rankseam_sentence_transformers.options import MODEL_OPTIONS, check_known, model_options

__all__ = ["EMBEDDER_OPTIONS", "FUSION_SCALE", "FUSION_WEIGHT", "SentenceTransformerEmbedder"]

EMBEDDER_OPTIONS = (*MODEL_OPTIONS, "normalize")
#: How the vector channel counts in the default convex fusion (lexical BM25: weight 1, divided
#: by the query's best). A semantic model's cosines crowd into a narrow band (unrelated texts
#: still score 0.1-0.3 with all-MiniLM-L6-v2), so they are min-max scaled over the query's
#: vector hits; weight 0.7 sits mid-plateau (0.5-1.0) on both development sets
#: (docs/benchmarks.md, "Fusion"). Choose your own with ``[search] weights`` / ``scales``.
FUSION_WEIGHT = 0.7
FUSION_SCALE = "minmax"
_WHERE = "embedder 'sentence-transformers'"


class SentenceTransformerEmbedder:
    """Texts -> float32 ``(n, d)`` with a local sentence-transformers model."""

    def __init__(
        self,
        files: ModelFiles,
        *,
        batch_size: int = 32,
        normalize: bool = True,
        device: str = "cpu",
    ) -> None:
        self.files = files
        self.batch_size = batch_size
        self.normalize = normalize
        self.device = device
        self.descriptor = EmbedderDescriptor(
            name=f"sentence-transformers/{files.name}",
            dimensions=files.dimensions,
            normalization="l2" if normalize else "none",
            revision=files.revision,
            fusion_weight=FUSION_WEIGHT,
            fusion_scale=FUSION_SCALE,
        )
        self._model: LoadedModel | None = None

    @property
    def model(self) -> LoadedModel:
        if self._model is None:
            self._model = load_model(self.files, self.device)
        return self._model

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.descriptor.dimensions), dtype=np.float32)
        return self.model.encode(texts, batch_size=self.batch_size, normalize=self.normalize)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SentenceTransformerEmbedder:
        check_known(_WHERE, options, EMBEDDER_OPTIONS)
        model, batch_size, device = model_options(_WHERE, options)
        normalize = options.get("normalize", True)
        if not isinstance(normalize, bool):
            raise ConfigurationError(
                f"{_WHERE}: normalize must be true or false, got {normalize!r}"
            )
        return cls(resolve_model(model), batch_size=batch_size, normalize=normalize, device=device)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.descriptor.key!r}, device={self.device!r})"
