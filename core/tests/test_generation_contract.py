"""GenerationBackendContract: a conforming backend passes; broken ones are caught."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rankseam.errors import BackendUnavailableError, InvalidOutputError
from rankseam.generation import GenerationRequest, GenerationResult, parse_output
from rankseam.testing import GenerationBackendContract
from rankseam.types import Usage


class FirstCandidates:
    """A tiny conforming backend: selects the first max_results candidates."""

    policy_id = "test.first.v1"
    deterministic = True
    descriptor = {"name": "first"}

    async def generate(self, request: GenerationRequest, /) -> GenerationResult:
        if "candidates" not in request.input:
            raise BackendUnavailableError("only rank selection")
        wanted = request.input["max_results"]
        ranks = [c["rank"] for c in request.input["candidates"]][:wanted]
        text = json.dumps({"selected_ranks": ranks})
        return GenerationResult(parse_output(text, request.output_schema), text, Usage(1, 3, 2))


class TestFirstCandidates(GenerationBackendContract):
    capabilities = frozenset({"failure_case"})

    def make_backend(self) -> FirstCandidates:
        return FirstCandidates()

    def make_failure_case(self) -> tuple[Any, GenerationRequest]:
        request = GenerationRequest("other", "x", {"text": "t"}, {"type": "object"})
        return FirstCandidates(), request


def contract_for(backend: Any) -> GenerationBackendContract:
    class Probe(GenerationBackendContract):
        def make_backend(self) -> Any:
            return backend

    return Probe()


def test_schema_violation_is_caught() -> None:
    class Floats(FirstCandidates):
        async def generate(self, request: GenerationRequest, /) -> GenerationResult:
            return GenerationResult({"selected_ranks": [1.0]}, "", Usage.one_call())

    with pytest.raises(InvalidOutputError):
        contract_for(Floats()).test_answers_match_the_schema()


def test_raw_text_that_disagrees_with_output_is_caught() -> None:
    class Liar(FirstCandidates):
        async def generate(self, request: GenerationRequest, /) -> GenerationResult:
            return GenerationResult({"selected_ranks": [1]}, '{"selected_ranks": [2]}')

    with pytest.raises(AssertionError):
        contract_for(Liar()).test_raw_text_is_what_was_parsed()


def test_zero_call_usage_and_sync_generate_are_caught() -> None:
    class Free(FirstCandidates):
        async def generate(self, request: GenerationRequest, /) -> GenerationResult:
            result = await super().generate(request)
            return GenerationResult(result.output, result.raw_text, Usage.zero())

    class Sync:
        policy_id = "test.sync.v1"

        def generate(self, request: GenerationRequest, /) -> GenerationResult:
            raise NotImplementedError

    with pytest.raises(AssertionError, match="at least 1 call"):
        contract_for(Free()).test_answers_match_the_schema()
    with pytest.raises(AssertionError, match="must be async"):
        contract_for(Sync()).test_protocol_shape()


def test_untyped_failure_and_non_determinism_are_caught() -> None:
    class Crashes(FirstCandidates):
        async def generate(self, request: GenerationRequest, /) -> GenerationResult:
            raise RuntimeError("boom")

    class Flaky(FirstCandidates):
        calls = 0

        async def generate(self, request: GenerationRequest, /) -> GenerationResult:
            Flaky.calls += 1
            text = json.dumps({"selected_ranks": [Flaky.calls]})
            return GenerationResult(parse_output(text, request.output_schema), text)

    with pytest.raises(RuntimeError):
        contract_for(Crashes()).test_hostile_input_text_answered_or_typed_error()
    with pytest.raises(AssertionError):
        contract_for(Flaky()).test_deterministic_when_declared()


def test_standard_tests_cannot_be_dropped_silently() -> None:
    with pytest.raises(TypeError, match="test_answers_match_the_schema"):

        class Sneaky(GenerationBackendContract):
            def make_backend(self) -> Any:
                return FirstCandidates()

            def test_answers_match_the_schema(self) -> None:
                pass
