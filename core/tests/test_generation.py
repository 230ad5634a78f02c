"""The generation port: immutable JSON requests, strict parsing, the schema subset."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankseam.errors import BackendError, InvalidOutputError
from rankseam.generation import (
    GenerationBackend,
    GenerationRequest,
    GenerationResult,
    check_schema,
    parse_output,
    thaw,
    validate_output,
)
from rankseam.types import Usage

RANKS = {
    "type": "object",
    "properties": {"selected_ranks": {"type": "array", "items": {"type": "integer"}}},
    "required": ["selected_ranks"],
    "additionalProperties": False,
}


def request(**changes: Any) -> GenerationRequest:
    fields: dict[str, Any] = {
        "name": "test.rank",
        "instructions": "choose",
        "input": {"query": "q", "candidates": [{"rank": 1, "text": "a"}]},
        "output_schema": RANKS,
    }
    fields.update(changes)
    return GenerationRequest(**fields)


def test_request_is_deeply_immutable_and_detached_from_the_caller() -> None:
    data: dict[str, Any] = {"query": "q", "candidates": [{"rank": 1, "text": "a"}]}
    req = request(input=data)
    data["candidates"].append({"rank": 2, "text": "b"})  # the caller's copy changes ...
    assert len(req.input["candidates"]) == 1  # ... the request does not
    with pytest.raises(TypeError):
        req.input["query"] = "other"  # type: ignore[index]
    with pytest.raises(TypeError):
        req.input["candidates"][0]["text"] = "x"
    assert thaw(req.input) == {"query": "q", "candidates": [{"rank": 1, "text": "a"}]}
    assert json.loads(req.input_json()) == thaw(req.input)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": ""}, "name must be a non-empty string"),
        ({"instructions": "  "}, "instructions must be a non-empty string"),
        ({"input": ["not", "a", "mapping"]}, "input must be a mapping"),
        ({"input": {"x": object()}}, "not a JSON value"),
        ({"input": {"x": float("nan")}}, "non-finite"),
        ({"input": {1: "x"}}, "non-string key"),
        ({"output_schema": {"type": "object", "pattern": "x"}}, "unsupported JSON-schema keyword"),
        ({"output_schema": {"type": "tuple"}}, "type must be one of"),
        ({"output_schema": {"type": "object", "additionalProperties": True}}, "may only be false"),
    ],
)
def test_request_validation_says_what_is_wrong(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        request(**changes)


def test_result_defaults_and_validation() -> None:
    result = GenerationResult({"selected_ranks": [1]})
    assert result.usage == Usage(1, None, None) and result.raw_text == ""
    with pytest.raises(TypeError):
        GenerationResult({}, usage="one call")  # type: ignore[arg-type]


def test_protocol_is_runtime_checkable() -> None:
    class Backend:
        policy_id = "x.v1"

        async def generate(self, request: GenerationRequest, /) -> GenerationResult:
            return GenerationResult({"selected_ranks": []})

    class NoPolicy:
        async def generate(self, request: GenerationRequest, /) -> GenerationResult:
            raise NotImplementedError

    assert isinstance(Backend(), GenerationBackend)
    assert not isinstance(NoPolicy(), GenerationBackend)


def test_parse_output_accepts_exactly_one_strict_json_value() -> None:
    assert parse_output(' {"selected_ranks": [3, 1, -2, 99]}\n', RANKS) == {
        "selected_ranks": [3, 1, -2, 99]
    }


BAD = [
    "The answer is 3.",
    '</think>{"selected_ranks": [3]}',
    '{"selected_ranks": [３]}',
    '{"selected_ranks": [٣]}',
    "ERROR::reduce_length",
    '{"selected_ranks": [3, 1',
    '{"selected_ranks": [3.0]}',
    '{"selected_ranks": [1e1]}',
    '{"selected_ranks": ["3"]}',
    '{"selected_ranks": [false]}',
    '{"selected_ranks": [Infinity]}',
    '{"selected_ranks": [1], "selected_ranks": [2]}',
    '{"selected_ranks": [1], "extra": true}',
    "{}",
    "null",
    '```json\n{"selected_ranks": [1]}\n```',
    '{"selected_ranks": [1]} trailing',
    "",
]


@pytest.mark.parametrize("text", BAD)
def test_parse_output_repairs_nothing(text: str) -> None:
    with pytest.raises(InvalidOutputError) as info:
        parse_output(text, RANKS)
    assert isinstance(info.value, BackendError) and info.value.kind == "invalid_output"
    if len(text) > 12:
        assert text not in str(info.value)  # model text is never quoted into errors/logs


def test_parse_output_refuses_non_text() -> None:
    with pytest.raises(InvalidOutputError, match="instead of text"):
        parse_output(b'{"selected_ranks": []}', RANKS)  # type: ignore[arg-type]


def test_schema_subset_keywords() -> None:
    schema = {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["yes", "no"]},
            "scores": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 2},
            "flag": {"type": "boolean"},
            "note": {"type": "null"},
        },
        "required": ["label"],
    }
    check_schema(schema)
    assert validate_output({"label": "yes", "scores": [1, 0.5], "flag": True, "note": None}, schema)
    for bad in (
        {"label": "maybe"},
        {"label": "yes", "scores": []},
        {"label": "yes", "scores": [1, 2, 3]},
        {"label": "yes", "scores": [True]},
        {"label": "yes", "flag": 1},
        {"label": "yes", "note": 0},
        {"scores": [1]},
    ):
        with pytest.raises(InvalidOutputError):
            validate_output(bad, schema)


@given(st.lists(st.integers(-(10**6), 10**6), max_size=30))
def test_integer_lists_round_trip(ranks: list[int]) -> None:
    assert parse_output(json.dumps({"selected_ranks": ranks}), RANKS) == {"selected_ranks": ranks}


@given(
    st.lists(
        st.one_of(st.floats(allow_nan=False), st.text(max_size=3), st.booleans(), st.none()),
        min_size=1,
        max_size=5,
    )
)
def test_any_non_integer_element_is_invalid(items: list[Any]) -> None:
    if all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        return
    with pytest.raises(InvalidOutputError):
        parse_output(json.dumps({"selected_ranks": items}), RANKS)
