"""Every script in examples/ runs as it is and prints what it claims."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

EXPECTED = {
    "memory_basics.py": [
        "second add: unchanged",
        "updated: MemoryRef(namespace='default', memory_id='offsite', revision=2)",
        "revision 1 said: The team offsite is in Lisbon in May",
        "search: offsite revision 2",
        "after delete: ['offsite']",
    ],
    "rerank_texts.py": ['"policy_id": "rankseam.rerank.mmr.v1", "status": "ok"'],
    "langchain_pipeline.py": ["standup 1 ok"],
    "llamaindex_query_engine.py": ["standup 1 example coarse rank 3"],
    "mcp_client.py": [
        "tools: ['memory_add', 'memory_delete', 'memory_get', 'memory_history', 'memory_list', "
        "'memory_search', 'memory_stats', 'memory_update']",
        "hit: seat | rerank: ok",
        "bad input is a tool error: True",
    ],
}
NEEDS = {
    "langchain_pipeline.py": "langchain_classic",
    "llamaindex_query_engine.py": "llama_index",
    "mcp_client.py": "mcp",
}


def test_every_example_is_covered() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name: str, tmp_path: Path) -> None:
    module = NEEDS.get(name)
    if module and importlib.util.find_spec(module) is None:
        pytest.skip(f"{name} needs {module}; install it to run this example")
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    for line in EXPECTED[name]:
        assert line in proc.stdout, f"{name}: {line!r} not in\n{proc.stdout}"
    if name in ("langchain_pipeline.py", "llamaindex_query_engine.py"):
        # pure diversity keeps one of the two dinner notes
        dinners = [ln for ln in proc.stdout.splitlines() if ln.startswith("dinner")]
        assert len(dinners) == 1, proc.stdout
