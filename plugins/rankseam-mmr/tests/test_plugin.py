"""The plugin is found through its entry point, like any third-party plugin."""

from __future__ import annotations

import json

from rankseam.testing import assert_listed, build_component, invoke_cli


def test_found_through_its_entry_point() -> None:
    listing = assert_listed("reranker", "mmr", plugin="mmr", distribution="rankseam-mmr")
    assert listing.components == {"reranker": ("mmr",)}
    assert "marginal relevance" in listing.summary


def test_assembled_from_configuration_by_name() -> None:
    config = {"search": {"reranker": "mmr"}, "rerankers": {"mmr": {"lambda": 0}}}
    reranker = build_component("reranker", "mmr", config=config)
    assert reranker.policy_id == "rankseam.rerank.mmr.v1"
    assert reranker.descriptor["lambda"] == 0.0


def test_listed_by_rankseam_plugins() -> None:
    result = invoke_cli(["plugins"])
    assert result.exit_code == 0, result.output
    listed = {p["name"]: p for p in json.loads(result.output)}
    assert listed["mmr"]["components"] == {"reranker": ["mmr"]}
    assert listed["mmr"]["status"] == "ok"
