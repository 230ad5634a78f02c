"""`rankseam demo` (what `make demo` runs): each question's top hit under the default policy is
the memory that answers it, each reranker's showcase shows the effect its line claims, and the
demo runs without the optional plugins (saying how to install the semantic path)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import rankseam
from rankseam.cli import cli
from rankseam.commands.demo import (
    DEMO_NAMESPACE,
    QUESTIONS,
    SEMANTIC,
    SEMANTIC_INSTALL,
    SEMANTIC_RERANK,
    SHOWCASES,
    STAND_INS,
    DemoQuestion,
    demo_records,
    what_changed,
)
from rankseam.plugins import reset_plugins

#: What would change the default policy, whatever the environment running the tests sets.
DEFAULTS = ("RANKSEAM_RERANK", "RANKSEAM_EMBEDDER", "RANKSEAM_CONFIG", "RANKSEAM_DB")


@pytest.fixture(autouse=True)
def default_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in DEFAULTS:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rankseam.Memory]:
    db = tmp_path_factory.mktemp("demo") / "demo.sqlite3"
    with pytest.MonkeyPatch.context() as env:
        for var in DEFAULTS:
            env.delenv(var, raising=False)
        memory = rankseam.open_memory(db, namespace=DEMO_NAMESPACE)
    with memory:
        memory.ingest(demo_records())
        yield memory


def top_ids(memory: rankseam.Memory, query: str, **kwargs: Any) -> list[str]:
    return [hit.ref.memory_id for hit in memory.search(query, 5, **kwargs).hits]


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.text)
def test_each_question_finds_its_answer_first_under_the_default_policy(
    store: rankseam.Memory, question: DemoQuestion
) -> None:
    assert store.config.search.reranker is None  # the default policy: the coarse order
    ids = top_ids(store, question.text)
    assert ids[0] in question.answers, (question, ids)


def test_the_questions_answers_are_in_the_corpus() -> None:
    corpus = {record["id"] for record in demo_records()}
    assert len(corpus) == 286
    for question in QUESTIONS:
        assert set(question.answers) <= corpus, question


def available(store: rankseam.Memory, reranker: str, dist: str = "") -> None:
    if reranker not in store.context.available("reranker"):
        dist = dist or f"rankseam-{reranker}"
        pytest.skip(f"the {reranker} reranker is not installed (pip install {dist})")


def test_each_showcase_shows_the_effect_its_line_claims(store: rankseam.Memory) -> None:
    cases = {case.reranker: case for case in SHOWCASES}
    assert set(cases) == {"mmr", "decision", "listwise", "learned"}
    # the learned reranker's showcase needs its model's distribution: its tests check it
    # (plugins/rankseam-learned-locomo/tests/test_demo_showcase.py)
    del cases["learned"]
    for name, case in cases.items():
        available(store, name)
        coarse = top_ids(store, case.question)
        reranked = top_ids(
            store, case.question, reranker=case.reranker, reranker_options=dict(case.options)
        )
        assert reranked != coarse, name
        assert reranked[0] == coarse[0], name  # the answer stays first
        if name == "mmr":  # "sister-birthday says what sister-birthday-dup1 already said"
            assert coarse[:2] == ["sister-birthday-dup1", "sister-birthday"]
            assert "sister-birthday" not in reranked
        elif name == "decision":  # "the near misses go, the one sure hit stays"
            assert len(coarse) == 5 and reranked == ["gift-ideas-rui"]
            assert {"gift-ideas-ines", "anniversary"} <= set(coarse)
        else:  # "coffee-order rises above lactose"
            assert coarse.index("lactose") < coarse.index("coffee-order")
            assert reranked.index("coffee-order") < reranked.index("lactose")


def test_the_semantic_showcase(store: rankseam.Memory) -> None:
    if "similarity" not in store.context.available("decision_backend"):
        pytest.skip("rankseam-sentence-transformers is not installed")
    available(store, "decision")
    heuristic = {**SEMANTIC.options, "backend": "heuristic"}
    words = top_ids(store, SEMANTIC.question, reranker="decision", reranker_options=heuristic)
    meaning = top_ids(
        store, SEMANTIC.question, reranker="decision", reranker_options=dict(SEMANTIC.options)
    )
    # "the heuristic stand-in says YES to all five because each one names Mara"
    assert words == top_ids(store, SEMANTIC.question)
    assert all("Mara" in store.get(i, namespace=DEMO_NAMESPACE).text for i in words)
    # "only the two allergies answer the question"
    assert meaning == ["allergy-peanut", "allergy-cats"]


def test_the_semantic_reranker_showcase(store: rankseam.Memory) -> None:
    available(store, SEMANTIC_RERANK.reranker, "rankseam-sentence-transformers")
    coarse = top_ids(store, SEMANTIC_RERANK.question)
    reranked = top_ids(
        store,
        SEMANTIC_RERANK.question,
        reranker=SEMANTIC_RERANK.reranker,
        reranker_options=dict(SEMANTIC_RERANK.options),
    )
    # "the coarse order puts her parents first ...; her own address rises to the top"
    assert coarse[0] == "parents" and "city" in coarse
    assert reranked[0] == "city"


def test_what_changed_says_what_moved() -> None:
    assert what_changed(["a", "b", "c"], ["a", "c", "d"]) == ("left out b; brought in d")
    assert what_changed(["a", "b", "c"], ["b", "a", "c"]) == "now b above a"
    assert what_changed(["a", "b"], ["a", "b"]) == "nothing (the same top list)"


def top_hits_printed(output: str) -> dict[str, str]:
    """question -> the id of the first hit printed under it in part 1."""
    found = re.findall(r"^=== (.+)\n\s+1\. demo/(\S+) ", output, flags=re.MULTILINE)
    return dict(found)


def test_the_demo_prints_each_answer_first(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["demo", "--db", str(tmp_path / "d.sqlite3"), "--no-semantic"])
    assert out.exit_code == 0, out.output
    printed = top_hits_printed(out.output)
    for question in QUESTIONS:
        assert printed[question.text] in question.answers, (question, printed)
    assert '"policy_id"' in out.output  # one trace


def test_the_demo_shows_a_conversation_a_thread_scoped_question_and_a_filter(
    tmp_path: Path,
) -> None:
    out = CliRunner().invoke(cli, ["demo", "--db", str(tmp_path / "d.sqlite3"), "--no-semantic"])
    assert out.exit_code == 0, out.output
    part = out.output.split("3. Conversations and filters", 1)[1].split("4. Semantic", 1)[0]
    thread_part, filter_part = part.split("=== ", 1)[1].split("=== ", 1)
    hits = re.findall(r"^\s+\d+\. demo/(\S+) .* via (\S+)", thread_part, flags=re.MULTILINE)
    assert hits and all(mid.startswith("chat-porto-") for mid, _via in hits)  # that thread only
    # the turn that answers it ("the evening one") has no word of the question: the context
    # stage brings it in as the neighbour of a stronger turn
    assert ("chat-porto-3" in dict(hits)) and "context" in dict(hits)["chat-porto-3"]
    filtered = re.findall(r"^\s+\d+\. demo/(\S+) ", filter_part, flags=re.MULTILINE)
    health = {r["id"] for r in demo_records() if r.get("metadata", {}).get("topic") == "health"}
    important = {r["id"] for r in demo_records() if r.get("importance", 0.5) >= 0.9}
    assert filtered and set(filtered) <= health & important


@pytest.fixture
def no_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("RANKSEAM_LOAD_PLUGINS", "")  # only what core ships
    reset_plugins()
    yield
    reset_plugins()


def test_the_demo_runs_without_the_optional_plugins(tmp_path: Path, no_plugins: None) -> None:
    out = CliRunner().invoke(cli, ["demo", "--db", str(tmp_path / "d.sqlite3")])
    assert out.exit_code == 0, out.output
    printed = top_hits_printed(out.output)
    for question in QUESTIONS:
        assert printed[question.text] in question.answers, (question, printed)
    assert "(not installed: mmr, decision, listwise, learned;" in out.output
    assert STAND_INS not in out.output  # no stand-in was shown
    assert SEMANTIC_INSTALL in out.output  # how to install the semantic path, in one line
    assert "with reranker identity" in out.output
