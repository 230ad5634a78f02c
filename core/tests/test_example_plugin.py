"""The two-file example of docs/writing-plugins.md, installed into a fresh virtual environment,
is found through its entry point and reranks through the seam."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "writing-plugins.md"


def _block(text: str, filename: str, lang: str) -> str:
    marker = r"(?:<!-- docs-test: [^\n]* -->\n)?"  # docs/testing.md, "Code blocks in the docs"
    pattern = rf"`{re.escape(filename)}`:\n\n{marker}```{lang}\n(.*?)\n```"
    match = re.search(pattern, text, flags=re.S)
    assert match, f"docs/writing-plugins.md has no {lang} block for {filename}"
    return match.group(1) + "\n"


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(found).exists():
        pytest.fail("this test needs `uv` (installed by the nox session: pip install uv)")
    return found


def test_example_plugin_installs_and_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    plugin = tmp_path / "rankseam-importance"
    plugin.mkdir()
    (plugin / "pyproject.toml").write_text(_block(text, "pyproject.toml", "toml"))
    (plugin / "rankseam_importance.py").write_text(_block(text, "rankseam_importance.py", "python"))

    venv = tmp_path / "venv"
    uv = _uv()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANKSEAM_", "VIRTUAL_ENV"))}
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            str(python),
            "-e",
            str(ROOT / "core"),
            str(plugin),
        ],
        check=True,
        env=env,
    )

    listed = subprocess.run(
        [str(venv / "bin" / "rankseam"), "plugins"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    plugins = {p["name"]: p for p in json.loads(listed.stdout)}
    assert plugins["importance"]["status"] == "ok"
    assert plugins["importance"]["components"] == {"reranker": ["importance"]}
    assert plugins["importance"]["version"] == "0.1.0"

    script = """
import asyncio
from rankseam.compose import ComponentContext, Config
from rankseam.errors import ConfigurationError
from rankseam.seam import rerank_pool
from rankseam.types import Hit, MemoryRef

pool = [Hit(MemoryRef("ns", f"m{i}", 1), f"text {i}", 1.0 - i / 10, importance=imp)
        for i, imp in enumerate([0.2, 0.9, 0.5, 0.9])]
ctx = ComponentContext(Config())
reranker = ctx.reranker("importance", {"min_importance": 0.4})
hits, trace = asyncio.run(rerank_pool("q", pool, 3, reranker))
print([h.ref.memory_id for h in hits], trace.status.value, trace.policy_id)
try:
    ctx.reranker("importance", {"min_importance": 7})
except ConfigurationError as exc:
    print("refused:", exc)
"""
    run = subprocess.run(
        [str(python), "-c", script], check=True, capture_output=True, text=True, env=env
    )
    first, second = run.stdout.strip().splitlines()
    assert first == "['m1', 'm3', 'm2'] ok rankseam-importance.rerank.importance.v1"
    assert second.startswith(
        "refused: [rerankers.importance] min_importance must be a number in [0, 1], got 7"
    )

    no_plugins = subprocess.run(
        [str(venv / "bin" / "rankseam"), "plugins"],
        check=True,
        capture_output=True,
        text=True,
        env={**env, "RANKSEAM_LOAD_PLUGINS": ""},
    )
    assert json.loads(no_plugins.stdout) == []
