"""The ``local`` generation backend: a deterministic term-overlap heuristic, not a model."""

from __future__ import annotations

import asyncio

import pytest

from rankseam.errors import BackendUnavailableError
from rankseam.plugin.generation import GenerationRequest
from rankseam.testing import GenerationBackendContract, rank_selection_request
from rankseam_listwise import LOCAL_POLICY_ID, LocalGenerationBackend, build_request


class TestLocalBackendContract(GenerationBackendContract):
    capabilities = frozenset({"failure_case"})

    def make_backend(self) -> LocalGenerationBackend:
        return LocalGenerationBackend()

    def make_failure_case(self) -> tuple[LocalGenerationBackend, GenerationRequest]:
        request = GenerationRequest(
            name="summary",
            instructions="summarise",
            input={"text": "anything"},
            output_schema={"type": "object", "properties": {"summary": {"type": "string"}}},
        )
        return LocalGenerationBackend(), request


def ranks(query: str, texts: list[str], max_results: int) -> list[int]:
    request = build_request(query, max_results, list(enumerate(texts, start=1)))
    result = asyncio.run(LocalGenerationBackend().generate(request))
    assert result.usage.calls == 1 and result.usage.input_tokens == 0
    return list(result.output["selected_ranks"])


def test_most_shared_query_terms_first_ties_in_input_order() -> None:
    texts = [
        "dinner on friday",
        "the lisbon conference is in may",
        "booked a flight to lisbon",
        "conference badge",
        "Lisbon CONFERENCE, may 12!",
    ]
    assert ranks("When is the Lisbon conference?", texts, 3) == [2, 5, 3]
    assert ranks("When is the Lisbon conference?", texts, 10) == [2, 5, 3, 4]


def test_no_overlap_selects_nothing_and_stop_words_do_not_count() -> None:
    assert ranks("what is the weather", ["the cat is here", "what a day"], 2) == []
    assert ranks("who is it", ["it is who", "nothing"], 2) == [1]  # only stop words: kept


def test_refuses_other_request_shapes_with_a_typed_error() -> None:
    bad = rank_selection_request("q", ("a",), 1).input
    request = GenerationRequest(
        name="other",
        instructions="x",
        input={**bad, "candidates": [{"rank": "1", "text": "a"}]},
        output_schema={"type": "object", "properties": {"selected_ranks": {"type": "array"}}},
    )
    with pytest.raises(BackendUnavailableError, match="only answers rank-selection requests"):
        asyncio.run(LocalGenerationBackend().generate(request))


def test_policy_id_is_versioned() -> None:
    assert LocalGenerationBackend().policy_id == LOCAL_POLICY_ID
    assert LOCAL_POLICY_ID.endswith(".v1")
