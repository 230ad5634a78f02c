"""Tool arguments checked in our words: an unknown argument is refused (a typo such as
``importnce`` must not store the default importance), and a value the tool's schema refuses is
explained by what the schema asks for, never with the validator's own text.

Both work from a tool's published input schema (what ``tools/list`` shows the client), so the
words match what the calling model was told.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["explain_invalid", "refuse_unknown"]

_SHOWN = 40  # characters of a refused value quoted back
_END = {False: "", True: ". Nothing was changed"}  # what a refused write adds


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


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
