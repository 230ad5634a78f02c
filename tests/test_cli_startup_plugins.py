"""With every first-party plugin installed, loading them imports no asyncio, so neither does a
`rankseam search`, coarse or reranked by a reranker that never suspends (mmr); the reranker
that awaits (decision) imports it when it runs. Checked by what a fresh process imported,
never by how long it took."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rankseam

pytest.importorskip("rankseam_mmr", reason="needs rankseam-mmr")
pytest.importorskip("rankseam_decision", reason="needs rankseam-decision")

RUN = """
import contextlib, io, json, sys
sys.argv = ["rankseam", *json.loads(sys.argv[1])]
from rankseam.cli import main
from rankseam.plugins import get_plugins
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as exc:
        assert exc.code == 0, exc.code
loaded = sorted(p.name for p in get_plugins() if p.status == "ok")
print(json.dumps([loaded, "asyncio" in sys.modules]))
"""


def _imports_asyncio(*args: str, cwd: Path) -> tuple[list[str], bool]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")}
    env["RANKSEAM_CACHE_DIR"] = str(cwd / "cache")
    out = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(list(args))],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded, imported = json.loads(out.stdout.splitlines()[-1])
    return loaded, imported


def test_searches_load_every_plugin_and_import_asyncio_only_to_await(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with rankseam.open_memory(db) as memory:
        memory.add("the ferry to the island leaves at nine")
        memory.add("the bus to the harbour leaves at ten")
    search = ("search", "ferry", "--db", str(db))
    loaded, imported = _imports_asyncio(*search, cwd=tmp_path)
    assert {"decision", "listwise", "mmr"} <= set(loaded)
    assert not imported
    assert _imports_asyncio(*search, "--rerank", "mmr", cwd=tmp_path)[1] is False
    awaited = (*search, "--rerank", "decision", "--decision-backend", "heuristic")
    assert _imports_asyncio(*awaited, cwd=tmp_path)[1] is True
