"""The options of the embedder and of the decision backend, declared once with their types;
the host checks them (docs/writing-plugins.md, "Factories and options")."""

from __future__ import annotations

from typing import Any

import attrs

from rankseam.plugin import option
from rankseam_sentence_transformers.model import DEFAULT_MODEL

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_NO_THRESHOLD",
    "DEFAULT_YES_THRESHOLD",
    "EmbedderOptions",
    "SimilarityOptions",
]

#: Chosen on LoCoMo with all-MiniLM-L6-v2; see docs/plugins/sentence-transformers.md.
DEFAULT_YES_THRESHOLD = 0.55
DEFAULT_NO_THRESHOLD = 0.25
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
    return option("cpu", pattern=_DEVICE, expect=_DEVICES, help="where the model runs")


@attrs.frozen
class EmbedderOptions:
    """The options of the ``sentence-transformers`` embedder
    (``[embedders.sentence-transformers]``)."""

    model: str = _model()
    batch_size: int = option(32, ge=1, le=4096, help="texts per model batch")
    device: str = _device()
    normalize: bool = option(True, help="L2-normalise the vectors")


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
