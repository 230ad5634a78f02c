"""``rankseam demo`` (what ``make demo`` runs, with this distribution installed) shows the
learned reranker with this model on a question where it changes the answer, as its line says."""

from __future__ import annotations

import re

from rankseam.testing import invoke_cli


def _showcase(output: str, reranker: str) -> dict[str, list[str]]:
    """The coarse and reranked top lists printed under the showcase of ``reranker``."""
    block = re.search(
        rf"^=== {reranker}, .*?\n  coarse: +(.*)\n  reranked: +(.*)\n  changed: +(.*)\n  why: +(.*)",
        output,
        flags=re.MULTILINE,
    )
    assert block is not None, output
    coarse, reranked, changed, why = block.groups()
    return {
        "coarse": coarse.split(", "),
        "reranked": reranked.split(", "),
        "changed": [changed],
        "why": [why],
    }


def test_the_demo_shows_the_learned_reranker_changing_the_answer() -> None:
    result = invoke_cli(["demo", "--no-semantic"])
    assert result.exit_code == 0, result.output
    shown = _showcase(result.stdout, "learned")
    # "the coarse order puts her request first (it shares the most words, and no time)"
    assert shown["coarse"][0] == "chat-porto-1"
    # "ranks the fact derived from the booking's confirmation above it ... 19:45"
    assert shown["reranked"][0] == "fact-porto-flight"
    assert shown["reranked"].index("fact-porto-flight") < shown["reranked"].index("chat-porto-1")
    assert "19:45" in shown["why"][0]
    assert "could not run" not in result.stdout
