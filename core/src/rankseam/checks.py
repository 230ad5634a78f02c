"""Type checks for configuration and plugin values (the one place "a bool is not a number"
is decided)."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, TypeGuard

__all__ = [
    "MAX_JSON_DEPTH",
    "is_int",
    "is_real",
    "json_depth",
    "non_empty_str",
    "parse_json",
]


def is_int(value: object) -> TypeGuard[int]:
    """An ``int`` that is not a ``bool`` (``True`` is not a count, a rank or a size)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value: object) -> TypeGuard[int | float]:
    """A finite ``int`` or ``float`` that is not a ``bool`` (no NaN, no infinities, no
    integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return -_FLOAT_MAX <= value <= _FLOAT_MAX
    return math.isfinite(value)


_FLOAT_MAX = int(sys.float_info.max)


def non_empty_str(instance: object, attribute: Any, value: Any) -> None:
    """An attrs validator: a string with something besides white space."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            f"{type(instance).__name__}.{attribute.name} must be a non-empty string, got {value!r}"
        )


#: Deepest nesting of a JSON document read from a file (an ingest line, a snapshot record).
MAX_JSON_DEPTH = 64

# A JSON string (skipped whole, so brackets inside it do not count) or a bracket.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def json_depth(text: str, limit: int) -> int:
    """The nesting depth of the JSON ``text``, counted up to ``limit + 1`` (the scan stops
    there). A text with at most ``limit`` brackets is not scanned at all."""
    if text.count("[") + text.count("{") <= limit:
        return min(text.count("[") + text.count("{"), limit)
    depth = deepest = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif token in "]}":
            depth -= 1
    return deepest


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(data: bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """One JSON document from UTF-8 ``data``. Raises ``ValueError`` with a message fit for
    users on invalid UTF-8, invalid JSON, nesting deeper than ``max_depth``, ``NaN`` or
    ``Infinity``, or an integer too long to read; parsing never recurses past ``max_depth``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 (byte {exc.start + 1}: {exc.reason})") from None
    if json_depth(text, max_depth) > max_depth:
        raise ValueError(f"JSON nested more than {max_depth} levels deep")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:  # NaN, Infinity, an integer of thousands of digits
        raise ValueError(f"not valid JSON ({exc})") from None
