"""Type checks for configuration and plugin values (the one place "a bool is not a number"
is decided)."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, TypeGuard

__all__ = [
    "DECIMAL_INT",
    "MAX_JSON_DEPTH",
    "MAX_JSON_VALUES",
    "decimal_int",
    "is_int",
    "is_real",
    "json_shape",
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

#: An integer as a setting is written: ASCII digits, an optional sign (spaces around it are
#: removed first).
DECIMAL_INT = re.compile(r"[+-]?[0-9]+")


def decimal_int(text: str) -> int | None:
    """``text`` as an integer when it is one written in ASCII decimal digits (an optional sign,
    spaces around it), else None. The one parser of integer environment variables: ``int()``
    also reads ``1_0`` as 10 and other scripts' digits (``٥`` as 5), which no setting means."""
    text = text.strip()
    if not DECIMAL_INT.fullmatch(text):
        return None
    return int(text)


def non_empty_str(instance: object, attribute: Any, value: Any) -> None:
    """An attrs validator: a string with something besides white space."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            f"{type(instance).__name__}.{attribute.name} must be a non-empty string, got {value!r}"
        )


#: Deepest nesting of a JSON document read from a file (an ingest line, a snapshot record).
MAX_JSON_DEPTH = 64
#: Most values (elements, members, scalars) of one JSON document read from a file: parsing
#: costs Python objects per value (up to ~70 bytes for an empty object), so this, not the
#: byte length, bounds the memory a parse may take.
MAX_JSON_VALUES = 100_000

# A JSON string (skipped whole, so brackets and commas inside it do not count), a bracket
# or a comma.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')


def json_shape(text: str, max_depth: int, max_values: int) -> tuple[int, int]:
    """``(depth, values)`` of the JSON ``text``: its nesting depth and about how many values
    it holds (commas and opening brackets outside strings, plus one). The scan stops as soon
    as either exceeds its limit; a text that cannot exceed them (few brackets and commas at
    all) is not scanned, and then both numbers are upper bounds."""
    brackets = text.count("[") + text.count("{")
    if brackets <= max_depth and brackets + text.count(",") < max_values:
        return brackets, brackets + text.count(",") + 1
    depth = deepest = 0
    values = 1
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token == ",":
            values += 1
        elif token in "[{":
            depth += 1
            values += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
        if deepest > max_depth or values > max_values:
            break
    return deepest, values


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(
    data: bytes, *, max_depth: int = MAX_JSON_DEPTH, max_values: int = MAX_JSON_VALUES
) -> Any:
    """One JSON document from UTF-8 ``data``. Raises ``ValueError`` with a message fit for
    users on invalid UTF-8, invalid JSON, nesting deeper than ``max_depth``, more than about
    ``max_values`` values, ``NaN`` or ``Infinity``, or an integer too long to read; the limits
    are checked before parsing, so a parse never recurses past ``max_depth`` nor builds more
    than ``max_values`` objects."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 (byte {exc.start + 1}: {exc.reason})") from None
    depth, values = json_shape(text, max_depth, max_values)
    if depth > max_depth:
        raise ValueError(f"JSON nested more than {max_depth} levels deep")
    if values > max_values:
        raise ValueError(f"JSON holding more than {max_values} values")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:  # NaN, Infinity, an integer of thousands of digits
        raise ValueError(f"not valid JSON ({exc})") from None
