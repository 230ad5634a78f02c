"""The plugin's ingest benchmark (``bench/ingest.py``) runs end to end against a real server and
reports what docs/benchmarks.md quotes from it: a small run, its figures checked for sense."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import rankseam
from rankseam_postgres.testing import TemporaryServer

BENCH = Path(__file__).resolve().parents[1] / "bench" / "ingest.py"


def test_the_ingest_bench_reports_the_ingest_and_the_parts_of_a_batch(
    pg_server: TemporaryServer, tmp_path: Path
) -> None:
    base = pg_server.url().split("&schema=")[0]
    out = tmp_path / "report"
    args = ["--url", base, "--size", "600", "--batch-size", "200", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    ingest = report["ingest"]
    assert ingest["records"] == 600 and ingest["batch_size"] == 200
    assert ingest["records_per_s"] > 0 and ingest["client_cpu_us_per_memory"] > 0
    # the server runs on this machine: its processes' CPU time is read and counted
    assert ingest["server_cpu_us_per_memory"] > 0
    assert 0 < ingest["cores_busy_share"] <= 1
    assert ingest["index"] is None  # 600 memories: below the HNSW threshold, nothing built
    explain = report["explain"]
    assert explain["memories"] == 200 and explain["postings"] > 200
    parts = explain["parts_ms"]
    whole = parts["the whole statement"]
    named = [
        parts["revision rows, with their text analysis"],
        parts["postings (the tsvectors' lexemes, one row and index entry each)"],
        parts["terms' document frequencies"],
    ]
    assert all(ms > 0 for ms in named) and abs(sum(named) - whole) < 0.5
    assert parts["of which the arrays' rows and the text analysis"] < named[0]
    assert "| memories/s |" in (out / "report.md").read_text()
    # the batch was rolled back: the store holds the ingested memories only
    schema = report["schema"]
    with rankseam.open_memory(f"{base}&schema={schema}", create=False) as memory:
        assert memory.stats()["memories"] == 600
