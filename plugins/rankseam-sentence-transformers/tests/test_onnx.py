"""The ONNX Runtime path against the torch backend, with the packaged model, offline."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from st_builders import build_embedder

from rankseam.errors import ConfigurationError
from rankseam.testing import EmbedderContract, build_component
from rankseam_sentence_transformers import SentenceTransformerEmbedder

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")

TEXTS = [
    "Melanie painted a sunrise over the lake last summer.",
    "The quarterly tax filing is due on the fifteenth.",
    "",
    "ünïcødé — 漢字 テスト 🙂",
    "a long abstract " + "with many repeated clauses about cells and proteins " * 60,
    "x",
]


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return build_embedder().embed(TEXTS)


def test_fp32_onnx_vectors_equal_the_torch_ones_and_share_their_space(
    torch_vectors: np.ndarray,
) -> None:
    onnx = build_embedder(backend="onnx", batch_size=4)
    np.testing.assert_allclose(onnx.embed(TEXTS), torch_vectors, atol=1e-5)
    assert onnx.descriptor.key == build_embedder().descriptor.key


def test_int8_vectors_are_close_but_a_space_of_their_own(torch_vectors: np.ndarray) -> None:
    int8 = build_embedder(backend="onnx", quantize=True)
    vectors = int8.embed(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(vectors * torch_vectors, axis=1)
    assert cosines.min() > 0.95, cosines
    assert not np.allclose(vectors, torch_vectors, atol=1e-3)
    assert int8.descriptor.key != build_embedder().descriptor.key
    assert int8.descriptor.revision.endswith("+int8")


@pytest.mark.parametrize("quantize", [False, True])
def test_a_vector_does_not_depend_on_its_batch(quantize: bool) -> None:
    embedder = build_embedder(backend="onnx", quantize=quantize, batch_size=8)
    together = embedder.embed(TEXTS)
    for i, text in enumerate(TEXTS):
        np.testing.assert_allclose(embedder.embed([text])[0], together[i], atol=1e-6)


def test_the_export_runs_once_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from rankseam_sentence_transformers.model import resolve_model
    from rankseam_sentence_transformers.onnx_backend import export_onnx

    files = resolve_model("all-MiniLM-L6-v2")
    with caplog.at_level(logging.INFO, logger="rankseam_sentence_transformers"):
        first = export_onnx(files, quantize=True, cache_dir=tmp_path)
    exports = [r for r in caplog.records if getattr(r, "event", None) == "st.onnx.export"]
    assert len(exports) == 1 and exports[0].levelno == logging.WARNING
    assert str(tmp_path) in exports[0].getMessage()
    assert first.is_file() and first.parent.parent == tmp_path
    stamp = first.stat().st_mtime_ns
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rankseam_sentence_transformers"):
        again = export_onnx(files, quantize=True, cache_dir=tmp_path)
    assert again == first and again.stat().st_mtime_ns == stamp
    assert not [r for r in caplog.records if getattr(r, "event", None) == "st.onnx.export"]
    assert not list(tmp_path.rglob("*.tmp"))


def test_an_unwritable_cache_folder_is_a_configuration_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    embedder = build_embedder(backend="onnx", cache_dir=str(blocker / "models"))
    with pytest.raises(ConfigurationError, match="cache_dir"):
        embedder.embed(["hello"])


def test_quantize_needs_the_onnx_backend() -> None:
    with pytest.raises(ConfigurationError, match="backend = 'onnx'"):
        build_embedder(quantize=True)


def test_without_onnxruntime_the_error_says_how_to_install_it() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["onnxruntime"] = None  # as if not installed
        from rankseam.errors import ConfigurationError
        from rankseam.testing import build_component
        embedder = build_component("embedder", "sentence-transformers", {"backend": "onnx"})
        try:
            embedder.embed(["hello"])
        except ConfigurationError as exc:
            print("ERROR:", exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert "rankseam-sentence-transformers[torch,export]" in out.stdout, out.stdout + out.stderr
    assert "'minilm-int8' embedder" in out.stdout  # the way without torch


class TestOnnxInt8EmbedderContract(EmbedderContract):
    capabilities: ClassVar[frozenset[str]] = frozenset({"deterministic"})

    def make_embedder(self) -> SentenceTransformerEmbedder:
        return build_embedder(backend="onnx", quantize=True)


def test_int8_workers_give_each_text_exactly_its_vector_alone() -> None:
    texts = TEXTS * 3
    concurrent = build_embedder(backend="onnx", quantize=True, workers=2).embed(texts)
    serial = build_embedder(backend="onnx", quantize=True, workers=1).embed(texts)
    assert np.array_equal(concurrent, serial)
    alone = np.stack(
        [build_embedder(backend="onnx", quantize=True, workers=2).embed([t])[0] for t in texts]
    )
    assert np.array_equal(concurrent, alone)


LONG = [
    "Cells divide; proteins fold. " * 40,  # the prefix alone overflows: tokenized from it
    "a" + " " * 400 + "the rest, " * 30,  # the prefix is mostly blanks: tokenized whole
    "nospacesatall" * 40,  # no word boundary to cut at: tokenized whole
    "short text",
]


@pytest.mark.parametrize("max_seq_length", [16, 40])
def test_long_texts_tokenize_as_the_torch_backend_does(max_seq_length: int) -> None:
    def encoder(backend: str) -> object:
        options = {"backend": backend, "quantize": False, "max_seq_length": max_seq_length}
        return build_component("reranker", "semantic", options).encoder  # type: ignore[attr-defined]

    onnx, torch = encoder("onnx"), encoder("torch")
    vectors, tokens = onnx.encode_counted(LONG, batch_size=4, normalize=True)  # type: ignore[attr-defined]
    expected, expected_tokens = torch.encode_counted(LONG, batch_size=4, normalize=True)  # type: ignore[attr-defined]
    assert tokens == expected_tokens
    assert onnx.count_tokens(LONG) == expected_tokens  # type: ignore[attr-defined]
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
