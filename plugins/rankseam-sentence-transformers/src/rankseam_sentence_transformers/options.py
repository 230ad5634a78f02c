"""The options of the embedder, the decision backend and the reranker, declared once with
their types; the host checks them (docs/writing-plugins.md, "Factories and options")."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from rankseam.plugin import option, parse_options
from rankseam_sentence_transformers.model import DEFAULT_MODEL, Runtime

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_NO_THRESHOLD",
    "DEFAULT_SEMANTIC_WEIGHT",
    "DEFAULT_YES_THRESHOLD",
    "Backend",
    "EmbedderOptions",
    "Precision",
    "SemanticOptions",
    "SimilarityOptions",
]

#: Chosen on LoCoMo with all-MiniLM-L6-v2; see docs/plugins/sentence-transformers.md.
DEFAULT_YES_THRESHOLD = 0.55
DEFAULT_NO_THRESHOLD = 0.25
#: Chosen on LoCoMo dev and SciFact train: of the weights measured, 0.4 gains on both sets and
#: loses on no LoCoMo category (docs/plugins/sentence-transformers.md, "Reranker `semantic`").
DEFAULT_SEMANTIC_WEIGHT = 0.4
#: Texts whose vectors are kept (384-d float32: 1.5 KiB each, 6 MiB in all).
DEFAULT_CACHE_SIZE = 4096

_DEVICE = r"cpu|mps|cuda(:\d+)?"
_DEVICES = "'cpu', 'cuda', 'cuda:N' or 'mps'"


def _model() -> Any:
    return option(
        DEFAULT_MODEL,
        nonempty=True,
        help=f"a local sentence-transformers model directory, or {DEFAULT_MODEL!r} (packaged)",
    )


def _device() -> Any:
    return option("cpu", pattern=_DEVICE, expect=_DEVICES, help="where the model runs (torch)")


Backend = Literal["torch", "onnx"]


def _quantize() -> Any:
    return option(False, help="onnx only: int8 weights (a vector space of its own)")


Precision = Literal["fp32", "bf16"]


_PRECISION_HELP = (
    "torch only: 'fp32', or 'bf16' (the model cast to bfloat16: fast on CPUs with AMX or "
    "AVX512-BF16, slow without; a vector space of its own)"
)


def _threads() -> Any:
    return option(1, ge=1, le=256, help="onnx only: intra-op threads per encode")


def _workers() -> Any:
    return option(
        2,
        ge=1,
        le=256,
        help="onnx int8 only: texts encoded at once on their own threads (each alone: the "
        "vectors are those of one at a time)",
    )


def _cache_dir() -> Any:
    return option(
        "",
        help="onnx only: folder for the exported model ('' = models/ in the per-user "
        "rankseam data folder)",
    )


@attrs.frozen
class EmbedderOptions:
    """The options of the ``sentence-transformers`` embedder
    (``[embedders.sentence-transformers]``)."""

    model: str = _model()
    batch_size: int = option(32, ge=1, le=4096, help="texts per model batch")
    device: str = _device()
    normalize: bool = option(True, help="L2-normalise the vectors")
    backend: Backend = option(
        "torch",
        help="'torch', or 'onnx' (ONNX Runtime on the CPU; pip install "
        "'rankseam-sentence-transformers[torch,export]'; the model is exported once, locally)",
    )
    quantize: bool = _quantize()
    precision: Precision = option("fp32", help=_PRECISION_HELP)
    threads: int = _threads()
    workers: int = _workers()
    cache_dir: str = _cache_dir()


@attrs.frozen
class SimilarityOptions:
    """The options of the ``similarity`` decision backend (``[decision_backends.similarity]``)."""

    model: str = _model()
    device: str = _device()
    yes_threshold: float = option(0.55, ge=-1, le=1, help="cosine from which a candidate is a yes")
    no_threshold: float = option(
        DEFAULT_NO_THRESHOLD, ge=-1, le=1, help="cosine below which a candidate is a no"
    )
    cache_size: int = option(DEFAULT_CACHE_SIZE, ge=2, help="texts whose vectors are kept")


@attrs.frozen
class SemanticOptions:
    """The options of the ``semantic`` reranker (``[rerankers.semantic]``)."""

    weight: float = option(
        DEFAULT_SEMANTIC_WEIGHT,
        ge=0,
        le=1,
        help="share of the cosine in the fused score (0 = the coarse order, 1 = cosine alone)",
    )
    model: str = option(
        DEFAULT_MODEL,
        nonempty=True,
        help=f"a local sentence-transformers model directory, or {DEFAULT_MODEL!r} (packaged)",
    )
    backend: Literal["auto", "torch", "onnx"] = option(
        "auto",
        help="'auto' = 'onnx' when ONNX Runtime and onnx are installed, else 'torch' ('torch' with "
        "precision 'bf16')",
    )
    quantize: bool = option(True, help="onnx only: int8 weights (faster; see the docs)")
    precision: Precision = option("fp32", help=_PRECISION_HELP)
    max_seq_length: int = option(
        128, ge=8, le=512, help="tokens of a candidate text that are encoded"
    )
    batch_size: int = option(16, ge=1, le=256, help="texts per batch (fp32 and torch)")
    threads: int = option(1, ge=1, le=256, help="onnx only: intra-op threads")
    workers: int = _workers()
    cache_size: int = option(4096, ge=0, help="candidate vectors kept (0 = none)")
    cache_dir: str = option("", help="onnx only: export folder ('' = the per-user default)")
    deadline_s: float = option(10.0, gt=0, help="seconds the encoding of one pool may take")
    device: str = _device()

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> SemanticOptions:
        return parse_options(cls, options, "rerankers.semantic")

    def runtime(self, onnx: bool) -> Runtime:
        """How the model runs for these options (``onnx``: is ONNX Runtime installed)."""
        backend = self.backend
        if backend == "auto":
            backend = "onnx" if onnx and self.precision == "fp32" else "torch"
        return Runtime(
            backend=backend,
            device=self.device,
            quantize=self.quantize and backend == "onnx",
            precision=self.precision,
            threads=self.threads,
            workers=self.workers,
            cache_dir=Path(self.cache_dir).expanduser() if self.cache_dir else None,
            max_seq_length=self.max_seq_length,
        )
