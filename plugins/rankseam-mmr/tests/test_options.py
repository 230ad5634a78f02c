"""Options from configuration and CLI-shaped values; the factory through a real context."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

import rankseam_mmr
from rankseam.errors import ConfigurationError
from rankseam.plugin import EmbedderRegister, hookimpl
from rankseam.plugin.embedders import EmbedderDescriptor
from rankseam.testing import build_component, installed_plugin
from rankseam.types import Candidate, MemoryRef


class AxisEmbedder:
    """A tiny, real embedder: counts the words 'red', 'green', 'blue' (3 dims, L2)."""

    descriptor = EmbedderDescriptor("axis", 3)

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        out = np.zeros((len(texts), 3), dtype=np.float32)
        for i, text in enumerate(texts):
            words = text.split()
            out[i] = [words.count("red"), words.count("green"), words.count("blue")]
            norm = np.linalg.norm(out[i])
            if norm:
                out[i] /= norm
        return out


class AxisPlugin:
    """A test plugin that registers the 'axis' embedder, as a plugin's hook does."""

    @hookimpl
    def register_embedders(self, register: EmbedderRegister) -> None:
        register("axis", lambda options, context: AxisEmbedder(), summary="red/green/blue")


@pytest.fixture(autouse=True)
def axis_installed() -> Iterator[None]:
    with installed_plugin(AxisPlugin(), name="axis-tests"):
        yield


def _build(**mmr: Any) -> Any:
    """mmr built the way an assembly builds it, with the 'axis' embedder configured."""
    return build_component(
        "reranker", "mmr", config={"embedder": "axis", "rerankers": {"mmr": mmr}}
    )


def test_defaults_and_descriptor() -> None:
    reranker = _build()
    assert reranker.policy_id == "rankseam.rerank.mmr.v1"
    assert reranker.needs_embeddings is True and reranker.deterministic is True
    assert reranker.descriptor["lambda"] == rankseam_mmr.DEFAULT_LAMBDA
    assert reranker.descriptor["relevance"] == "coarse"
    assert "query_embedder" not in reranker.descriptor  # no embedder built for 'coarse'


@pytest.mark.parametrize("value", [0, 0.0, 1, 1.0, 0.25, 0.85])
def test_lambda_accepted_including_zero(value: float) -> None:
    reranker = _build(**{"lambda": value})
    assert reranker.descriptor["lambda"] == float(value)
    assert isinstance(reranker.descriptor["lambda"], float)


@pytest.mark.parametrize("value", [-0.01, 1.01, math.nan, math.inf, True, "0.7", None, [0.5]])
def test_lambda_rejected_with_fix_it_message(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"lambda.*\[0, 1\].*pure relevance"):
        _build(**{"lambda": value})


def test_unknown_option_rejected() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"^\[rerankers.mmr\] lamda is not an option; its options are lambda, relevance",
    ):
        _build(lamda=0.5)


def test_bad_relevance_rejected() -> None:
    with pytest.raises(ConfigurationError, match=r"relevance.*'coarse'.*'query_cosine'"):
        _build(relevance="bm25")


def test_cli_style_override_goes_over_the_configured_options() -> None:
    """`--rerank mmr --mmr-lambda 0.3` becomes the [rerankers.mmr] option lambda = 0.3."""
    config = {"rerankers": {"mmr": {"lambda": 0.9}}}
    reranker = build_component("reranker", "mmr", {"lambda": 0.3}, config=config)
    assert reranker.descriptor["lambda"] == 0.3
    assert build_component("reranker", "mmr", config=config).descriptor["lambda"] == 0.9


def test_query_cosine_builds_the_configured_embedder_and_uses_it() -> None:
    reranker = _build(relevance="query_cosine", **{"lambda": 1.0})
    assert reranker.descriptor["query_embedder"] == AxisEmbedder.descriptor.key
    embed = AxisEmbedder().embed
    texts = ["red red", "green", "blue", "red green"]
    vectors = embed(texts)
    candidates = tuple(
        # coarse scores say the opposite of the query cosine
        Candidate(
            i + 1,
            MemoryRef("ns", f"m{i}", 1),
            t,
            float(i),
            embedding=vectors[i],
            embedding_space=AxisEmbedder.descriptor.key,
        )
        for i, t in enumerate(texts)
    )
    decision = asyncio.run(reranker.rerank("blue", candidates, 2))
    assert decision.selected_ranks[0] == 3  # the only 'blue' candidate
    assert "rel_source=query_cosine" in (decision.records[0].detail or "")
    # with coarse relevance the highest coarse score leads instead
    coarse = _build(**{"lambda": 1.0})
    assert asyncio.run(coarse.rerank("blue", candidates, 2)).selected_ranks == (4, 3)


def test_query_cosine_falls_back_to_coarse_when_query_vector_does_not_fit() -> None:
    reranker = _build(relevance="query_cosine", **{"lambda": 1.0})
    candidates = tuple(
        Candidate(
            i + 1,
            MemoryRef("ns", f"m{i}", 1),
            "t",
            1.0 - i / 10,
            embedding=[1.0, float(i), 0.0, 1.0],
            embedding_space="four-dims",
        )
        for i in range(4)
    )
    decision = asyncio.run(reranker.rerank("blue", candidates, 3))
    assert decision.selected_ranks == (1, 2, 3)
    assert "rel_source=coarse" in (decision.records[0].detail or "")


def test_query_cosine_without_embedder_is_a_configuration_error() -> None:
    config = {"embedder": "nope", "rerankers": {"mmr": {"relevance": "query_cosine"}}}
    with pytest.raises(ConfigurationError, match="no embedder named 'nope'"):
        build_component("reranker", "mmr", config=config)


def test_query_cosine_ignores_vectors_of_another_space() -> None:
    reranker = _build(relevance="query_cosine", **{"lambda": 1.0})
    vectors = AxisEmbedder().embed(["red", "blue", "green"])
    candidates = tuple(
        Candidate(
            i + 1,
            MemoryRef("ns", f"m{i}", 1),
            "t",
            1.0 - i / 10,
            embedding=vectors[i],
            embedding_space="another-model@1/d3/l2",
        )
        for i in range(3)
    )
    decision = asyncio.run(reranker.rerank("blue", candidates, 3))
    assert decision.selected_ranks == (1, 2, 3)  # coarse relevance, not the query cosine
    assert "rel_source=coarse" in (decision.records[0].detail or "")
