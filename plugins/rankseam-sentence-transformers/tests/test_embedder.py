"""The embedder on real text, with the packaged model, offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from st_builders import TEXTS

from rankseam.plugin.embedders import Embedder
from rankseam.testing import build_component
from rankseam_sentence_transformers import SentenceTransformerEmbedder
from rankseam_sentence_transformers.embedder import FUSION_SCALE, FUSION_WEIGHT


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    built = build_component("embedder", "sentence-transformers")
    assert isinstance(built, SentenceTransformerEmbedder)
    return built


def test_embeds_real_text_into_unit_float32_vectors(embedder: SentenceTransformerEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


def test_meaning_not_words_decides_similarity(embedder: SentenceTransformerEmbedder) -> None:
    painted, paraphrase, taxes = embedder.embed(TEXTS[:3])
    assert float(painted @ paraphrase) > 0.6
    assert float(painted @ taxes) < 0.2
    assert float(painted @ paraphrase) > float(painted @ taxes) + 0.4


def test_a_vector_does_not_depend_on_its_batch(embedder: SentenceTransformerEmbedder) -> None:
    alone = embedder.embed([TEXTS[0]])[0]
    batched = embedder.embed(TEXTS)[0]
    np.testing.assert_allclose(alone, batched, atol=1e-5)


def test_descriptor_pins_name_revision_dimensions_normalisation(
    embedder: SentenceTransformerEmbedder,
) -> None:
    d = embedder.descriptor
    assert d.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert d.revision.startswith("sha256:") and len(d.revision) == len("sha256:") + 16
    assert d.key == f"{d.name}@{d.revision}/d384/l2"
    again = SentenceTransformerEmbedder.from_options({})
    assert again.descriptor == d  # same files, same space
    raw = SentenceTransformerEmbedder.from_options({"normalize": False})
    assert raw.descriptor.normalization == "none" and raw.descriptor.key != d.key


def test_descriptor_declares_how_fusion_uses_the_cosine(
    embedder: SentenceTransformerEmbedder,
) -> None:
    d = embedder.descriptor
    assert (d.fusion_weight, d.fusion_scale) == (FUSION_WEIGHT, FUSION_SCALE) == (0.7, "minmax")
    # end to end: weights lexical 1, vector 0.7, importance 0.1 (total 1.8); the vector
    # channel's worst hit scales to 0, so a memory only it found, and found last, keeps
    # just the importance prior's share: 0.1 * 0.5 / 1.8
    import rankseam

    with rankseam.open_memory(":memory:", embedder="sentence-transformers") as memory:
        for text in TEXTS[:3]:
            memory.add(text)
        hits = memory.search("a painting of a sunrise", limit=3).hits
    assert [h.text for h in hits][-1] == TEXTS[2]
    assert hits[-1].matched_by == ("vector",)
    assert hits[-1].score == pytest.approx(0.1 * 0.5 / 1.8)
    assert hits[0].text == TEXTS[0] and hits[0].matched_by == ("lexical", "vector")


def test_a_changed_model_file_is_a_new_vector_space(
    embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    source = embedder.files.path
    copy = tmp_path / "my-minilm"
    copy.mkdir()
    for item in source.iterdir():  # link the big files, copy the small ones
        target = copy / item.name
        if item.is_dir():
            shutil.copytree(item, target)
        elif item.stat().st_size > 1_000_000:
            os.symlink(item, target)
        else:
            shutil.copy2(item, target)
    same = SentenceTransformerEmbedder.from_options({"model": str(copy)})
    assert same.descriptor.revision == embedder.descriptor.revision
    assert same.descriptor.name == "sentence-transformers/my-minilm"
    config = copy / "tokenizer_config.json"
    config.write_text(config.read_text().replace("}", ', "comment": "edited"}', 1))
    edited = SentenceTransformerEmbedder.from_options({"model": str(copy)})
    assert edited.descriptor.revision != embedder.descriptor.revision


def test_loads_and_embeds_with_every_off_host_connection_refused() -> None:
    """A fresh process (nothing loaded yet) with a socket guard from its first line: loading the
    packaged model and embedding must not try to reach the network at all."""
    script = textwrap.dedent(
        """
        import ipaddress, socket
        attempts = []
        real = socket.socket.connect
        def connect(self, address):
            host = address[0] if isinstance(address, tuple) else None
            if host is not None and host != "localhost" and not ipaddress.ip_address(
                    str(host).split("%")[0]).is_loopback:
                attempts.append(str(address))
                raise OSError("network blocked")
            return real(self, address)
        socket.socket.connect = connect
        socket.socket.connect_ex = connect
        real_gai = socket.getaddrinfo
        def getaddrinfo(host, *args, **kwargs):
            if host not in (None, "localhost", "127.0.0.1", "::1"):
                attempts.append(f"dns:{host}")
                raise socket.gaierror("network blocked")
            return real_gai(host, *args, **kwargs)
        socket.getaddrinfo = getaddrinfo
        from rankseam.testing import build_component
        emb = build_component("embedder", "sentence-transformers")
        v = emb.embed(["offline embedding works", "a second sentence"])
        print("SHAPE", v.shape, "ATTEMPTS", attempts)
        from transformers.utils import logging
        print("BARS", logging.is_progress_bar_enabled())
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SHAPE (2, 384) ATTEMPTS []" in done.stdout, done.stdout + done.stderr[-2000:]
    # loading prints no progress bar, and leaves the user's progress-bar setting as it was
    assert "Loading weights" not in done.stderr, done.stderr[-2000:]
    assert "BARS True" in done.stdout


LONG = [
    "Cells divide; proteins fold. " * 80,  # the prefix alone fills 256 tokens: encoded from it
    "a" + " " * 1600 + "the rest, " * 30,  # the prefix is mostly blanks: encoded whole
    "nospacesatall" * 150,  # no word boundary to cut at: encoded whole
    "short text",
]


@pytest.mark.parametrize("max_seq_length", [256, 40])
def test_long_texts_give_sentence_transformers_own_vectors_and_tokens(max_seq_length: int) -> None:
    """The torch backend hands a long text to the model as a prefix with the same tokens: the
    vectors and token counts are those of sentence-transformers on the whole texts."""
    from sentence_transformers import SentenceTransformer

    options = {"backend": "torch", "max_seq_length": max_seq_length}
    encoder = build_component("reranker", "semantic", options).encoder  # type: ignore[attr-defined]
    path = str(build_component("embedder", "sentence-transformers").files.path)  # type: ignore[attr-defined]
    plain = SentenceTransformer(path, device="cpu", local_files_only=True)
    plain.max_seq_length = max_seq_length
    expected = plain.encode(LONG, batch_size=1, normalize_embeddings=True)
    expected_tokens = int(plain.tokenize(LONG)["attention_mask"].sum())
    vectors, tokens = encoder.encode_counted(LONG, batch_size=1, normalize=True)
    assert tokens == expected_tokens == encoder.count_tokens(LONG)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
