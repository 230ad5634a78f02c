"""A reranker that needs a backend and was given none says how to name one, in the words of
the place it was asked from: ``rankseam search --rerank decision`` names
``--decision-backend heuristic``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from rankseam import ConfigurationError, open_memory
from rankseam.cli import cli
from rankseam.decision import Role
from rankseam.plugin import RerankerRegister, hookimpl, option
from rankseam.testing import installed_plugin

pytest.importorskip("rankseam_decision", reason="the decision reranker (rankseam-decision)")


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "m.db"
    with open_memory(path) as memory:
        memory.add("she takes her coffee black")
    return str(path)


def test_search_rerank_decision_without_a_backend_names_the_switch(db: str) -> None:
    result = CliRunner().invoke(cli, ["search", "coffee", "--db", db, "--rerank", "decision"])
    assert result.exit_code == 1
    # the installed backends depend on the environment (similarity comes with
    # rankseam-sentence-transformers, openai with rankseam-openai): sorted, heuristic always
    listed = re.search(r"installed ones \(([^)]*)\)", result.output)
    assert listed is not None, result.output
    names = listed.group(1).split(", ")
    assert "heuristic" in names and names == sorted(names)
    assert result.output == (
        "Error: reranker 'decision' needs a decision backend for the rerank role: set its "
        f"'backend' option to one of the installed ones ({listed.group(1)}), e.g. "
        "`rankseam search --rerank decision --decision-backend heuristic`; "
        "[rerankers.decision] backend = 'heuristic' in rankseam.toml; "
        "search(..., reranker='decision', reranker_options={'backend': 'heuristic'}) in Python\n"
    )
    assert "write gate" not in result.output


def test_the_switch_it_names_works(db: str) -> None:
    args = ["search", "coffee", "--db", db, "--json", "--rerank", "decision"]
    result = CliRunner().invoke(cli, [*args, "--decision-backend", "heuristic"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["hits"][0]["text"] == "she takes her coffee black"


def test_the_python_form_it_names_works_and_fails_the_same_way_without_it(db: str) -> None:
    with open_memory(db, create=False) as memory:
        with pytest.raises(ConfigurationError, match="--decision-backend heuristic"):
            memory.search("coffee", reranker="decision")
        hits = memory.search(
            "coffee", reranker="decision", reranker_options={"backend": "heuristic"}
        ).hits
    assert [h.text for h in hits] == ["she takes her coffee black"]


@attrs.frozen
class AskerOptions:
    backend: str | None = option(None, help="the decision backend")


class _AsksForABackend:
    """A reranker plugin whose factory asks for a decision backend it was not given."""

    @hookimpl
    def register_rerankers(self, register: RerankerRegister) -> None:
        register("asker", self.build, options=AskerOptions)

    @staticmethod
    def build(options: AskerOptions, context: object) -> object:
        return context.decision_backend(options.backend, Role("advice"))  # type: ignore[attr-defined]


def test_any_reranker_that_asks_is_named_with_its_own_table(db: str) -> None:
    with installed_plugin(_AsksForABackend(), name="asker-plugin"), open_memory(db) as memory:
        with pytest.raises(ConfigurationError) as info:
            memory.search("coffee", reranker="asker")
    message = str(info.value)
    assert message.startswith("reranker 'asker' needs a decision backend for the advice role")
    assert "`rankseam search --rerank asker --asker-backend heuristic`" in message
    assert "[rerankers.asker] backend = 'heuristic' in rankseam.toml" in message
