"""`rankseam ... --db postgresql://...` from the command line (a real process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def rankseam_cmd(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).with_name("rankseam")), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def test_ingest_search_stats_and_plugins_from_the_cli(pg_url: str) -> None:
    lines = "\n".join(
        json.dumps({"id": f"n{i}", "text": text})
        for i, text in enumerate(
            ["the ferry leaves at nine", "bring the blue umbrella", "the ferry is late again"]
        )
    )
    done = rankseam_cmd("ingest", "-", "--db", pg_url, "--json", stdin=lines)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == 3
    found = rankseam_cmd("search", "when does the ferry leave?", "--db", pg_url, "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert [h["memory_id"] for h in hits][:2] == ["n0", "n2"]
    assert all(h["revision"] == 1 for h in hits)
    stats = rankseam_cmd("stats", "--db", pg_url)
    assert stats.returncode == 0, stats.stderr
    assert '"memories": 3' in stats.stdout
    listed = rankseam_cmd("plugins")
    assert listed.returncode == 0 and "postgres" in listed.stdout


@pytest.mark.parametrize("url", ["postgresql://nobody@/db?host=/nonexistent&connect_timeout=1"])
def test_cli_errors_are_one_line(url: str) -> None:
    failed = rankseam_cmd("search", "anything", "--db", url)
    assert failed.returncode == 1
    assert "Traceback" not in failed.stderr
    assert "postgresql://nobody@" in failed.stderr


def test_read_only_commands_do_not_create_a_store(pg_url: str) -> None:
    failed = rankseam_cmd("search", "anything", "--db", pg_url)
    assert failed.returncode == 1
    assert "no rankseam store at" in failed.stderr and "Traceback" not in failed.stderr
    assert rankseam_cmd("stats", "--db", pg_url).returncode == 1
