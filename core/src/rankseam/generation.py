"""The generation port: one structured generation request, answered with a parsed object.

A generation backend receives a :class:`GenerationRequest` (instructions, a JSON input object
and a JSON schema for the output) and returns a :class:`GenerationResult` (the parsed object,
the raw text and the usage). Backends are registered through the ``register_generation_backends``
hook and handed to roles by :meth:`rankseam.assembly.ComponentContext.generation_backend`.

On failure a backend raises the typed errors of :mod:`rankseam.errors`:

- :class:`~rankseam.errors.BackendTimeoutError` — no answer within the timeout;
- :class:`~rankseam.errors.BackendUnavailableError` — unreachable, or the request was refused;
- :class:`~rankseam.errors.InvalidOutputError` — the answer is not JSON, or violates the schema.

A role's failure policy applies here as for decisions (``docs/decision-port.md``): a fail-closed
role (listwise reranking) gets the backend itself, a fail-open role gets it inside
:class:`FailOpenGenerationBackend` (the generation face of the one fail-open envelope,
:class:`rankseam.governed.FailOpenEnvelope`), which turns any ``Exception`` into a result marked
``used_fallback=True`` (``output`` ``None``) and never lets ``asyncio.CancelledError`` pass
as a result.

Turning model text into an object is one concept with one home: :func:`parse_output` (strict
JSON, the whole text, then :func:`validate_output`). Backends should use it instead of their own
"repair" logic, and consumers may call :func:`validate_output` again on what a backend returned:
a consumer never has to trust a backend's validation.

The schema language is a small, documented subset of JSON Schema (enough for rank lists and
similar narrow answers): ``type`` (``object``, ``array``, ``integer``, ``number``, ``string``,
``boolean``, ``null``), ``properties``, ``required``, ``additionalProperties`` (``false`` only),
``items``, ``minItems``, ``maxItems``, ``enum``. ``integer`` means a JSON integer literal: ``3.0``,
``true`` and ``"3"`` are not integers.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

import attrs

from rankseam.checks import is_int, is_real, non_empty_str
from rankseam.errors import InvalidOutputError
from rankseam.governed import DEFAULT_ROLE_TIMEOUT_S, FailOpenEnvelope
from rankseam.types import Usage

log = logging.getLogger("rankseam.generation")

__all__ = [
    "FailOpenGenerationBackend",
    "GenerationBackend",
    "GenerationRequest",
    "GenerationResult",
    "check_schema",
    "parse_output",
    "thaw",
    "validate_output",
]

_SUPPORTED_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "enum",
        "description",
        "title",
    }
)
_TYPES = frozenset({"object", "array", "integer", "number", "string", "boolean", "null"})


# --------------------------------------------------------------------------- JSON values


def _freeze_json(value: Any, where: str) -> Any:
    """A deep, immutable copy of a JSON value (mappings -> read-only mappings, lists -> tuples)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} holds a non-finite number {value!r}; JSON has no NaN/inf")
        return value
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-string key {key!r}; JSON keys are strings")
            out[key] = _freeze_json(item, f"{where}.{key}")
        return MappingProxyType(out)
    if isinstance(value, list | tuple):
        return tuple(_freeze_json(item, f"{where}[{i}]") for i, item in enumerate(value))
    raise ValueError(
        f"{where} holds {type(value).__name__} {value!r}, which is not a JSON value; "
        "use str, int, float, bool, None, lists and string-keyed mappings"
    )


def thaw(value: Any) -> Any:
    """A plain ``dict``/``list`` copy of a (possibly frozen) JSON value, for ``json.dumps``."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    return value


# --------------------------------------------------------------------------- schema subset


def check_schema(schema: Mapping[str, Any], where: str = "output_schema") -> None:
    """Raise ``ValueError`` when ``schema`` uses anything outside the supported subset."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where} must be a mapping (a JSON schema), got {type(schema).__name__}")
    unknown = sorted(set(schema) - _SUPPORTED_KEYWORDS)
    if unknown:
        raise ValueError(
            f"{where} uses unsupported JSON-schema keyword(s) {unknown}; the generation port "
            f"supports {sorted(_SUPPORTED_KEYWORDS)}"
        )
    kind = schema.get("type")
    if kind is not None and kind not in _TYPES:
        raise ValueError(f"{where}.type must be one of {sorted(_TYPES)}, got {kind!r}")
    if schema.get("additionalProperties", False) is not False:
        raise ValueError(
            f"{where}.additionalProperties may only be false (or absent, meaning false)"
        )
    for name, sub in (schema.get("properties") or {}).items():
        check_schema(sub, f"{where}.properties.{name}")
    if "items" in schema:
        check_schema(schema["items"], f"{where}.items")


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, list | tuple)
    if kind == "integer":
        return is_int(value)
    if kind == "number":
        return is_real(value)  # JSON has no NaN or infinity
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    return value is None  # "null"


def _violation(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    kind = schema.get("type")
    if kind is not None and not _type_ok(value, kind):
        return f"{path} must be of type {kind}, got {type(value).__name__}"
    if "enum" in schema and value not in list(schema["enum"]):
        return f"{path} must be one of {list(schema['enum'])!r}"
    if isinstance(value, Mapping) and kind == "object":
        props: Mapping[str, Any] = schema.get("properties") or {}
        missing = [key for key in schema.get("required", ()) if key not in value]
        if missing:
            return f"{path} misses required key(s) {missing}"
        extra = sorted(set(value) - set(props))
        if extra:
            return f"{path} has unexpected key(s) {extra}"
        for key, sub in props.items():
            if key in value:
                found = _violation(value[key], sub, f"{path}.{key}")
                if found:
                    return found
    if isinstance(value, list | tuple) and kind == "array":
        if "minItems" in schema and len(value) < schema["minItems"]:
            return f"{path} needs at least {schema['minItems']} item(s), got {len(value)}"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{path} allows at most {schema['maxItems']} item(s), got {len(value)}"
        if "items" in schema:
            for i, item in enumerate(value):
                found = _violation(item, schema["items"], f"{path}[{i}]")
                if found:
                    return found
    return None


def validate_output(output: Any, schema: Mapping[str, Any]) -> Any:
    """Return ``output`` when it matches ``schema``, else raise ``InvalidOutputError``."""
    problem = _violation(output, schema, "output")
    if problem is not None:
        raise InvalidOutputError(
            f"the generation output violates its schema: {problem}. The backend must answer with "
            "exactly one JSON object matching the request's output_schema; check the model and "
            "its structured-output settings"
        )
    return output


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicate_keys(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError("an object repeats a key")
        out[key] = value
    return out


def parse_output(raw_text: str, schema: Mapping[str, Any]) -> Any:
    """Parse a model's raw text as ONE strict JSON value matching ``schema``.

    The whole text (surrounding whitespace aside) must be the JSON value: prose around it,
    reasoning prefixes such as ``</think>``, code fences, truncated JSON, ``NaN``/``Infinity``,
    duplicate keys and non-ASCII digits are all :class:`~rankseam.errors.InvalidOutputError`.
    Nothing is repaired.
    """
    if not isinstance(raw_text, str):
        raise InvalidOutputError(
            f"the generation backend returned {type(raw_text).__name__} instead of text"
        )
    try:
        value = json.loads(
            raw_text.strip(),
            parse_constant=_reject_constant,
            object_pairs_hook=_no_duplicate_keys,
        )
    except (ValueError, RecursionError) as exc:
        # The message never quotes the text: model output may echo memory text.
        raise InvalidOutputError(
            f"the generation output ({len(raw_text)} characters) is not one strict JSON value "
            f"({exc}). Nothing is repaired: configure the backend for JSON output "
            "(structured output / JSON mode) and check the model"
        ) from None
    return validate_output(value, schema)


# --------------------------------------------------------------------------- value objects


def _json_object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(
            f"GenerationRequest.{where} must be a mapping (a JSON object), "
            f"got {type(value).__name__}"
        )
    frozen: Mapping[str, Any] = _freeze_json(value, where)
    return frozen


def _input_object(value: Any) -> Mapping[str, Any]:
    return _json_object(value, "input")


def _schema_object(value: Any) -> Mapping[str, Any]:
    return _json_object(value, "output_schema")


def _schema(_inst: object, _attribute: attrs.Attribute[Any], value: Mapping[str, Any]) -> None:
    check_schema(value)


@attrs.frozen
class GenerationRequest:
    """One structured generation request; deeply immutable and JSON-only.

    ``name`` is a low-cardinality label of the request type (safe for logs and metrics, never
    content). ``instructions`` is the fixed, versioned policy text; ``input`` is the data the
    policy works on (untrusted text belongs here, never in ``instructions``); ``output_schema``
    is the JSON schema (supported subset, see the module doc) the answer must match.
    Use :func:`thaw` to get plain ``dict``/``list`` copies for serialisation.
    """

    name: str = attrs.field(validator=non_empty_str)
    instructions: str = attrs.field(validator=non_empty_str)
    input: Mapping[str, Any] = attrs.field(converter=_input_object)
    output_schema: Mapping[str, Any] = attrs.field(converter=_schema_object, validator=_schema)

    def input_json(self) -> str:
        """The input object as compact JSON text (stable key order, non-ASCII kept)."""
        return json.dumps(thaw(self.input), ensure_ascii=False, separators=(",", ":"))


@attrs.frozen
class GenerationResult:
    """A backend's answer: the parsed ``output`` object, the ``raw_text`` it came from, and
    the ``usage`` of this one request (one call unless the backend says otherwise).

    ``used_fallback`` is set only by the fail-open envelope (:class:`FailOpenGenerationBackend`):
    the backend failed, ``output`` is ``None`` and is not an answer. A backend never sets it.
    """

    output: Any
    raw_text: str = attrs.field(default="", validator=attrs.validators.instance_of(str))
    usage: Usage = attrs.field(
        factory=Usage.one_call, validator=attrs.validators.instance_of(Usage)
    )
    used_fallback: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))


@runtime_checkable
class GenerationBackend(Protocol):
    """What a generation backend implements.

    ``generate`` answers one request, or raises one of the typed backend errors; it never
    repairs output and never degrades quietly. Optional attributes the host reads when present:
    ``descriptor`` (JSON-able mapping for traces, no secrets) and ``deterministic`` (same
    request -> same result; the conformance kit then checks repeatability).
    """

    policy_id: str

    async def generate(self, request: GenerationRequest, /) -> GenerationResult: ...


class FailOpenGenerationBackend(FailOpenEnvelope):
    """The generation port's face of the fail-open envelope (:class:`~rankseam.governed.
    FailOpenEnvelope`), for roles that declare ``FAIL_OPEN``.

    Any ``Exception`` from the delegate -- including the role's deadline and an answer that is
    not a :class:`GenerationResult` -- becomes ``GenerationResult(None, "", usage,
    used_fallback=True)`` (``usage``: what the backend attached to its error, else one call of
    unknown size) and a warning log record with the fields ``event`` (``generation.fallback``),
    ``request_name``, ``policy_id``, ``role`` and ``error_type``. ``asyncio.CancelledError``
    always propagates. Built by the host's role resolution, never nested.
    """

    method = "generate"
    logger = log
    fallback_message = "generation backend failed; failing open with a marked empty result"
    fallback_event = "generation.fallback"
    delegate: GenerationBackend

    def __init__(
        self,
        delegate: GenerationBackend,
        *,
        role: str,
        timeout_s: float = DEFAULT_ROLE_TIMEOUT_S,
    ) -> None:
        super().__init__(delegate, role=role, timeout_s=timeout_s)
        self.descriptor = getattr(self.delegate, "descriptor", {})

    async def generate(self, request: GenerationRequest, /) -> GenerationResult:
        return await self.call(request)  # type: ignore[no-any-return]

    def check(self, value: Any) -> GenerationResult:
        if not isinstance(value, GenerationResult):
            raise InvalidOutputError(
                f"generation backend {self.policy_id!r} returned {type(value).__name__}, not a "
                "GenerationResult"
            )
        return value

    def stand_in(self, usage: Usage) -> GenerationResult:
        return GenerationResult(None, "", usage, used_fallback=True)

    def labels(self, request: GenerationRequest) -> dict[str, Any]:
        return {"request_name": request.name}
