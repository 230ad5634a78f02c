"""The ``semantic`` reranker through the real seam, with the packaged model, offline."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
from st_builders import POOL, QUERY, build_reranker

from rankseam.errors import RerankError
from rankseam.testing import RerankerContract, assert_listed, run_reranker
from rankseam_sentence_transformers import SemanticOptions, SemanticReranker


def test_registered_through_the_reranker_hook() -> None:
    assert_listed("reranker", "semantic", distribution="rankseam-sentence-transformers")


def test_weight_one_orders_by_meaning_weight_zero_keeps_the_coarse_order() -> None:
    by_meaning = run_reranker(build_reranker(weight=1.0), QUERY, POOL, 3)
    assert set(by_meaning.positions[:2]) == {2, 4}
    coarse = run_reranker(build_reranker(weight=0.0), QUERY, POOL, 3)
    assert coarse.positions == (0, 1, 2)


def test_scores_are_the_fused_scores_best_first_and_in_the_trace() -> None:
    run = run_reranker(build_reranker(weight=0.6), QUERY, POOL)
    scores = [hit.rerank_score for hit in run.hits]
    assert all(s is not None and 0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert run.trace is not None and run.trace.status.value == "ok"
    assert list(run.trace.scores) == scores
    details = [record.detail for record in run.trace.records]
    assert all(d is not None and "cosine=" in d and "fused=" in d for d in details)


def test_the_cache_serves_a_repeated_pool_and_a_changed_text_is_encoded_again() -> None:
    reranker = build_reranker(cache_size=64)
    first = run_reranker(reranker, QUERY, POOL)
    assert first.trace is not None
    assert first.trace.usage.calls == 1 and (first.trace.usage.input_tokens or 0) > len(POOL)
    again = run_reranker(reranker, QUERY, POOL)
    assert again.trace is not None and again.trace.usage.calls == 0
    assert all("cached" in (r.detail or "") for r in again.trace.records)
    assert again.positions == first.positions
    # the kit names texts kit/1, kit/2...: the same identity with another text is not a hit
    changed = [*POOL[:4], "A completely different note about gardening tools."]
    third = run_reranker(reranker, QUERY, changed)
    assert third.trace is not None and third.trace.usage.calls == 1
    fresh = [r for r in third.trace.records if "cached" not in (r.detail or "")]
    assert [r.rank for r in fresh] == [5]


def test_the_cache_is_bounded() -> None:
    reranker = build_reranker(cache_size=2, max_seq_length=64)
    run_reranker(reranker, QUERY, POOL)
    assert len(reranker.cache) == 2
    uncached = build_reranker(cache_size=0, max_seq_length=64)
    run_reranker(uncached, QUERY, POOL)
    assert len(uncached.cache) == 0


def test_passing_the_deadline_is_a_timeout_with_its_cost_or_the_coarse_order() -> None:
    reranker = build_reranker(deadline_s=1e-9, cache_size=0)
    with pytest.raises(RerankError) as caught:
        run_reranker(reranker, QUERY, POOL)
    assert caught.value.reason == "timeout"
    degraded = run_reranker(reranker, QUERY, POOL, 3, on_error="coarse")
    assert degraded.trace is not None and degraded.trace.status.value == "degraded"
    assert degraded.positions == (0, 1, 2)


def test_onnx_fp32_and_torch_give_the_same_order() -> None:
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    onnx = run_reranker(build_reranker(backend="onnx", quantize=False), QUERY, POOL)
    torch = run_reranker(build_reranker(backend="torch"), QUERY, POOL)
    assert onnx.positions == torch.positions
    np.testing.assert_allclose(
        [h.rerank_score for h in onnx.hits], [h.rerank_score for h in torch.hits], atol=1e-4
    )


def test_auto_takes_onnx_when_it_can_export() -> None:
    """ONNX Runtime alone (the torch-free `onnx` extra) cannot export the model: auto needs onnx
    too (the `export` extra)."""
    from rankseam_sentence_transformers.onnx_backend import export_available

    assert SemanticOptions().backend == "auto"
    expected = "onnx" if export_available() else "torch"
    assert build_reranker().descriptor["backend"] == expected
    assert SemanticOptions().runtime(onnx=False).backend == "torch"


class TestSemanticContract(RerankerContract):
    capabilities: ClassVar[frozenset[str]] = frozenset()

    def make_reranker(self) -> SemanticReranker:
        return build_reranker(max_seq_length=64)
