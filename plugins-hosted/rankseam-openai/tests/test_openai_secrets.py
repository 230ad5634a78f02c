"""Secrets never appear in repr, descriptors, errors or logs."""

from __future__ import annotations

import asyncio
import json
import logging
import pickle

import pytest

from rankseam.errors import BackendError, ConfigurationError
from rankseam.plugin.decision import WRITE_GATE_ROLE, rerank_request
from rankseam.plugin.generation import GenerationRequest
from rankseam.testing import factory_context
from rankseam_openai import Secret, make_decision_backend, make_generation_backend
from rankseam_openai.testing import FakeOpenAIServer, Reply

KEY = "sk-TOPSECRET-4242"
HEADER_VALUE = "hdr-TOPSECRET-9191"


def _all_text(record: logging.LogRecord) -> str:
    return json.dumps({k: repr(v) for k, v in vars(record).items()}) + record.getMessage()


def _assert_clean(text: str) -> None:
    assert KEY not in text and HEADER_VALUE not in text, text


def test_secret_repr_and_pickle() -> None:
    secret = Secret(KEY)
    _assert_clean(repr(secret) + str(secret) + f"{secret}")
    assert secret.reveal() == KEY
    with pytest.raises(TypeError):
        pickle.dumps(secret)


def test_repr_descriptor_and_settings_hold_no_secret(server: FakeOpenAIServer) -> None:
    options = server.options(api_key=KEY, headers={"X-Auth": HEADER_VALUE})
    for backend in (make_decision_backend(options), make_generation_backend(options)):
        _assert_clean(repr(backend))
        _assert_clean(repr(backend.settings))
        _assert_clean(json.dumps(backend.descriptor))
        _assert_clean(repr(backend.client))
    context = factory_context({"decision_backends": {"openai": options}})
    _assert_clean(repr(context.decision_backend("openai", WRITE_GATE_ROLE)))


def test_errors_and_logs_hold_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(api_key="sk-other-key") as server:  # 401 echoes what we sent
        options = server.options(
            api_key=KEY,
            headers={"X-Auth": HEADER_VALUE},
            base_url=server.base_url + "?api-version=1",
        )
        backend = make_decision_backend(options)
        with pytest.raises(BackendError) as info:
            asyncio.run(backend.evaluate(rerank_request("q", "s")))
        assert "401" in str(info.value)
        _assert_clean(str(info.value) + repr(info.value))
        assert info.value.__cause__ is None and info.value.__context__ is None

        # retried faults and invalid output go through the logging paths too
        server.api_key = None
        server.script(Reply.error(503), Reply.reset(), Reply.malformed_body())
        generation = make_generation_backend(options)
        request = GenerationRequest("test", "answer", {"x": 1}, {"type": "object"})
        with pytest.raises(BackendError) as info2:
            asyncio.run(generation.generate(request))
        _assert_clean(str(info2.value))
    assert caplog.records, "expected retry log records"
    for record in caplog.records:
        _assert_clean(_all_text(record))


def test_configuration_errors_hold_no_secret() -> None:
    with pytest.raises(ConfigurationError) as info:
        make_decision_backend(
            {"base_url": "https://x.example/v1", "model": "m", "api_key": KEY, "timeout_s": -1}
        )
    _assert_clean(str(info.value))
