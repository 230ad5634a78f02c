"""Reading a model's JSON answer: extraction from the reply text, and schema checking.

Servers in JSON-object mode (or with no response_format at all) sometimes wrap the object in
prose or a Markdown code fence. :func:`extract_json` accepts one JSON value surrounded by text;
anything else is unparseable. :func:`schema_errors` checks the parsed value against the subset of
JSON Schema that structured-output requests use (type, enum, const, properties, required,
additionalProperties, items, min/maxItems, uniqueItems, min/max(Length), exclusive bounds,
anyOf/oneOf/allOf). Keywords outside that subset are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["extract_json", "schema_errors", "NotJSON"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)
_MAX_STARTS = 64


class NotJSON(ValueError):
    """The text holds no JSON value."""


def extract_json(text: str) -> tuple[Any, bool]:
    """The JSON value in ``text`` and whether it had to be cut out of surrounding prose."""
    stripped = text.strip()
    try:
        return json.loads(stripped), False
    except ValueError:
        pass
    for match in _FENCE.finditer(stripped):
        try:
            return json.loads(match.group(1).strip()), True
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    starts = 0
    for i, ch in enumerate(stripped):
        if ch not in "{[":
            continue
        starts += 1
        if starts > _MAX_STARTS:
            break
        try:
            value, _end = decoder.raw_decode(stripped, i)
        except ValueError:
            continue
        return value, True
    raise NotJSON("no JSON value found in the model's reply")


_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool) or (
            isinstance(value, float) and value.is_integer()
        )
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    expected = _TYPES.get(name)
    return True if expected is None else isinstance(value, expected)


def schema_errors(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Human-readable violations of ``schema`` by ``value`` (empty when it conforms).

    Messages name paths, types and bounds, never the offending strings (model output may
    repeat memory text)."""
    errors: list[str] = []
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_is_type(value, n) for n in names):
            return [f"{path}: expected {'/'.join(names)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: not one of {list(schema['enum'])}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: expected {schema['const']!r}")
    for key in ("anyOf", "oneOf"):
        if key in schema:
            matches = sum(not schema_errors(value, s, path) for s in schema[key])
            if matches == 0 or (key == "oneOf" and matches > 1):
                errors.append(f"{path}: does not match {key}")
    for sub in schema.get("allOf", ()):
        errors.extend(schema_errors(value, sub, path))
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                errors.append(f"{path}: missing required property {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                errors.extend(schema_errors(item, props[name], f"{path}.{name}"))
            elif extra is False:
                errors.append(f"{path}: unexpected property {str(name)[:40]!r}")
            elif isinstance(extra, Mapping):
                errors.extend(schema_errors(item, extra, f"{path}.{name}"))
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        if schema.get("uniqueItems"):
            seen = [json.dumps(v, sort_keys=True) for v in value]
            if len(set(seen)) != len(seen):
                errors.append(f"{path}: items are not unique")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                errors.extend(schema_errors(item, items, f"{path}[{i}]"))
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} is above the maximum {schema['maximum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            errors.append(f"{path}: {value} is not above {schema['exclusiveMinimum']}")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            errors.append(f"{path}: {value} is not below {schema['exclusiveMaximum']}")
    return errors
