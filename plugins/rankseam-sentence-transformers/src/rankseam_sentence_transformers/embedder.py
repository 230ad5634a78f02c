"""The ``sentence-transformers`` embedder: a local sentence-transformers model, offline.

The descriptor is computed from the model files without loading the model (name, a sha256
fingerprint of the files as ``revision``, dimensions, normalisation), so opening a store is
cheap; the model loads on the first :meth:`embed`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from rankseam.errors import ConfigurationError
from rankseam.plugin import parse_options
from rankseam.plugin.embedders import EmbedderDescriptor
from rankseam_sentence_transformers.model import (
    Encoder,
    ModelFiles,
    Runtime,
    load_encoder,
    resolve_model,
)
from rankseam_sentence_transformers.options import EmbedderOptions

__all__ = [
    "FUSION_SCALE",
    "FUSION_WEIGHT",
    "EmbedderOptions",
    "SentenceTransformerEmbedder",
    "space_revision",
]

#: How the vector channel counts in the default convex fusion (lexical BM25: weight 1, divided
#: by the query's best). A semantic model's cosines crowd into a narrow band (unrelated texts
#: still score 0.1-0.3 with all-MiniLM-L6-v2), so they are min-max scaled over the query's
#: vector hits; weight 0.7 sits mid-plateau (0.5-1.0) on both development sets
#: (docs/benchmarks.md, "Fusion"). Choose your own with ``[search] weights`` / ``scales``.
FUSION_WEIGHT = 0.7
FUSION_SCALE = "minmax"


class SentenceTransformerEmbedder:
    """Texts -> float32 ``(n, d)`` with a local sentence-transformers model."""

    def __init__(
        self,
        files: ModelFiles,
        *,
        batch_size: int = 32,
        normalize: bool = True,
        device: str = "cpu",
        runtime: Runtime | None = None,
    ) -> None:
        runtime = runtime if runtime is not None else Runtime(device=device)
        if runtime.quantize and runtime.backend != "onnx":
            raise ConfigurationError(
                "[embedders.sentence-transformers] quantize = true needs backend = 'onnx'"
            )
        self.files = files
        self.batch_size = batch_size
        self.normalize = normalize
        self.device = runtime.device
        self.runtime = runtime
        self.descriptor = EmbedderDescriptor(
            name=f"sentence-transformers/{files.name}",
            dimensions=files.dimensions,
            normalization="l2" if normalize else "none",
            revision=space_revision(files, runtime),
            fusion_weight=FUSION_WEIGHT,
            fusion_scale=FUSION_SCALE,
        )

    @cached_property
    def model(self) -> Encoder:
        """The encoder (loaded, or for ``onnx`` exported and loaded, on first use)."""
        return load_encoder(self.files, self.runtime)

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.descriptor.dimensions), dtype=np.float32)
        return self.model.encode(texts, batch_size=self.batch_size, normalize=self.normalize)

    @classmethod
    def from_options(
        cls, options: EmbedderOptions | Mapping[str, Any]
    ) -> SentenceTransformerEmbedder:
        """The embedder of ``options``: as the host checked them, or the
        ``[embedders.sentence-transformers]`` table (checked here)."""
        if not isinstance(options, EmbedderOptions):
            options = parse_options(EmbedderOptions, options, "embedders.sentence-transformers")
        return cls(
            resolve_model(options.model),
            batch_size=options.batch_size,
            normalize=options.normalize,
            runtime=Runtime(
                backend=options.backend,
                device=options.device,
                quantize=options.quantize,
                precision=options.precision,
                threads=options.threads,
                workers=options.workers,
                cache_dir=Path(options.cache_dir).expanduser() if options.cache_dir else None,
            ),
        )

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedder({self.descriptor.key!r}, "
            f"backend={self.runtime.backend!r}, precision={self.runtime.precision!r}, "
            f"device={self.device!r})"
        )


def space_revision(files: ModelFiles, runtime: Runtime) -> str:
    """The revision part of the vector space: the model files' fingerprint, plus ``+int8`` for
    the quantised ONNX graph and ``+bf16`` for the torch model cast to bfloat16 (their vectors
    differ from the model's; the fp32 graph's do not, to within 1e-5, so torch and fp32 ONNX
    share one space)."""
    if runtime.backend == "onnx" and runtime.quantize:
        return files.revision + "+int8"
    if runtime.precision == "bf16":
        return files.revision + "+bf16"
    return files.revision
