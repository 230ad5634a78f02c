"""``precision = "bf16"``: the torch model cast to bfloat16, against float32, offline."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from st_builders import POOL, QUERY, build_embedder, build_reranker

from rankseam.errors import ConfigurationError
from rankseam.testing import EmbedderContract, RerankerContract, run_reranker
from rankseam_sentence_transformers import SemanticReranker, SentenceTransformerEmbedder
from rankseam_sentence_transformers.model import native_bf16

TEXTS = [
    "Melanie painted a sunrise over the lake last summer.",
    "Caroline went to an LGBTQ support group meeting on Saturday and felt accepted.",
    "The quarterly tax filing is due on the fifteenth.",
    "Cells divide; proteins fold. Mitochondrial membrane potential falls during apoptosis, "
    "which releases cytochrome c into the cytosol. " * 6,
    "",
    "ünïcødé — 漢字 テスト 🙂",
    "x",
]
#: The stated tolerance: a bf16 vector's cosine to its float32 vector (measured: min 0.99991
#: over 200 LoCoMo turns; docs/plugins/sentence-transformers.md).
COSINE = 0.999


@pytest.fixture(scope="module")
def fp32_vectors() -> np.ndarray:
    return build_embedder().embed(TEXTS)


def test_bf16_vectors_are_within_the_tolerance_of_fp32_in_a_space_of_their_own(
    fp32_vectors: np.ndarray,
) -> None:
    bf16 = build_embedder(precision="bf16")
    vectors = bf16.embed(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == fp32_vectors.shape
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(vectors * fp32_vectors, axis=1)
    assert cosines.min() >= COSINE, cosines
    # the model did run in bfloat16: the vectors are not float32's
    assert np.abs(vectors - fp32_vectors).max() > 1e-4
    assert bf16.descriptor.revision.endswith("+bf16")
    keys = {
        build_embedder().descriptor.key,
        bf16.descriptor.key,
        build_embedder(backend="onnx", quantize=True).descriptor.key,
    }
    assert len(keys) == 3, keys
    assert bf16.descriptor.dimensions == 384 and bf16.descriptor.normalization == "l2"


def test_a_bf16_vector_depends_on_its_batch_only_within_the_tolerance() -> None:
    bf16 = build_embedder(precision="bf16", batch_size=8)
    together = bf16.embed(TEXTS)
    assert np.array_equal(bf16.embed(TEXTS), together)  # the same batch: the same vectors
    alone = np.stack([bf16.embed([text])[0] for text in TEXTS])
    assert np.sum(alone * together, axis=1).min() >= COSINE


def test_bf16_is_a_torch_option_and_onnx_says_what_to_use_instead() -> None:
    with pytest.raises(ConfigurationError, match="precision must be one of 'fp32', 'bf16'"):
        build_embedder(precision="fp16")
    for build in (build_embedder, build_reranker):
        with pytest.raises(ConfigurationError) as caught:
            build(backend="onnx", precision="bf16")
        message = str(caught.value)
        assert "backend = 'torch'" in message and "quantize = true" in message, message


def test_the_semantic_reranker_in_bf16_takes_torch_and_orders_as_fp32() -> None:
    bf16 = build_reranker(precision="bf16", weight=1.0)  # backend "auto": torch for bf16
    assert bf16.descriptor["backend"] == "torch" and bf16.descriptor["precision"] == "bf16"
    run = run_reranker(bf16, QUERY, POOL)
    fp32 = run_reranker(build_reranker(backend="torch", weight=1.0), QUERY, POOL)
    assert run.positions == fp32.positions
    assert set(run.positions[:2]) == {2, 4}
    assert run.trace is not None and run.trace.status.value == "ok"
    assert run.trace.usage.calls == 1 and (run.trace.usage.input_tokens or 0) > len(POOL)
    np.testing.assert_allclose(
        [h.rerank_score for h in run.hits], [h.rerank_score for h in fp32.hits], atol=0.02
    )


@pytest.mark.parametrize(
    ("flags", "native"),
    [
        ({"fpu", "avx512f", "amx_bf16", "amx_tile"}, True),
        ({"fpu", "avx512f", "avx512_bf16"}, True),
        ({"fp", "asimd", "bf16"}, True),  # Arm's BF16 extension
        ({"fpu", "avx2", "avx512f", "avx512_vnni"}, False),
        (set(), False),
    ],
)
def test_native_bf16_reads_the_cpu_flags(flags: set[str], native: bool) -> None:
    assert native_bf16(flags) is native


def test_on_a_cpu_with_native_bf16_the_model_loads_without_the_slow_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cpuinfo = Path("/proc/cpuinfo")
    text = cpuinfo.read_text(encoding="utf-8") if cpuinfo.is_file() else ""
    if not any(flag in text.split() for flag in ("amx_bf16", "avx512_bf16")):
        pytest.skip("this CPU reports no native bfloat16 (amx_bf16 or avx512_bf16)")
    assert native_bf16()
    with caplog.at_level(logging.INFO, logger="rankseam_sentence_transformers"):
        # a sequence length of its own: a model of its own, loaded now
        build_reranker(precision="bf16", max_seq_length=77)
    events = [getattr(r, "event", None) for r in caplog.records]
    loads = [r for r in caplog.records if getattr(r, "event", None) == "st.model.load"]
    assert [getattr(r, "precision", None) for r in loads] == ["bf16"]
    assert "st.bf16.emulated" not in events


class TestBf16EmbedderContract(EmbedderContract):
    # not "deterministic": a bf16 vector moves with its batch (within COSINE, tested above)
    capabilities: ClassVar[frozenset[str]] = frozenset()

    def make_embedder(self) -> SentenceTransformerEmbedder:
        return build_embedder(precision="bf16")


class TestBf16SemanticContract(RerankerContract):
    capabilities: ClassVar[frozenset[str]] = frozenset()

    def make_reranker(self) -> SemanticReranker:
        return build_reranker(precision="bf16", max_seq_length=64)
