"""The ``langchain`` embedder: a LangChain ``Embeddings`` object as rankseam's embedder, built
as the host builds it (from code, and from a ``rankseam.toml`` import path), with the kit's
embedder contract, and used by a real store."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

import rankseam
from rankseam.testing import EmbedderContract, build_component
from rankseam_langchain import LangChainEmbedder


class ModelEmbeddings(Embeddings):
    """A LangChain embeddings class that names its model, as OpenAI's and HuggingFace's do,
    and whose vectors are far from unit length (the adapter scales them)."""

    def __init__(self, model: str = "tiny-1") -> None:
        self.model = model
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[3.0 * (1 + len(t)), 4.0 * (1 + t.count("a")), 0.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        raise AssertionError("rankseam embeds queries with embed_documents")


class ZeroEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[0.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [0.0, 0.0]


class TestContract(EmbedderContract):
    """The kit's embedder contract over the adapter (the suite's fake is deterministic)."""

    def make_embedder(self) -> LangChainEmbedder:
        return LangChainEmbedder(DeterministicFakeEmbedding(size=8))


def test_descriptor_names_the_class_and_model_and_measures_the_dimensions() -> None:
    embeddings = ModelEmbeddings()
    embedder = LangChainEmbedder(embeddings)
    d = embedder.descriptor
    assert d.name == f"langchain/{__name__}.ModelEmbeddings/tiny-1"
    assert (d.dimensions, d.normalization, d.revision) == (3, "l2", "1")
    assert len(embeddings.calls) == 1  # one probe text, once
    other = LangChainEmbedder(ModelEmbeddings("tiny-2"))
    assert other.descriptor.key != d.key  # another model is another space
    given = LangChainEmbedder(
        ModelEmbeddings(),
        name="mine",
        revision="7",
        dimensions=3,
        fusion_weight=1.0,
        fusion_scale="minmax",
    )
    assert given.descriptor.key == "mine@7/d3/l2"
    assert (given.descriptor.fusion_weight, given.descriptor.fusion_scale) == (1.0, "minmax")
    assert given.embeddings.calls == []  # dimensions given: no probe


def test_vectors_are_unit_length_and_keep_their_direction() -> None:
    vectors = LangChainEmbedder(ModelEmbeddings()).embed(["", "aa"])
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, [[0.6, 0.8, 0.0], [0.6, 0.8, 0.0]], atol=1e-6)
    zero = LangChainEmbedder(ZeroEmbeddings()).embed(["x"])
    assert zero.tolist() == [[0.0, 0.0]]  # no direction: stays zero, scores 0


def test_built_by_the_host_from_an_object_or_an_import_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embeddings = ModelEmbeddings()
    built = build_component("embedder", "langchain", {"embeddings": embeddings})
    assert isinstance(built, LangChainEmbedder) and built.embeddings is embeddings
    (tmp_path / "my_models.py").write_text(
        "from langchain_core.embeddings import DeterministicFakeEmbedding\n"
        "embeddings = DeterministicFakeEmbedding(size=5)\n"
        "class Small(DeterministicFakeEmbedding):\n"
        "    size: int = 4\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_models", raising=False)
    by_path = build_component("embedder", "langchain", {"embeddings": "my_models:embeddings"})
    assert by_path.descriptor.dimensions == 5
    a_class = build_component("embedder", "langchain", {"embeddings": "my_models:Small"})
    assert a_class.descriptor.dimensions == 4  # a class there is called with no arguments
    config = tmp_path / "rankseam.toml"
    config.write_text(
        'embedder = "langchain"\n[embedders.langchain]\nembeddings = "my_models:embeddings"\n'
        'revision = "2"\n'
    )
    with rankseam.open_memory(tmp_path / "m.sqlite3", config_file=config) as memory:
        assert memory.embedder.descriptor.key.endswith("@2/d5/l2")
        memory.add("the store embeds with the configured LangChain model", memory_id="a")
        assert [h.ref.memory_id for h in memory.search("configured model", 1)] == ["a"]


@pytest.mark.parametrize(
    ("embeddings", "words"),
    [
        ("no_colon", "must be 'module:attribute'"),
        ("no_such_module_here:x", "could not be imported (ModuleNotFoundError"),
        ("langchain_core.embeddings:NoSuchThing", "could not be imported (AttributeError"),
        (42, "must be a LangChain Embeddings object (with embed_documents), got int"),
    ],
)
def test_a_wrong_embeddings_option_is_a_configuration_error(embeddings: object, words: str) -> None:
    with pytest.raises(rankseam.ConfigurationError, match="langchain") as info:
        build_component("embedder", "langchain", {"embeddings": embeddings})
    assert words in str(info.value)


def test_the_option_is_required_and_the_scale_checked() -> None:
    with pytest.raises(rankseam.ConfigurationError, match="embeddings"):
        build_component("embedder", "langchain", {})
    with pytest.raises(rankseam.ConfigurationError, match="fusion_scale"):
        build_component(
            "embedder", "langchain", {"embeddings": ModelEmbeddings(), "fusion_scale": "cosine"}
        )
