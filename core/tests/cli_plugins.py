"""Plugin sources the command-line tests install as real distributions (the ``install``
fixture of conftest.py): a reranker with one typed option, and a store to search with it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from rankseam.cli import cli

#: A reranker ``keeper`` whose option ``keep`` is declared with a type, bounds and help: it
#: keeps the first ``keep`` candidates, reversed.
KEEPER = """
import attrs
import rankseam
from rankseam.plugin import option
from rankseam.types import RerankDecision


@attrs.frozen
class KeepOptions:
    keep: int = option(3, ge=1, le=50, help="how many coarse candidates to keep")


class Keeper:
    policy_id = "test.keeper.v1"

    def __init__(self, keep):
        self.keep = keep

    async def rerank(self, query, candidates, limit, /):
        ranks = [c.rank for c in candidates][: self.keep]
        return RerankDecision(tuple(reversed(ranks))[:limit])


@rankseam.hookimpl
def register_rerankers(register):
    register(
        "keeper",
        lambda options, context: Keeper(options.keep),
        summary="keeps the first `keep` candidates, reversed",
        options=KeepOptions,
    )
"""


def invoke(*args: str) -> Result:
    """The ``rankseam`` group, in-process through click's runner."""
    return CliRunner().invoke(cli, list(args), prog_name="rankseam")


def ids(result: Result) -> list[str]:
    """The memory ids of a ``search --json`` answer, in order (the command must have passed)."""
    assert result.exit_code == 0, result.output
    return [hit["memory_id"] for hit in json.loads(result.output)["hits"]]


def keeper_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, install: Callable[..., None], texts: list[str]
) -> Path:
    """A store of ``texts`` (ids ``c0``, ``c1``, ...) written by ``rankseam add`` in
    ``tmp_path`` (the working folder, with no configuration file and no RANKSEAM_* variable
    that changes a store), with :data:`KEEPER` installed."""
    for var in ("RANKSEAM_CONFIG", "RANKSEAM_DB", "RANKSEAM_RERANK", "RANKSEAM_EMBEDDER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-user-config"))
    monkeypatch.chdir(tmp_path)
    install("keeper", KEEPER)
    path = tmp_path / "m.sqlite3"
    for i, text in enumerate(texts):
        added = invoke("add", "--db", str(path), "--id", f"c{i}", text)
        assert added.exit_code == 0, added.output
    return path
