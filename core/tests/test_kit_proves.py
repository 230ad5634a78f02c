"""The conformance kit's own tests must be able to fail: each standard test below is run
against a reranker that breaks exactly the rule it checks, and must reject it; the kit's
declarations (capabilities) are checked when a plugin's test class is defined; a failing
standard test shows pytest's rewritten assertion (the compared values)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rankseam import testing as kit
from rankseam.testing import EmbedderContract, RerankerContract
from rankseam.types import RerankDecision


class Counting:
    """A healthy reranker that counts its calls: reversed coarse order."""

    policy_id = "test.counting.v1"
    deterministic = True

    def __init__(self) -> None:
        self.calls = 0

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        self.calls += 1
        return RerankDecision(tuple(c.rank for c in reversed(candidates))[:limit])


def test_the_empty_pool_test_really_calls_the_plugin_through_the_host() -> None:
    made: list[Counting] = []

    class Kit(RerankerContract):
        def make_reranker(self) -> Counting:
            made.append(Counting())
            return made[-1]

    Kit().test_empty_pool_never_called()
    assert [r.calls for r in made] == [1]  # the positive control reached the plugin itself


class AnswersNothingForOne(Counting):
    """Answers nothing when asked for one hit: allowed (the host falls back visibly)."""

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        if limit == 1:
            return RerankDecision(())
        return await super().rerank(query, candidates, limit)


def test_an_empty_answer_is_allowed_as_the_docs_say() -> None:
    class Kit(RerankerContract):
        def make_reranker(self) -> AnswersNothingForOne:
            return AnswersNothingForOne()

    Kit().test_limit_one_and_single_candidate()
    Kit().test_output_is_valid_subset_of_pool()
    docs = (Path(__file__).resolve().parents[2] / "docs" / "writing-plugins.md").read_text()
    assert "An empty answer is allowed" in docs


class AlwaysFallsBack(Counting):
    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        return RerankDecision(tuple(range(1, limit + 1)), used_fallback=True)


class AlwaysEmpty(Counting):
    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        return RerankDecision(())


class LiesAboutFallback(Counting):
    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        return RerankDecision(tuple(range(limit, 0, -1)), used_fallback=True)


class OverAnswers(Counting):
    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        return RerankDecision(tuple(c.rank for c in candidates))


@pytest.mark.parametrize(
    ("reranker", "message"),
    [
        (AlwaysFallsBack, "always falls back"),
        (AlwaysEmpty, "always falls back"),
        (LiesAboutFallback, "used_fallback=True goes only with the coarse ranks"),
        (OverAnswers, "at most min(limit, n)"),
    ],
)
def test_the_kit_rejects_a_reranker_that_breaks_the_contract(
    reranker: type[Counting], message: str
) -> None:
    class Kit(RerankerContract):
        def make_reranker(self) -> Counting:
            return reranker()

    with pytest.raises(AssertionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Kit().test_output_is_valid_subset_of_pool()


def test_a_misspelt_capability_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match="'embedings'.*known capabilities"):

        class Typo(RerankerContract):
            capabilities = frozenset({"embedings"})  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="'failure_case'"):  # known, but not to this contract

        class Elsewhere(EmbedderContract):
            capabilities = frozenset({kit.Capability.FAILURE_CASE})

    with pytest.raises(TypeError, match="frozenset"):

        class Bare(RerankerContract):
            capabilities = "embeddings"  # type: ignore[assignment]

    class Fine(RerankerContract):
        capabilities = frozenset({"embeddings"})  # type: ignore[arg-type]

    assert Fine.capabilities == frozenset({kit.Capability.EMBEDDINGS})


BROKEN_PLUGIN_TESTS = """
from rankseam.testing import RerankerContract
from rankseam.types import RerankDecision


class OutOfRange:
    policy_id = "broken.out-of-range.v1"

    async def rerank(self, query, candidates, limit, /):
        return RerankDecision((len(candidates) + 5,))


class TestBroken(RerankerContract):
    def make_reranker(self):
        return OutOfRange()
"""


def test_a_failing_standard_test_shows_rewritten_assertions(tmp_path: Path) -> None:
    (tmp_path / "test_broken.py").write_text(textwrap.dedent(BROKEN_PLUGIN_TESTS))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "test_broken.py::TestBroken::test_output_is_valid_subset_of_pool",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "rank outside 1..10" in run.stdout
    # pytest's rewriting explains the failed expression, not just the message
    assert "where False = all(" in run.stdout, run.stdout
