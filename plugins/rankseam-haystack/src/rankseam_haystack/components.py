"""What the two components (the retriever and the ranker) check alike."""

from __future__ import annotations

from rankseam.errors import ValidationError
from rankseam.plugin import is_int

__all__ = ["check_top_k"]


def check_top_k(value: object, name: str = "top_k") -> int:
    """``value`` as a positive number of documents, or a ``ValidationError`` naming it."""
    if not is_int(value) or value < 1:  # type: ignore[operator]
        raise ValidationError(f"{name} must be a positive whole number of documents, got {value!r}")
    return int(value)  # type: ignore[arg-type]
