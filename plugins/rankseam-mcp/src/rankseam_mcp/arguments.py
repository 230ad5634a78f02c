"""Tool arguments checked in our words: an unknown argument is refused (a typo such as
``importnce`` must not store the default importance), and a value the tool's schema refuses is
explained by what the schema asks for, never with the validator's own text.

Types are strict, as JSON writes them (:func:`check_arguments`): ``"5"`` is not an integer,
``true`` is not a number, ``"yes"`` is not a boolean and ``"{}"`` is not an object; nothing is
converted. Integers are bounded (``maximum`` in the schema), so no value reaches the store
that it cannot hold.

Both work from a tool's published input schema (what ``tools/list`` shows the client), so the
words match what the calling model was told.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["check_arguments", "explain_invalid", "refuse_unknown"]

_SHOWN = 40  # characters of a refused value quoted back
_END = {False: "", True: ". Nothing was changed"}  # what a refused write adds


_JSON_KIND = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "an object",
    type(None): "null",
}


def _shown(value: Any) -> str:
    """``value`` as the client wrote it (JSON), cut to a few dozen characters."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _what(value: Any) -> str:
    """``value`` and, where its kind is not plain from the text, what it is."""
    shown = _shown(value)
    if isinstance(value, str) or (isinstance(value, float) and math.isinf(value)):
        return f"{shown} ({_JSON_KIND.get(type(value), 'a value')})"
    return shown


def _properties(schema: Mapping[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return dict(props) if isinstance(props, Mapping) else {}


def _takes(tool: str, schema: Mapping[str, Any]) -> str:
    names = list(_properties(schema))
    return f"{tool} takes {', '.join(names)}" if names else f"{tool} takes no arguments"


def refuse_unknown(
    tool: str, arguments: Mapping[str, Any], schema: Mapping[str, Any], *, writes: bool = False
) -> str | None:
    """Why ``arguments`` name something the tool does not take (None when they do not)."""
    known = _properties(schema)
    unknown = [name for name in arguments if name not in known]
    if not unknown:
        return None
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        parts.append(f"{name!r}{hint}")
    which = "argument" if len(unknown) == 1 else "arguments"
    return f"{tool}: unknown {which} {', '.join(parts)}; {_takes(tool, schema)}{_END[writes]}"


def _kind(spec: Mapping[str, Any]) -> str:
    """What a property's schema asks for, in words (``anyOf`` with null reads as optional)."""
    options = spec.get("anyOf")
    if isinstance(options, Sequence) and not isinstance(options, str):
        kinds = [_kind(o) for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
        return " or ".join(dict.fromkeys(kinds)) or "a value"
    kind = spec.get("type")
    words = {
        "string": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "true or false",
        "object": "an object (a JSON mapping)",
        "array": "a list",
    }.get(kind if isinstance(kind, str) else "", "a value")
    low, high = spec.get("minimum"), spec.get("maximum")
    if kind in ("integer", "number"):
        if low is not None and high is not None:
            words += f" from {low} to {high}"
        elif low is not None:
            words += f" of at least {low}"
        elif high is not None:
            words += f" of at most {high}"
    if kind == "string" and spec.get("minLength") == 1:
        words = "a non-empty string"
    return words


def _spec(schema: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    spec = _properties(schema).get(name, {})
    return spec if isinstance(spec, Mapping) else {}


def explain_invalid(
    tool: str,
    errors: Sequence[Mapping[str, Any]],
    schema: Mapping[str, Any],
    *,
    writes: bool = False,
) -> str:
    """The message for the validator's ``errors`` (each with ``loc``, ``type`` and ``input``),
    worded from the tool's input ``schema``."""
    parts: list[str] = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ()) if p not in ("", None)]
        name = loc[0] if loc else "?"
        where = f"the argument {name!r}" if len(loc) <= 1 else f"{'.'.join(loc)!r}"
        kind = str(error.get("type", ""))
        if kind == "missing":
            parts.append(f"{where} is required ({_kind(_spec(schema, name))})")
            continue
        spec = _spec(schema, name)
        wanted = _kind(spec) if len(loc) <= 1 else "a valid value"
        parts.append(f"{where} must be {wanted}, not {_shown(error.get('input'))}")
    listed = "; ".join(dict.fromkeys(parts)) or "the arguments do not match the tool's schema"
    return f"{tool}: {listed}{_END[writes]}"


def _fits(value: Any, spec: Mapping[str, Any]) -> bool:
    """Whether ``value`` (as JSON decoded it) is what ``spec`` asks for, strictly."""
    options = spec.get("anyOf")
    if isinstance(options, Sequence) and not isinstance(options, str):
        return any(_fits(value, o) for o in options if isinstance(o, Mapping))
    kind = spec.get("type")
    if kind == "null":
        return value is None
    if kind == "string":
        if not isinstance(value, str):
            return False
        low, high = spec.get("minLength"), spec.get("maxLength")
        return (low is None or len(value) >= low) and (high is None or len(value) <= high)
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if kind == "integer" and not isinstance(value, int):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        low, high = spec.get("minimum"), spec.get("maximum")
        return (low is None or value >= low) and (high is None or value <= high)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    return True  # a schema that says nothing of the type takes anything


def check_arguments(
    tool: str, arguments: Mapping[str, Any], schema: Mapping[str, Any], *, writes: bool = False
) -> str | None:
    """Why ``arguments`` do not match the tool's published ``schema`` (None when they do):
    a missing required argument, or a value of the wrong JSON type or out of its range. Strict:
    no value is converted (``"5"`` is not an integer, ``true`` not a number)."""
    parts: list[str] = []
    required = schema.get("required")
    for name in required if isinstance(required, list) else ():
        if name not in arguments:
            parts.append(f"the argument {name!r} is required ({_kind(_spec(schema, name))})")
    for name, value in arguments.items():
        spec = _spec(schema, name)
        if not _fits(value, spec):
            parts.append(f"the argument {name!r} must be {_kind(spec)}, not {_what(value)}")
    if not parts:
        return None
    return f"{tool}: {'; '.join(parts)}{_END[writes]}"
