"""The store commands, run through click's test runner against real store files."""

from __future__ import annotations

import json

import pytest
from cli_plugins import keeper_store
from click.testing import CliRunner

from rankseam import open_memory
from rankseam.cli import cli
from rankseam.commands.store import parse_component_options


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("RANKSEAM_DB", "RANKSEAM_RERANK", "RANKSEAM_NAMESPACE", "RANKSEAM_POOL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def db(tmp_path):
    """An existing, empty store (read commands refuse a missing one)."""
    path = str(tmp_path / "cli.sqlite3")
    open_memory(path).close()
    return path


def run(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_add_and_search_json_carries_identity_text_and_scores(db):
    out = run("add", "Ada drinks green tea", "--db", db, "--id", "tea", "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["ref"] == {
        "namespace": "default",
        "memory_id": "tea",
        "revision": 1,
    }
    run("add", "Ada rides a bicycle", "--db", db)
    out = run("search", "green tea", "--db", db, "--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert "trace" not in data
    hit = data["hits"][0]
    assert (hit["namespace"], hit["memory_id"], hit["revision"]) == ("default", "tea", 1)
    assert hit["text"] == "Ada drinks green tea"
    assert {"score", "matched_by", "channel_scores"} <= set(hit)
    traced = json.loads(
        run("search", "green tea", "--db", db, "--json", "--trace", "--rerank", "identity").output
    )
    assert traced["trace"]["rerank"]["policy_id"] == "rankseam.rerank.identity.v1"
    assert traced["trace"]["coarse"][0]["memory_id"] == "tea"


def test_plain_search_output_and_env_db(db, monkeypatch):
    monkeypatch.setenv("RANKSEAM_DB", db)
    run("add", "Lisbon trams are yellow")
    out = run("search", "trams", "--limit", "1", "--trace")
    assert out.exit_code == 0
    assert "default/" in out.output and "Lisbon trams are yellow" in out.output
    assert '"coarse"' in out.output


def test_ingest_progress_and_report(db, tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text(
        "\n".join(json.dumps({"id": f"m{i}", "text": f"memory {i}"}) for i in range(30)) + "\n\n"
    )
    out = run("ingest", str(f), "--db", db, "--batch-size", "7", "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.output[out.output.index("{") :])
    assert report["added"] == 30 and report["batches"] == 5
    again = run("ingest", str(f), "--db", db)
    assert "30 unchanged" in again.output


@pytest.mark.parametrize(
    ("lines", "where"),
    [
        (['{"text": "a"}', '{"text": "b"}', "{not json", '{"text": "c"}'], "line 3"),
        (['{"text": "a"}', "", '{"text": ""}'], "line 3"),
        (['{"text": "a"}', '["a list"]'], "line 2"),
        (['{"text": "a"}', '{"txt": "typo"}'], "line 2"),
    ],
)
def test_ingest_reports_the_malformed_line_and_writes_no_half_batch(db, tmp_path, lines, where):
    f = tmp_path / "bad.jsonl"
    f.write_text("\n".join(lines) + "\n")
    out = CliRunner().invoke(cli, ["ingest", str(f), "--db", db, "--batch-size", "100"])
    assert out.exit_code == 1
    assert where in out.output
    stats = json.loads(run("stats", "--db", db).output)
    assert stats["memories"] == 0  # the failing batch held every record: nothing written


def test_ingest_keeps_committed_batches(db, tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text("\n".join([*(json.dumps({"text": f"t{i}"}) for i in range(4)), "oops"]) + "\n")
    out = CliRunner().invoke(cli, ["ingest", str(f), "--db", db, "--batch-size", "2"])
    assert out.exit_code == 1 and "4 records committed, line 5" in out.output
    assert json.loads(run("stats", "--db", db).output)["memories"] == 4


def test_component_options_rule():
    assert parse_component_options(["--mmr-lambda", "0.7"], "mmr") == {"lambda": 0.7}
    assert parse_component_options(["--decision-backend", "heuristic"], "decision") == {
        "backend": "heuristic"
    }
    assert parse_component_options(
        ["--decision-max-calls=3", "--decision-keep-abstain", "false"], "decision"
    ) == {"max_calls": 3, "keep_abstain": False}
    assert parse_component_options(["--x-name", '"quoted"'], "x") == {"name": "quoted"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # keeper: a reranker installed for this test (cli_plugins.KEEPER), not the chosen one
        (["--rerank", "identity", "--keeper-keep", "2"], "not an option of the chosen reranker"),
        (["--keeper-keep", "2"], "no reranker is chosen"),
        (["--rerank", "identity", "--identity-x"], "needs a value"),
        (["--rerank", "identity", "stray"], "unexpected extra argument"),
    ],
)
def test_component_option_errors_are_usage_errors(tmp_path, monkeypatch, install, args, message):
    store = keeper_store(tmp_path, monkeypatch, install, ["q"])
    out = CliRunner().invoke(cli, ["search", "q", "--db", str(store), *args])
    assert out.exit_code == 2
    assert message in out.output


def test_component_options_reach_the_reranker(db):
    run("add", "x y z", "--db", db)
    out = CliRunner().invoke(
        cli, ["search", "x", "--db", db, "--rerank", "identity", "--identity-colour", "blue"]
    )
    assert out.exit_code == 1
    assert "[rerankers.identity] colour is not an option; it takes no options" in out.output


def test_config_errors_exit_1_with_message(db, tmp_path):
    cfg = tmp_path / "rankseam.toml"
    cfg.write_text('[search]\nreranker = "does-not-exist"\n')
    out = CliRunner().invoke(cli, ["search", "q", "--db", db, "--config", str(cfg)])
    assert out.exit_code == 1 and "no reranker named 'does-not-exist'" in out.output


def test_stats_and_reembed(db):
    run("add", "one memory", "--db", db)
    stats = json.loads(run("stats", "--db", db).output)
    assert stats["memories"] == 1 and stats["vector_coverage"] == 1.0
    out = run("reembed", "--db", db)
    assert "embedded 0 memories" in out.output


def test_read_commands_refuse_a_missing_store_and_create_nothing(tmp_path):
    missing = tmp_path / "nowhere" / "store.sqlite3"
    for args in (["search", "hello"], ["stats"], ["reembed"], ["export", str(tmp_path / "out")]):
        out = run(*args, "--db", str(missing))
        assert out.exit_code == 1, (args, out.output)
        assert "no rankseam store at" in out.output
    assert not missing.parent.exists()
