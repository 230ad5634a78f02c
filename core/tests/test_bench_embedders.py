"""`rankseam bench quality`: several embedders side by side, and component options from
`--option TABLE.NAME.KEY=VALUE`. Only the built-in hashed embedder is used (no torch): the
second embedder is a real plugin written here, found through its entry point."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_bench_datasets import _tiny_locomo

from rankseam.bench.policies import component_options, option_defaults, parse_policies
from rankseam.bench.quality import POLICY_KEYS, columns_for
from rankseam.cli import cli
from rankseam.errors import ConfigurationError

PLOT_FLAG = "--plot" if importlib.util.find_spec("matplotlib") else "--no-plot"
CORE_SRC = Path(__file__).resolve().parents[1] / "src"


def _quality(*args: str):
    return CliRunner().invoke(cli, ["bench", "quality", "--no-progress", "--no-plot", *args])


# -- parsing and labelling ---------------------------------------------------------------------


def test_columns_are_labelled_by_embedder_only_when_several():
    policies = parse_policies("none,mmr:lambda=0.5")
    single = columns_for(policies, ["hashed"])
    assert [c.label for c in single] == ["none", "mmr:lambda=0.5"]
    assert {c.embedder for c in single} == {"hashed"}
    assert [c.label for c in columns_for(policies)] == ["none", "mmr:lambda=0.5"]
    two = columns_for(policies, ["hashed", "sentence-transformers"])
    assert [c.label for c in two] == [
        "hashed/none",
        "hashed/mmr:lambda=0.5",
        "sentence-transformers/none",
        "sentence-transformers/mmr:lambda=0.5",
    ]
    assert [c.embedder for c in two] == ["hashed"] * 2 + ["sentence-transformers"] * 2
    with pytest.raises(ConfigurationError, match="twice"):
        columns_for(policies, ["hashed", "hashed"])


def test_option_addresses_any_configuration_table():
    tables = component_options(
        [
            "mmr.lambda=0.7",
            "rerankers.decision.backend=similarity",
            "decision_backends.similarity.no_threshold=0.4",
            "decision_backends.similarity.yes-threshold=0.6",
            "embedders.hashed.dimensions=128",
        ]
    )
    assert tables == {
        "rerankers": {"mmr": {"lambda": 0.7}, "decision": {"backend": "similarity"}},
        "decision_backends": {"similarity": {"no_threshold": 0.4, "yes_threshold": 0.6}},
        "embedders": {"hashed": {"dimensions": 128}},
    }
    assert option_defaults(["rerankers.mmr.lambda=0.2"]) == {"mmr": {"lambda": 0.2}}
    for bad in ("nosuch_table.a.b=1", "decision_backends.similarity=0.4", "a.b.c.d=1", "x.y"):
        with pytest.raises(ConfigurationError, match="TABLE.NAME.KEY=VALUE"):
            component_options([bad])


def test_cli_rejects_a_repeated_or_unknown_embedder_before_ingest(tmp_path):
    data = _tiny_locomo(tmp_path / "l.json")
    result = _quality("--dataset", f"locomo:{data}", "--embedder", "hashed,hashed")
    assert result.exit_code == 1 and "twice" in result.output
    result = _quality("--dataset", f"locomo:{data}", "--embedder", "hashed,nosuch")
    assert result.exit_code == 1 and "no embedder named 'nosuch'" in result.output
    result = _quality("--dataset", f"locomo:{data}", "--embedder", " , ")
    assert result.exit_code == 1 and "at least one name" in result.output


# -- component options reach the stores ----------------------------------------------------------


def test_embedder_option_changes_the_space_the_stores_use(tmp_path):
    data = _tiny_locomo(tmp_path / "l.json")
    out = tmp_path / "out"
    result = _quality(
        "--dataset",
        f"locomo:{data}",
        "--embedder",
        "hashed",
        "--rerank",
        "none",
        "--option",
        "embedders.hashed.dimensions=64",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    config = report["configuration"]
    assert config["embedders"] == ["hashed"]
    assert config["components"] == {"embedders": {"hashed": {"dimensions": 64}}}
    assert config["search"]["embedder"]["dimensions"] == 64
    assert set(report["policies"]) == {"none"}  # one embedder: labels stay plain
    assert report["details"]["none"]["embedder"] == "hashed"


def test_a_bad_backend_option_fails_before_ingest_with_the_fix(tmp_path):
    data = _tiny_locomo(tmp_path / "l.json")
    result = _quality(
        "--dataset",
        f"locomo:{data}",
        "--rerank",
        "none",
        "--option",
        "decision_backends.heuristic.no_treshold=0.4",
    )
    assert result.exit_code == 1
    assert "no_treshold" in result.output


def test_backend_option_changes_decision_verdicts(tmp_path):
    pytest.importorskip("rankseam_decision", reason="needs the rankseam-decision plugin")
    data = _tiny_locomo(tmp_path / "l.json")
    label = "decision:backend=heuristic"
    runs = {"default": [], "strict": ["no_threshold=0.99", "yes_threshold=1.0"]}
    reports = {}
    for name, options in runs.items():
        out = tmp_path / name
        args = ["--dataset", f"locomo:{data}", "--rerank", label, "--out", str(out)]
        for option in options:
            args += ["--option", f"decision_backends.heuristic.{option}"]
        result = _quality(*args)
        assert result.exit_code == 0, result.output
        reports[name] = json.loads((out / "report.json").read_text())
    # strict: only a candidate holding every query term survives; none does, so every search
    # falls back to the coarse order, which the default thresholds keep for some questions
    assert reports["strict"]["details"][label]["status_counts"] == {"fell_back": 3}
    assert reports["default"]["details"][label]["status_counts"].get("ok", 0) > 0
    assert reports["strict"]["configuration"]["components"] == {
        "decision_backends": {"heuristic": {"no_threshold": 0.99, "yes_threshold": 1.0}}
    }


# -- two embedders side by side (a real second embedder plugin) ---------------------------------

_TWIN = """
import rankseam
from rankseam.default_plugins.hashed_embedder import HashedEmbedder


def _factory(options, context):
    return HashedEmbedder.from_options({"dimensions": 32, **options})


@rankseam.hookimpl
def register_embedders(register):
    register("hashed-32", _factory, summary="the hashed embedder at 32 dimensions (test)")
"""


def _install_twin(root: Path) -> None:
    (root / "rankseam_twin.py").write_text(textwrap.dedent(_TWIN))
    info = root / "rankseam_twin-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rankseam-twin\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[rankseam]\nhashed_twin = rankseam_twin\n")


def test_two_embedders_run_side_by_side_with_labelled_columns(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _install_twin(site)
    data = _tiny_locomo(tmp_path / "l.json")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(site), str(CORE_SRC)]),
        RANKSEAM_LOAD_PLUGINS="hashed_twin",  # only our plugin beside the built-in ones
    )
    args = ["--dataset", f"locomo:{data}", "--rerank", "none,identity", "--limit", "5"]
    args += ["--embedder", "hashed,hashed-32", "--out", str(out), "--no-progress", PLOT_FLAG]
    proc = subprocess.run(
        [sys.executable, "-c", "from rankseam.cli import main; main()", "bench", "quality", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # the run's stores are named alike on purpose: no warning of a mistyped store name
    assert "no rankseam store at" not in proc.stderr
    report = json.loads((out / "report.json").read_text())
    labels = ["hashed/none", "hashed/identity", "hashed-32/none", "hashed-32/identity"]
    assert list(report["policies"]) == labels
    for flat in report["policies"].values():
        assert tuple(flat) == POLICY_KEYS  # flat objects, stable keys
    assert [report["details"][x]["embedder"] for x in labels] == ["hashed"] * 2 + ["hashed-32"] * 2
    assert [report["details"][x]["policy"] for x in labels] == ["none", "identity"] * 2
    # each embedder searched its own stores: every column saw every question
    assert all(report["details"][x]["status_counts"] for x in labels)
    assert report["details"]["hashed-32/identity"]["status_counts"] == {"ok": 3}
    spaces = report["configuration"]["search_by_embedder"]
    assert spaces["hashed"]["embedder"]["dimensions"] == 256
    assert spaces["hashed-32"]["embedder"]["dimensions"] == 32
    assert set(report["timing"]["ingest_s_by_embedder"]) == {"hashed", "hashed-32"}
    markdown = (out / "report.md").read_text()
    assert "| hashed-32/identity |" in markdown and "Embedders side by side" in markdown
