"""Test doubles of the *model* behind the generation port (never of rankseam's own code)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from rankseam.plugin.generation import GenerationRequest, GenerationResult, parse_output
from rankseam.types import Hit, MemoryRef, Usage


def pool(n: int, texts: dict[int, str] | None = None) -> tuple[Hit, ...]:
    """``n`` hits with coarse ranks 1..n; ``texts`` overrides the text of some ranks."""
    texts = texts or {}
    return tuple(
        Hit(MemoryRef("t", f"m{r:03d}", 1), texts.get(r, f"plain entry number {r}"), 1.0 - r / 1000)
        for r in range(1, n + 1)
    )


class ScriptedModel:
    """A model that answers each call with the next scripted raw text (the last one repeats),
    parsed exactly as a real backend parses model text (``rankseam.plugin.generation.parse_output``)."""

    policy_id = "test.scripted-model.v1"

    def __init__(self, *texts: str, usage: Usage | None = None) -> None:
        self.texts = list(texts)
        self.requests: list[GenerationRequest] = []
        self.usage = usage or Usage.one_call(input_tokens=10, output_tokens=3)

    async def generate(self, request: GenerationRequest, /) -> GenerationResult:
        self.requests.append(request)
        text = self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]
        return GenerationResult(parse_output(text, request.output_schema), text, self.usage)


def ranks_json(*ranks: Any) -> str:
    return json.dumps({"selected_ranks": list(ranks)})


class UncheckedModel:
    """A careless backend that returns whatever object it was given, without validation."""

    policy_id = "test.unchecked.v1"

    def __init__(self, output: Any) -> None:
        self.output = output
        self.calls = 0

    async def generate(self, request: GenerationRequest, /) -> Any:
        self.calls += 1
        return GenerationResult(self.output, "", Usage.one_call(5, 1))


class PickingModel:
    """A model that picks, in each window, the candidates whose text satisfies ``wanted``
    (in window order), and records every request it received."""

    policy_id = "test.picking-model.v1"

    def __init__(self, wanted: Callable[[str], bool]) -> None:
        self.wanted = wanted
        self.requests: list[GenerationRequest] = []

    async def generate(self, request: GenerationRequest, /) -> GenerationResult:
        self.requests.append(request)
        chosen = [c["rank"] for c in request.input["candidates"] if self.wanted(c["text"])]
        text = ranks_json(*chosen[: request.input["max_results"]])
        return GenerationResult(parse_output(text, request.output_schema), text, Usage(1, 7, 2))


class FailingModel:
    """Raises ``error`` on call number ``fail_on`` (1-based); answers ``[1]`` before that."""

    policy_id = "test.failing-model.v1"

    def __init__(self, error: BaseException, fail_on: int = 1) -> None:
        self.error = error
        self.fail_on = fail_on
        self.calls = 0

    async def generate(self, request: GenerationRequest, /) -> GenerationResult:
        self.calls += 1
        if self.calls >= self.fail_on:
            raise self.error
        text = ranks_json(1)
        return GenerationResult(parse_output(text, request.output_schema), text, Usage(1, 4, 1))


class SlowModel:
    policy_id = "test.slow-model.v1"

    async def generate(self, request: GenerationRequest, /) -> GenerationResult:
        await asyncio.sleep(10)
        raise AssertionError("never reached")


def window_texts(request: GenerationRequest) -> Sequence[str]:
    return [c["text"] for c in request.input["candidates"]]
