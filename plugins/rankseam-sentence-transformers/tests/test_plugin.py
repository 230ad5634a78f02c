"""Discovery, lazy import, assembly and option validation (fix-it errors)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rankseam.errors import ConfigurationError
from rankseam.plugin import FactoryContext
from rankseam.plugin.decision import RERANK_ROLE
from rankseam.testing import assert_listed, factory_context, invoke_cli
from rankseam_sentence_transformers import (
    DEFAULT_NO_THRESHOLD,
    DEFAULT_YES_THRESHOLD,
    SentenceTransformerEmbedder,
    SimilarityDecisionBackend,
)


def _context(**tables: dict[str, object]) -> FactoryContext:
    return factory_context(tables)


def test_found_through_its_entry_point() -> None:
    listed = assert_listed(
        "embedder",
        "sentence-transformers",
        plugin="sentence-transformers",
        distribution="rankseam-sentence-transformers",
    )
    assert listed.components == {
        "embedder": ("sentence-transformers", "minilm-int8"),
        "decision_backend": ("similarity",),
        "reranker": ("semantic",),
    }
    assert "no download" in listed.summary


def test_listed_by_rankseam_plugins() -> None:
    result = invoke_cli(["plugins"])
    assert result.exit_code == 0, result.output
    listed = {p["name"]: p for p in json.loads(result.output)}
    assert listed["sentence-transformers"]["status"] == "ok"


def test_importing_the_plugin_and_registering_does_not_import_torch() -> None:
    script = textwrap.dedent(
        """
        import sys
        import rankseam_sentence_transformers
        from rankseam.testing import build_component
        emb = build_component("embedder", "sentence-transformers")
        print(emb.descriptor.key)
        heavy = sorted(m for m in ("torch", "transformers", "sentence_transformers")
                       if m in sys.modules)
        print("HEAVY=" + ",".join(heavy))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert "sentence-transformers/all-MiniLM-L6-v2@sha256:" in out
    assert "HEAVY=\n" in out, out


def test_the_guard_really_blocks_off_host_connections() -> None:
    # the autouse fixture of conftest.py: proves the offline tests would notice a download
    with socket.socket() as sock, pytest.raises(OSError, match="network blocked"):
        sock.connect(("198.51.100.7", 443))


def test_defaults_are_documented_constants() -> None:
    backend = SimilarityDecisionBackend.from_options({})
    assert (backend.yes_threshold, backend.no_threshold) == (
        DEFAULT_YES_THRESHOLD,
        DEFAULT_NO_THRESHOLD,
    )
    assert backend.descriptor["model"] == "all-MiniLM-L6-v2"
    embedder = SentenceTransformerEmbedder.from_options({})
    assert embedder.descriptor.dimensions == 384
    assert embedder.descriptor.normalization == "l2"
    assert embedder.device == "cpu" and embedder.batch_size == 32


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"modle": "x"}, "[embedders.sentence-transformers] modle is not an option"),
        ({"batch_size": 0}, "batch_size must be an integer in 1..4096"),
        ({"batch_size": True}, "batch_size must be an integer"),
        ({"device": "gpu"}, "device must be 'cpu'"),
        ({"normalize": "yes"}, "normalize must be true or false"),
        ({"model": "sentence-transformers/all-mpnet-base-v2"}, "never downloads"),
        ({"model": ""}, "model must be a non-empty string, got ''"),
        ({"backend": "tensorrt"}, "backend must be one of"),
        ({"quantize": "int8"}, "quantize must be true or false"),
        ({"threads": 0}, "threads must be an integer in 1..256"),
        ({"quantize": True}, "quantize = true needs backend = 'onnx'"),
    ],
)
def test_embedder_options_are_validated(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=__import__("re").escape(message)):
        _context(embedders={"sentence-transformers": options}).build(
            "embedder", "sentence-transformers"
        )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"batch_size": 8}, "[decision_backends.similarity] batch_size is not an option"),
        ({"yes_threshold": 1.5}, "yes_threshold must be a number in [-1, 1]"),
        ({"no_threshold": "low"}, "no_threshold must be a number in [-1, 1], got 'low'"),
        ({"yes_threshold": 0.2, "no_threshold": 0.3}, "must not exceed yes_threshold"),
        ({"cache_size": 1}, "cache_size must be an integer >= 2"),
    ],
)
def test_similarity_options_are_validated(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=__import__("re").escape(message)):
        _context(decision_backends={"similarity": options}).decision_backend(
            "similarity", RERANK_ROLE
        )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"wieght": 0.5}, "[rerankers.semantic] wieght is not an option"),
        ({"weight": 1.5}, "weight must be a number in [0, 1]"),
        ({"backend": "cuda"}, "backend must be one of"),
        ({"max_seq_length": 4}, "max_seq_length must be an integer in 8..512"),
        ({"cache_size": -1}, "cache_size must be an integer >= 0"),
        ({"deadline_s": 0}, "deadline_s must be a number > 0"),
        ({"device": "gpu"}, "device must be 'cpu'"),
    ],
)
def test_semantic_options_are_validated(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=__import__("re").escape(message)):
        _context(rerankers={"semantic": options}).build("reranker", "semantic")


def test_a_directory_that_is_no_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not a sentence-transformers model directory"):
        SentenceTransformerEmbedder.from_options({"model": str(tmp_path)})
