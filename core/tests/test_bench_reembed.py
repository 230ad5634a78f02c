"""`rankseam bench reembed` end to end: the quality part on a tiny LoCoMo-schema file made here,
the live part on LoCoMo dev memories (skipped without RANKSEAM_DATA)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_bench_datasets import _tiny_locomo

from rankseam.bench.datasets import find_locomo
from rankseam.cli import cli
from rankseam.errors import ConfigurationError


def test_quality_part_on_tiny_locomo(tmp_path):
    data = _tiny_locomo(tmp_path / "l.json")
    out = tmp_path / "out"
    args = ["bench", "reembed", "--dataset", f"locomo:{data}", "--to", "hashed:dimensions=64"]
    result = CliRunner().invoke(cli, [*args, "--checkpoints", "0,50", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    (part,) = report["quality"]
    assert [c["percent"] for c in part["checkpoints"]] == [0, 50, 100]  # 100 always runs
    # the old space answers until the re-embed completes: the same figures at 0 and 50 %
    assert part["checkpoints"][0]["answering"] == part["checkpoints"][1]["answering"]
    assert part["checkpoints"][-1]["answering"] == part["embedded_at_ingest"]
    assert all(part["final_equals_ingest"].values())
    assert "| 50 % |" in (out / "report.md").read_text()
    assert report["configuration"]["cli"]["options"]["target"] == "hashed:dimensions=64"


def test_nothing_to_run_is_an_error():
    result = CliRunner().invoke(cli, ["bench", "reembed"])
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigurationError) or "nothing to run" in result.output


def test_live_part_loses_nothing(tmp_path):
    try:
        find_locomo()
    except ConfigurationError as exc:
        pytest.skip(f"LoCoMo dev data not found ({exc}); set RANKSEAM_DATA")
    from rankseam.bench.reembed import parse_embedder, run_reembed

    body = run_reembed(
        [],
        source=parse_embedder("hashed"),
        target=parse_embedder("hashed:dimensions=64"),
        live_size=400,
        batch_size=50,
        workdir=tmp_path,
    )
    live = body["live"]
    assert live["reembed"]["complete"] and live["reembed"]["switched"]
    assert live["failed_searches_or_writes"] == 0, live["failures"]
    assert live["writes"] > 0 and live["writes_missing"] == 0
    assert live["new_space_complete"] and live["active_space_at_end"] == live["new_space"]
    assert live["memories_at_end"] == 400 + live["writes"]
