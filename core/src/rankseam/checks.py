"""Type checks for configuration and plugin values (the one place "a bool is not a number"
is decided)."""

from __future__ import annotations

import math
from typing import Any, TypeGuard

__all__ = ["is_int", "is_real", "non_empty_str"]


def is_int(value: object) -> TypeGuard[int]:
    """An ``int`` that is not a ``bool`` (``True`` is not a count, a rank or a size)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value: object) -> TypeGuard[int | float]:
    """A finite ``int`` or ``float`` that is not a ``bool`` (no NaN, no infinities)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def non_empty_str(instance: object, attribute: Any, value: Any) -> None:
    """An attrs validator: a string with something besides white space."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            f"{type(instance).__name__}.{attribute.name} must be a non-empty string, got {value!r}"
        )
