"""The host's conformance kits, against the real loopback server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from rankseam.plugin.generation import GenerationRequest
from rankseam.testing import (
    DecisionBackendContract,
    GenerationBackendContract,
    rank_selection_request,
)
from rankseam_openai import make_decision_backend, make_generation_backend
from rankseam_openai.testing import FakeOpenAIServer, decision_responder, generation_responder


def _select(payload: Any, schema: Any) -> dict[str, list[int]]:
    ranks = [c["rank"] for c in payload["candidates"] if "conference" in c["text"]]
    ranks += [c["rank"] for c in payload["candidates"] if c["rank"] not in ranks]
    return {"selected_ranks": ranks[: payload["max_results"]]}


class TestOpenAIDecisionBackendContract(DecisionBackendContract):
    @pytest.fixture(autouse=True)
    def _server(self) -> Iterator[None]:
        responder = decision_responder(lambda subject, evidence: "yes" if subject else "abstain")
        with FakeOpenAIServer(responder) as server:
            self.server = server
            yield

    def make_backend(self) -> Any:
        return make_decision_backend(self.server.options())


class TestOpenAIGenerationBackendContract(GenerationBackendContract):
    capabilities: ClassVar[frozenset[str]] = frozenset({"failure_case"})

    @pytest.fixture(autouse=True)
    def _server(self) -> Iterator[None]:
        with FakeOpenAIServer(generation_responder(_select)) as server:
            self.server = server
            yield

    def make_backend(self) -> Any:
        return make_generation_backend(self.server.options())

    def make_failure_case(self) -> tuple[Any, GenerationRequest]:
        self.server.inject("http_503")
        backend = make_generation_backend(self.server.options(max_attempts=2))
        return backend, rank_selection_request("conference", ("a", "b"), 1)
