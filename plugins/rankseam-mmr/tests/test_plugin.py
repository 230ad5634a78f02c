"""The plugin is found through its entry point, like any third-party plugin."""

from __future__ import annotations

import json

from click.testing import CliRunner

from rankseam.cli import cli
from rankseam.compose import ComponentContext, Config
from rankseam.plugins import get_plugins, get_registry


def test_found_through_its_entry_point() -> None:
    infos = {info.name: info for info in get_plugins()}
    assert "mmr" in infos, f"plugins found: {sorted(infos)}"
    info = infos["mmr"]
    assert info.status == "ok", info.error
    assert info.distribution == "rankseam-mmr"
    assert info.components == {"reranker": ["mmr"]}
    spec = get_registry().get("reranker", "mmr")
    assert spec is not None and spec.plugin == "mmr" and "marginal relevance" in spec.summary


def test_assembled_from_configuration_by_name() -> None:
    config = Config.from_mapping(
        {"search": {"reranker": "mmr"}, "rerankers": {"mmr": {"lambda": 0}}}
    )
    reranker = ComponentContext(config).reranker("mmr")
    assert reranker.policy_id == "rankseam.rerank.mmr.v1"
    assert reranker.descriptor["lambda"] == 0.0


def test_listed_by_rankseam_plugins() -> None:
    result = CliRunner().invoke(cli, ["plugins"])
    assert result.exit_code == 0, result.output
    listed = {p["name"]: p for p in json.loads(result.output)}
    assert listed["mmr"]["components"] == {"reranker": ["mmr"]}
    assert listed["mmr"]["status"] == "ok"
