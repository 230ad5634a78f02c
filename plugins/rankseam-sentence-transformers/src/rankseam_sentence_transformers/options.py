"""Option validation shared by the embedder and the decision backend (fix-it messages)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rankseam.errors import ConfigurationError
from rankseam.plugin import check_options, is_int, is_real
from rankseam_sentence_transformers.model import DEFAULT_MODEL

__all__ = ["MODEL_OPTIONS", "check_known", "fraction", "model_options"]

#: Options every component of this plugin takes to pick and run its model.
MODEL_OPTIONS = ("model", "batch_size", "device")
_DEVICE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")


def check_known(where: str, options: Mapping[str, Any], known: tuple[str, ...]) -> None:
    check_options(where, options, known)


def model_options(where: str, options: Mapping[str, Any]) -> tuple[str, int, str]:
    """``(model, batch_size, device)`` validated, with defaults."""
    model = options.get("model", DEFAULT_MODEL)
    if not isinstance(model, str) or not model.strip():
        raise ConfigurationError(
            f"{where}: model must be a local model directory or {DEFAULT_MODEL!r}, got {model!r}"
        )
    batch = options.get("batch_size", 32)
    if not is_int(batch) or not 1 <= batch <= 4096:
        raise ConfigurationError(
            f"{where}: batch_size must be an integer in 1..4096, got {batch!r}; "
            "e.g. batch_size = 32"
        )
    device = options.get("device", "cpu")
    if not isinstance(device, str) or not _DEVICE.match(device):
        raise ConfigurationError(
            f"{where}: device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got {device!r}"
        )
    return model, batch, device


def fraction(where: str, options: Mapping[str, Any], key: str, default: float) -> float:
    """A number in [-1, 1] (a cosine threshold)."""
    value = options.get(key, default)
    if not is_real(value) or not -1.0 <= value <= 1.0:
        raise ConfigurationError(
            f"{where}: {key} must be a cosine in [-1, 1], got {value!r}; e.g. {key} = {default}"
        )
    return float(value)
