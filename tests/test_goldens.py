"""Golden files for what users and tools parse: the command's JSON (search, search with a
reranker and its trace, a filtered search and listing, get, list, errors and their exit
statuses) and the MCP tools' answers
through the official client. A change to any of them shows here as a diff.

Update the goldens after an intended change with one command, which rewrites the files and
prints what changed::

    make goldens        # or: RANKSEAM_UPDATE_GOLDENS=1 pytest tests/test_goldens.py

Volatile values are normalised before comparing: latencies, temporary paths, the version, and
floats rounded to 6 digits (the last bits of a float differ between BLAS builds).
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rankseam

GOLDENS = Path(__file__).parent / "goldens"
UPDATE = os.environ.get("RANKSEAM_UPDATE_GOLDENS") == "1"
RANKSEAM = str(Path(sys.executable).parent / "rankseam")

#: The store every golden is made over: fixed ids, times and metadata.
RECORDS = [
    {
        "id": "walrus-ice",
        "text": "the walrus sleeps on the ice floe",
        "metadata": {"topic": "animals"},
        "created_at": 1700000000,
        "thread": "zoo-visit",
        "position": 1,
    },
    {
        "id": "walrus-swim",
        "text": "a walrus swims in cold water",
        "importance": 0.8,
        "created_at": 1700000100,
        "thread": "zoo-visit",
        "position": 2,
    },
    {
        "id": "walrus-fact",
        "text": "walruses sleep on ice",
        "created_at": 1700000200,
        "derived_from": "walrus-ice",
    },
    {"id": "tea", "text": "green tea in the afternoon", "created_at": 1700000300},
]

_VOLATILE_KEYS = {"latency_ms", "took_s", "seconds"}


def _normalise(value: Any, tmp: str) -> Any:
    if isinstance(value, dict):
        return {
            k: (0 if k in _VOLATILE_KEYS else _normalise(v, tmp)) for k, v in sorted(value.items())
        }
    if isinstance(value, list):
        return [_normalise(v, tmp) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, str):
        value = value.replace(tmp, "<TMP>").replace(rankseam.__version__, "<VERSION>")
        return re.sub(r"\d+(\.\d+)? ?ms\b", "<N> ms", value)
    return value


def check_golden(name: str, value: Any, tmp: Path) -> None:
    """Compare ``value`` (normalised) with ``goldens/NAME.json``; rewrite it when updating."""
    text = json.dumps(_normalise(value, str(tmp)), indent=2, sort_keys=True, ensure_ascii=False)
    path = GOLDENS / f"{name}.json"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if UPDATE:
        if old != text + "\n":
            GOLDENS.mkdir(exist_ok=True)
            path.write_text(text + "\n", encoding="utf-8")
            diff = difflib.unified_diff(
                old.splitlines(), text.splitlines(), f"a/{name}.json", f"b/{name}.json", lineterm=""
            )
            print("\n".join(diff))
        return
    if not old:
        pytest.fail(f"no golden {path.name}: run `make goldens` and review the new file")
    if old != text + "\n":
        diff = "\n".join(
            difflib.unified_diff(
                old.splitlines(), text.splitlines(), "golden", "now", lineterm="", n=2
            )
        )
        pytest.fail(
            f"{name} differs from tests/goldens/{name}.json (an intended change: run "
            f"`make goldens` and commit the new file):\n{diff}"
        )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    tmp = tmp_path_factory.mktemp("goldens")
    source = tmp / "memories.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    db = tmp / "store.sqlite3"
    run(["ingest", "--db", str(db), str(source)], tmp, check=True)
    yield tmp, db


def run(args: list[str], tmp: Path, *, check: bool = False) -> dict[str, Any]:
    env = {
        **os.environ,
        "RANKSEAM_CONFIG": "",
        "RANKSEAM_LOAD_PLUGINS": "mmr",
        "COLUMNS": "100",
    }
    env.pop("RANKSEAM_DB", None)
    proc = subprocess.run(
        [RANKSEAM, *args], capture_output=True, text=True, cwd=tmp, env=env, timeout=120
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = {"exit_status": proc.returncode}
    for stream, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        try:
            out[stream] = json.loads(text) if text.strip() else None
        except json.JSONDecodeError:
            out[stream] = text.strip()
    return out


CLI_CASES = {
    "cli-search": ["search", "walrus sleeping", "-k", "3", "--json"],
    "cli-search-mmr-trace": [
        "search",
        "walrus sleeping",
        "-k",
        "2",
        "--rerank",
        "mmr",
        "--trace",
        "--json",
    ],
    "cli-get": ["get", "walrus-ice", "--json"],
    "cli-list": ["list", "--json"],
    "cli-search-filtered": [
        "search",
        "walrus",
        "-k",
        "3",
        "--where",
        '{"topic": "animals"}',
        "--min-score",
        "0.1",
        "--trace",
        "--json",
    ],
    "cli-list-filtered": ["list", "--thread", "zoo-visit", "--since", "1700000050", "--json"],
    "cli-error-bad-filter": ["search", "walrus", "--where", '{"topic": {"$like": "a%"}}', "--json"],
    "cli-error-not-found": ["get", "no-such-id", "--json"],
    "cli-error-empty-query": ["search", "", "--json"],
    "cli-error-unknown-reranker": ["search", "walrus", "--rerank", "nope", "--json"],
}


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_cli_json(name: str, store: tuple[Path, Path]) -> None:
    tmp, db = store
    check_golden(name, run([*CLI_CASES[name], "--db", str(db)], tmp), tmp)


def test_cli_error_for_a_missing_store(store: tuple[Path, Path]) -> None:
    tmp, _db = store
    answer = run(["search", "walrus", "--json", "--db", str(tmp / "absent.sqlite3")], tmp)
    check_golden("cli-error-missing-store", answer, tmp)


def test_cli_usage_error(store: tuple[Path, Path]) -> None:
    tmp, db = store
    answer = run(["search", "walrus", "--limt", "3", "--db", str(db)], tmp)
    check_golden("cli-error-usage", {"exit_status": answer["exit_status"]}, tmp)
    assert answer["exit_status"] == 2


def test_mcp_answers(store: tuple[Path, Path]) -> None:
    pytest.importorskip("rankseam_mcp")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    tmp, db = store
    params = StdioServerParameters(
        command=RANKSEAM,
        args=["mcp", "--db", str(db)],
        env={**os.environ, "RANKSEAM_CONFIG": ""},
    )
    calls = {
        "mcp-search": ("memory_search", {"query": "walrus sleeping", "limit": 2}),
        "mcp-search-verbose": (
            "memory_search",
            {"query": "walrus sleeping", "limit": 2, "verbose": True},
        ),
        "mcp-get": ("memory_get", {"memory_id": "walrus-fact"}),
        "mcp-list": ("memory_list", {"limit": 3}),
        "mcp-search-filtered": (
            "memory_search",
            {"query": "walrus", "limit": 3, "where": {"thread": "zoo-visit"}, "min_score": 0.1},
        ),
        "mcp-list-filtered": ("memory_list", {"where": {"derived_from": {"$exists": True}}}),
        "mcp-error-bad-filter": (
            "memory_search",
            {"query": "walrus", "where": {"topic": {"$like": "a%"}}},
        ),
        "mcp-error-bad-argument": ("memory_search", {"query": "walrus", "limit": "5"}),
        "mcp-error-not-found": ("memory_get", {"memory_id": "no-such-id"}),
    }

    async def main() -> dict[str, Any]:
        answers: dict[str, Any] = {}
        async with Client(params, read_timeout_seconds=60) as client:
            for name, (tool, arguments) in calls.items():
                result = await client.call_tool(tool, arguments)
                text = result.content[0].text
                try:
                    body: Any = json.loads(text)
                except json.JSONDecodeError:
                    body = text
                answers[name] = {"is_error": result.is_error, "content": body}
        return answers

    answers = asyncio.run(main())
    for name, answer in answers.items():
        check_golden(name, answer, tmp)
