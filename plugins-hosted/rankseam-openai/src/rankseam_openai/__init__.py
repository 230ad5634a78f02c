"""rankseam-openai: decision and generation backends over any OpenAI-compatible chat API.

Registers the decision backend ``openai`` and the generation backend ``openai``. Both call
``POST {base_url}/chat/completions`` with ``httpx``, ask for structured JSON output
(``response_format`` JSON schema, falling back to JSON mode for servers that lack it), retry
transient faults with ``tenacity`` and raise the host's typed errors. See docs/plugins/openai.md.

Options (``[decision_backends.openai]`` / ``[generation_backends.openai]``): ``base_url``,
``model``, ``api_key`` (string or ``{"$env" = "NAME"}``; default env ``OPENAI_API_KEY``),
``require_key``, ``timeout_s``, ``deadline_s``, ``max_attempts``, ``backoff_s``,
``backoff_max_s``, ``headers``, ``json_mode``, ``temperature``, ``max_tokens``,
``max_connections``, ``max_response_bytes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rankseam.plugin import DecisionBackendRegister, GenerationBackendRegister, hookimpl
from rankseam_openai.config import OpenAIOptions, OpenAISettings, Secret, settings_from_options

if TYPE_CHECKING:
    from rankseam_openai.backends import (
        DECISION_POLICY_ID,
        GENERATION_POLICY_ID,
        OpenAIDecisionBackend,
        OpenAIGenerationBackend,
    )
    from rankseam_openai.client import ResponseTooLargeError

#: Names served from :mod:`rankseam_openai.backends`, which imports httpx and tenacity: it
#: loads when a backend is built, not when rankseam loads its plugins (fast `rankseam` start).
_LAZY = {
    "DECISION_POLICY_ID",
    "GENERATION_POLICY_ID",
    "OpenAIDecisionBackend",
    "OpenAIGenerationBackend",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from rankseam_openai import backends

        return getattr(backends, name)
    if name == "ResponseTooLargeError":
        from rankseam_openai import client

        return client.ResponseTooLargeError
    raise AttributeError(f"module 'rankseam_openai' has no attribute {name!r}")


__all__ = [
    "DECISION_POLICY_ID",
    "GENERATION_POLICY_ID",
    "OpenAIDecisionBackend",
    "OpenAIGenerationBackend",
    "OpenAIOptions",
    "OpenAISettings",
    "ResponseTooLargeError",
    "Secret",
    "make_decision_backend",
    "make_generation_backend",
    "settings_from_options",
]

__version__ = "0.1.0"

DECISION_MAX_TOKENS = 64
GENERATION_MAX_TOKENS = 1024


def make_decision_backend(
    options: OpenAIOptions | Mapping[str, Any], context: object = None
) -> OpenAIDecisionBackend:
    """Factory of the ``openai`` decision backend (``options``: as the host checked them,
    or a table, checked here)."""
    from rankseam_openai.backends import OpenAIDecisionBackend

    what = "decision backend 'openai'"
    settings = settings_from_options(
        options, what=what, table="decision_backends.openai", default_max_tokens=DECISION_MAX_TOKENS
    )
    return OpenAIDecisionBackend(settings, what=what)


def make_generation_backend(
    options: OpenAIOptions | Mapping[str, Any], context: object = None
) -> OpenAIGenerationBackend:
    """Factory of the ``openai`` generation backend (``options``: as the host checked them,
    or a table, checked here)."""
    from rankseam_openai.backends import OpenAIGenerationBackend

    what = "generation backend 'openai'"
    settings = settings_from_options(
        options,
        what=what,
        table="generation_backends.openai",
        default_max_tokens=GENERATION_MAX_TOKENS,
    )
    return OpenAIGenerationBackend(settings, what=what)


@hookimpl
def register_decision_backends(register: DecisionBackendRegister) -> None:
    register(
        "openai",
        make_decision_backend,
        summary="yes/no/abstain over an OpenAI-compatible chat API (hosted, vLLM, llama.cpp)",
        options=OpenAIOptions,
    )


@hookimpl
def register_generation_backends(register: GenerationBackendRegister) -> None:
    register(
        "openai",
        make_generation_backend,
        summary="structured JSON generation over an OpenAI-compatible chat API",
        options=OpenAIOptions,
    )
