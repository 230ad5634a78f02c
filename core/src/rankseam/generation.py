"""The generation port: one structured generation request, answered with a parsed object.

A generation backend receives instructions, an input object and a JSON schema for the output,
and returns the parsed object, the raw text and the usage. It raises the typed errors of
:mod:`rankseam.errors` on failure: :class:`~rankseam.errors.BackendTimeoutError`,
:class:`~rankseam.errors.BackendUnavailableError`, :class:`~rankseam.errors.InvalidOutputError`
(unparseable or schema-invalid output). Generation is used by fail-closed roles (listwise
reranking), so backends get no fail-open envelope here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

import attrs

from rankseam.types import Usage

__all__ = ["GenerationRequest", "GenerationResult", "GenerationBackend"]


def _frozen(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


@attrs.frozen
class GenerationRequest:
    """``name`` is a low-cardinality label of the request type (for logs and metrics)."""

    name: str
    instructions: str
    input: Mapping[str, Any] = attrs.field(converter=_frozen)
    output_schema: Mapping[str, Any] = attrs.field(converter=_frozen)


@attrs.frozen
class GenerationResult:
    output: Any
    raw_text: str = ""
    usage: Usage = attrs.field(factory=Usage.one_call)


@runtime_checkable
class GenerationBackend(Protocol):
    """What a generation backend implements."""

    policy_id: str

    async def generate(self, request: GenerationRequest, /) -> GenerationResult: ...
