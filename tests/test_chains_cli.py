"""Reranker chains from the command line, with a plugin's reranker as a stage (the mmr
plugin is installed in this session): `--rerank a --rerank b` or `--rerank a,b`, each
stage's options by its name (docs/seam.md, "Reranker chains")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from rankseam.cli import cli
from rankseam.testing import sample_memory


def _cli(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_the_cli_takes_a_chain_repeated_or_as_a_comma_list(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.sqlite3")
    with sample_memory(db):
        pass  # the store, filled and closed: the command opens it
    for flags in (["--rerank", "identity", "--rerank", "mmr"], ["--rerank", "identity,mmr"]):
        out = _cli(
            "search",
            "birthday dinner",
            "--db",
            db,
            "--json",
            "--trace",
            *flags,
            "--mmr-lambda",
            "0.2",
        )
        assert out.exit_code == 0, out.output
        stages = json.loads(out.output)["trace"]["rerank"]["stages"]
        assert stages[0]["policy_id"] == "rankseam.rerank.identity.v1"
        assert len(stages) == 2 and stages[1]["policy_id"].startswith("rankseam.rerank.mmr")
        assert stages[1]["descriptor"].get("lambda") == 0.2
    chain = ["search", "q", "--db", db, "--rerank", "identity", "--rerank", "mmr"]
    # an option of an installed reranker that is no stage of the chain
    bad = CliRunner().invoke(cli, [*chain, "--listwise-window", "3"])
    assert bad.exit_code == 2
    assert "is not an option of any stage of the chosen chain ['identity', 'mmr']" in bad.output
    # a flag of no installed reranker: click's unknown option
    unknown = CliRunner().invoke(cli, [*chain, "--x-y", "1"])
    assert unknown.exit_code == 2 and "No such option: --x-y" in unknown.output
    one = _cli("search", "dinner", "--db", db, "--json", "--trace", "--rerank", "none")
    assert json.loads(one.output)["trace"]["rerank"] is None
    spelt = _cli("search", "dinner", "--db", db, "--rerank", "identity", "--on-error", "fail_open")
    assert spelt.exit_code == 0
