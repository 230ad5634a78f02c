"""`rankseam bench cli` end to end: real child processes, timed; the report's shape and its
accounting are checked, never the figures themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import rankseam
from rankseam.bench.startup import FLOOR
from rankseam.cli import cli


def test_bench_cli_times_each_command_against_the_floor(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["bench", "cli", "--runs", "2", "--memories", "30", "--rerank", "identity"]
    args += ["--only", "rankseam --version", "--only", "rankseam search --rerank identity"]
    result = CliRunner().invoke(cli, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    results = report["results"]
    assert list(results) == [FLOOR, "rankseam --version", "rankseam search --rerank identity"]
    for label, r in results.items():
        assert len(r["cpu_s"]) == len(r["wall_s"]) == 2, label
        assert all(c > 0 for c in r["cpu_s"]), label  # a process always costs some CPU
        assert r["cpu_s_min"] <= r["cpu_s_median"] <= r["cpu_s_max"]
        assert r["cpu_vs_floor"] == r["cpu_s_median"] / results[FLOOR]["cpu_s_median"]
    assert results["rankseam --version"]["argv"][-1] == "--version"
    assert results["rankseam search --rerank identity"]["argv"][-2:] == ["--rerank", "identity"]
    assert report["configuration"]["memories"] == 30
    assert report["configuration"]["cli"]["command"] == "cli bench cli"
    markdown = (out / "report.md").read_text()
    assert "| `rankseam --version` |" in markdown and "median of 2 interleaved runs" in markdown
    assert markdown in result.output


def test_bench_cli_refuses_an_unknown_label_and_reports_a_failing_command(
    tmp_path: Path,
) -> None:
    result = CliRunner().invoke(cli, ["bench", "cli", "--memories", "5", "--only", "nope"])
    assert result.exit_code == 1
    assert "unknown command label(s) ['nope']" in result.output
    missing = tmp_path / "missing.db"
    result = CliRunner().invoke(
        cli, ["bench", "cli", "--db", str(missing), "--only", "rankseam search", "--runs", "1"]
    )
    assert result.exit_code == 1
    assert "`rankseam search` failed with exit status 1" in result.output
    assert "check --db" in result.output  # the child's own error


def test_bench_cli_runs_each_command_also_with_a_baseline_checkout(tmp_path: Path) -> None:
    checkout = Path(rankseam.__file__).resolve().parents[3]
    if not (checkout / "core" / "src" / "rankseam" / "cli.py").is_file():
        pytest.skip("rankseam is not imported from a checkout of its repository")
    out = tmp_path / "out"
    args = ["bench", "cli", "--runs", "1", "--memories", "10", "--rerank", "none"]
    args += ["--only", "rankseam search", "--baseline", str(checkout), "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    results = json.loads((out / "report.json").read_text())["results"]
    assert list(results) == [FLOOR, "rankseam search", "rankseam search [baseline]"]
    baseline = results["rankseam search [baseline]"]
    assert baseline["env"]["PYTHONPATH"].startswith(str(checkout / "core" / "src"))
    # each version searches a store it wrote itself
    assert baseline["argv"][-1] != results["rankseam search"]["argv"][-1]
    assert Path(baseline["argv"][-1]).name == "base.sqlite3"
    bad = CliRunner().invoke(cli, ["bench", "cli", "--baseline", str(tmp_path), "--runs", "1"])
    assert bad.exit_code == 1 and "not a rankseam checkout" in bad.output
