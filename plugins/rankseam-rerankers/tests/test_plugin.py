"""Discovery, lazy import, and options checked with errors that say how to fix them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rankseam.errors import ConfigurationError
from rankseam.testing import assert_listed, build_component, invoke_cli
from rankseam_rerankers import RerankersOptions, RerankersReranker, make_reranker


def test_found_through_its_entry_point_and_listed_by_rankseam_plugins() -> None:
    listed = assert_listed(
        "reranker", "rerankers", plugin="rerankers", distribution="rankseam-rerankers"
    )
    assert listed.components == {"reranker": ("rerankers",)}
    result = invoke_cli(["plugins"])
    assert result.exit_code == 0, result.output
    listed = {p["name"]: p for p in json.loads(result.output)}
    assert listed["rerankers"]["status"] == "ok"
    assert listed["rerankers"]["components"] == {"reranker": ["rerankers"]}


def test_importing_and_registering_imports_neither_torch_nor_the_library() -> None:
    script = textwrap.dedent(
        """
        import sys
        import rankseam_rerankers
        from rankseam.testing import assert_listed
        assert_listed("reranker", "rerankers", plugin="rerankers")
        rankseam_rerankers.RerankersOptions.from_mapping({"model": "org/some-cross-encoder"})
        heavy = sorted(m for m in ("torch", "transformers", "rerankers", "requests")
                       if m in sys.modules)
        print("HEAVY=" + ",".join(heavy))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert "HEAVY=\n" in out, out


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "[rerankers.rerankers] model is required: a non-empty string (a local model"),
        ({"model": ""}, "model must be a non-empty string"),
        ({"model": "x", "modle_type": "t5"}, "[rerankers.rerankers] modle_type is not an option"),
        ({"model": "x", "batch_size": 0}, "batch_size must be an integer in 1..4096"),
        ({"model": "x", "batch_size": True}, "batch_size must be an integer"),
        ({"model": "x", "max_length": 2}, "max_length must be an integer in 8.."),
        ({"model": "x", "dtype": "float8"}, "dtype must be one of 'float32'"),
        ({"model": "x", "deterministic": "yes"}, "deterministic must be true or false"),
        ({"model": "x", "local_files_only": 1}, "local_files_only must be true or false"),
        ({"model": "x", "device": 3}, "device must be a non-empty string"),
        ({"model": "./no/such/model"}, "looks like a path but is not a directory"),
        ({"model": "x", "api_key": {"$env": ""}}, "api_key must be a non-empty string"),
    ],
)
def test_bad_options_are_refused_before_anything_loads(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        RerankersOptions.from_mapping(options)
    assert message in str(info.value)


def test_a_missing_model_fails_at_assembly_with_a_fix(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(ConfigurationError) as info:
        make_reranker({"model": str(empty), "model_type": "cross-encoder"}, None)
    assert "could not load model" in str(info.value)
    assert "local directory" in str(info.value)


def test_a_hub_name_with_local_files_only_is_refused_without_a_download() -> None:
    # Not in any local cache and downloads forbidden: a clean configuration error, at once.
    options = {
        "model": "rankseam-test/no-such-cross-encoder",
        "model_type": "cross-encoder",
        "local_files_only": True,
    }
    with pytest.raises(ConfigurationError) as info:
        make_reranker(options, None)
    assert "local_files_only" in str(info.value)


def test_an_unknown_model_type_names_the_library(tiny_model: Path) -> None:
    with pytest.raises(ConfigurationError) as info:
        make_reranker({"model": str(tiny_model), "model_type": "no-such-type"}, None)
    assert "rerankers" in str(info.value) and "no-such-type" in str(info.value)


def test_options_a_model_type_does_not_take_are_named(tiny_model: Path, tmp_path: Path) -> None:
    # The hosted-API ranker takes no batch_size: the error says which options to drop.
    options = {
        "model": "m",
        "model_type": "text-embeddings-inference",
        "url": "http://127.0.0.1:9/rerank",
        "api_key": "k",
        "batch_size": 4,
    }
    with pytest.raises(ConfigurationError) as info:
        make_reranker(options, None)
    assert "apply only to some model types" in str(info.value)


def test_the_api_key_stays_out_of_descriptor_and_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RS_TEST_RERANK_KEY", "sk-very-secret-123")
    options = RerankersOptions.from_mapping(
        {
            "model": "m",
            "model_type": "text-embeddings-inference",
            "url": "http://127.0.0.1:9/rerank",
            "api_key": {"$env": "RS_TEST_RERANK_KEY"},
        }
    )
    assert options.api_key == "sk-very-secret-123"
    assert "sk-very-secret" not in repr(options)
    reranker = RerankersReranker(options)
    assert "sk-very-secret" not in json.dumps(reranker.descriptor)
    assert "sk-very-secret" not in repr(reranker)
    assert reranker.deterministic is False  # a hosted API is not assumed to be


def test_built_through_the_configuration(tiny_model: Path) -> None:
    config = {"rerankers": {"rerankers": {"model": str(tiny_model), "model_type": "cross-encoder"}}}
    reranker = build_component("reranker", "rerankers", config=config)
    assert reranker.policy_id == "rankseam.rerank.rerankers.v1"
    assert reranker.descriptor["ranker"] == "TransformerRanker"
    assert reranker.descriptor["model"] == str(tiny_model.resolve())
    assert reranker.deterministic is True
    assert "scores" in assert_listed("reranker", "rerankers", plugin="rerankers").summary
