"""Configuration: options, env references, the key rule, and registration through the hooks."""

from __future__ import annotations

import asyncio
import json

import pytest

from rankseam.errors import ConfigurationError
from rankseam.plugin.decision import RERANK_ROLE, WRITE_GATE_ROLE, rerank_request, unwrap
from rankseam.testing import factory_context
from rankseam_openai import (
    OpenAIDecisionBackend,
    OpenAIGenerationBackend,
    make_decision_backend,
    make_generation_backend,
)
from rankseam_openai.testing import FakeOpenAIServer, Reply


def test_missing_key_for_remote_server_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError) as info:
        make_decision_backend({"base_url": "https://api.example.com/v1", "model": "m"})
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "require_key = false" in message
    assert "https://api.example.com/v1" in message


def test_missing_key_from_an_unset_variable_says_so() -> None:
    with pytest.raises(ConfigurationError, match="names an environment variable that is not set"):
        make_generation_backend(
            {
                "base_url": "https://x.example/v1",
                "model": "m",
                "api_key": {"$env": "MY_PROVIDER_KEY"},
            }
        )


def test_loopback_needs_no_key_unless_required() -> None:
    backend = make_decision_backend({"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    assert backend.settings.api_key is None
    backend = make_decision_backend({"base_url": "http://localhost:9/v1", "model": "m"})
    assert backend.settings.api_key is None
    with pytest.raises(ConfigurationError, match="no API key"):
        make_decision_backend(
            {"base_url": "http://127.0.0.1:9/v1", "model": "m", "require_key": True}
        )


def test_remote_server_without_key_allowed_when_not_required() -> None:
    backend = make_decision_backend(
        {"base_url": "https://gpu-box.internal/v1", "model": "m", "require_key": False}
    )
    assert backend.settings.api_key is None


def test_key_from_env_reference_is_sent_as_bearer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-from-env-123")
    with FakeOpenAIServer(api_key="sk-from-env-123") as server:
        server.script(Reply.json({"answer": "yes"}))
        backend = make_decision_backend(
            server.options(api_key={"$env": "MY_KEY"}, require_key=True)
        )
        result = asyncio.run(backend.evaluate(rerank_request("q", "s")))
        assert result.outcome.value == "yes"
        assert server.requests[0].headers["Authorization"] == "Bearer sk-from-env-123"


def test_default_key_env_and_env_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default-env")
    monkeypatch.setenv("RANKSEAM_OPENAI_BASE_URL", "https://llm.example.org/v1/")
    monkeypatch.setenv("RANKSEAM_OPENAI_MODEL", "env-model")
    backend = make_decision_backend({})
    assert backend.settings.base_url == "https://llm.example.org/v1"
    assert backend.settings.model == "env-model"
    assert backend.settings.api_key is not None
    assert backend.settings.api_key.reveal() == "sk-default-env"


def test_model_is_required() -> None:
    with pytest.raises(ConfigurationError, match="RANKSEAM_OPENAI_MODEL"):
        make_decision_backend({"base_url": "http://127.0.0.1:9/v1"})


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"modle": "x"}, r"^\[decision_backends.openai\] modle is not an option"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": "fast"}, "timeout_s"),
        ({"deadline_s": -1}, "deadline_s"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"json_mode": "xml"}, "json_mode"),
        ({"headers": ["X-A"]}, "headers"),
        ({"headers": {"X-A": 3}}, "header"),
        ({"headers": {"Content-Type": "text/plain"}}, "set by the client"),
        ({"base_url": "ftp://host/v1"}, "http"),
        ({"temperature": 3}, "temperature"),
        ({"require_key": "yes"}, "require_key"),
        ({"api_key": 123}, "api_key"),
    ],
)
def test_bad_options_are_configuration_errors(options: dict, match: str) -> None:
    base = {"base_url": "http://127.0.0.1:9/v1", "model": "m", **options}
    with pytest.raises(ConfigurationError, match=match):
        make_decision_backend(base)


def test_unknown_option_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as info:
        make_generation_backend({"model": "m", "base_url": "http://127.0.0.1:9", "retries": 3})
    assert "max_attempts" in str(info.value) and "generation_backends.openai" in str(info.value)


def test_base_url_normalised_and_descriptor_is_public() -> None:
    backend = make_decision_backend(
        {
            "base_url": "https://llm.example.org:8443/openai/chat/completions?api-version=2024-06",
            "model": "m",
            "api_key": "sk-xyz-123",
        }
    )
    d = backend.descriptor
    json.dumps(d)
    assert d["base_url"] == "https://llm.example.org:8443/openai"
    assert backend.settings.url == (
        "https://llm.example.org:8443/openai/chat/completions?api-version=2024-06"
    )
    assert d["api_key"] == "set" and d["model"] == "m" and d["kind"] == "decision"


def test_credentials_in_base_url_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="api_key") as info:
        make_decision_backend({"base_url": "https://u:pw-secret@h.example/v1", "model": "m"})
    assert "pw-secret" not in str(info.value)


def test_chat_completions_suffix_is_stripped() -> None:
    backend = make_decision_backend(
        {"base_url": "http://127.0.0.1:8080/v1/chat/completions", "model": "m"}
    )
    assert backend.settings.url == "http://127.0.0.1:8080/v1/chat/completions"


def test_extra_headers_are_sent(server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORG_TOKEN", "org-secret-77")
    server.script(Reply.json({"answer": "no"}))
    backend = make_decision_backend(
        server.options(headers={"X-Org": {"$env": "ORG_TOKEN"}, "X-Team": "search"})
    )
    asyncio.run(backend.evaluate(rerank_request("q", "s")))
    headers = server.requests[0].headers
    assert headers["X-Org"] == "org-secret-77" and headers["X-Team"] == "search"
    assert backend.descriptor["headers"] == ["X-Org", "X-Team"]


def test_registered_through_hooks_and_wrapped_per_role(server: FakeOpenAIServer) -> None:
    config = {
        "decision_backends": {"openai": server.options()},
        "generation_backends": {"openai": server.options()},
    }
    context = factory_context(config)
    assert "openai" in context.available("decision_backend")
    assert "openai" in context.available("generation_backend")
    closed = context.decision_backend("openai", RERANK_ROLE)
    assert isinstance(closed, OpenAIDecisionBackend)
    opened = context.decision_backend("openai", WRITE_GATE_ROLE)
    assert opened is not closed and unwrap(opened) is closed  # the fail-open envelope
    generation = context.generation_backend("openai", RERANK_ROLE)  # fail-closed: bare
    assert isinstance(generation, OpenAIGenerationBackend)
    # a role that declares nothing is fail-open, for generation as for decisions
    assert context.generation_backend("openai").delegate is generation  # type: ignore[attr-defined]


def test_assembly_error_through_context_says_how_to_fix() -> None:
    config = {
        "decision_backends": {"openai": {"base_url": "https://api.example.com/v1", "model": "m"}}
    }
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        factory_context(config).decision_backend("openai", RERANK_ROLE)
