"""``rankseam demo`` (what ``make demo`` runs): build a store from the demo corpus and search it.

The corpus (``rankseam/demo/memories.jsonl``) is 286 memories of an invented assistant's user,
Mara, with deliberate restatements and repetitive logs, and two short conversations (threads
with their turns in order, and a fact derived from a turn). The demo prints four parts:

1. :data:`QUESTIONS`, searched with the default policy (the coarse order, no reranker): each
   one's top hit is the memory that answers it (a test pins this, by id).
2. :data:`SHOWCASES`: each installed reranker on one question where its effect shows, the
   coarse top 5 beside the reranked one, what changed, and why in one line.
3. Conversations and filters: one conversation listed in order, a question asked of that
   thread only (the context stage bringing the turn that answers it as the neighbour of a
   stronger one), and a question under a metadata filter (docs/filters.md).
4. The semantic path: with rankseam-sentence-transformers installed, its local sentence model
   at work: the ``semantic`` reranker (where the plugin has it) on a question the coarse order
   gets wrong, and the ``similarity`` decision backend on one the word-overlap stand-in gets
   wrong; without the plugin, how to install it.

Then one search trace. Nothing here is tuned for the demo: the questions and memories are
chosen so that what is shown is what rankseam does on them.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import click

from rankseam.commands.common import open_store
from rankseam.commands.search import print_hits
from rankseam.errors import ConfigurationError

if TYPE_CHECKING:
    from rankseam.memory import Memory

__all__ = [
    "DEMO_NAMESPACE",
    "QUESTIONS",
    "SEMANTIC",
    "SEMANTIC_INSTALL",
    "SEMANTIC_RERANK",
    "SHOWCASES",
    "STAND_INS",
    "DemoQuestion",
    "Showcase",
    "demo",
    "demo_records",
    "what_changed",
]

DEMO_NAMESPACE = "demo"
SHOWN = 5  # hits compared per showcase


@attrs.frozen
class DemoQuestion:
    """A question and the ids of the memory that answers it (with its restatements)."""

    text: str
    answers: tuple[str, ...]


@attrs.frozen
class Showcase:
    """A reranker (with options) on a question where its effect shows, and why in one line."""

    label: str
    reranker: str
    options: Mapping[str, Any]
    question: str
    why: str


QUESTIONS: tuple[DemoQuestion, ...] = (
    DemoQuestion(
        "what is Mara allergic to?",
        ("allergy-peanut", "allergy-peanut-dup1", "allergy-peanut-dup2"),
    ),
    DemoQuestion("when is her half marathon?", ("marathon", "marathon-dup1", "marathon-dup2")),
    DemoQuestion(
        "what is her usual coffee order?",
        ("coffee-order", "coffee-order-dup1", "coffee-order-dup2"),
    ),
    DemoQuestion(
        "who looks after the cat while she travels?",
        ("cat-sitter", "cat-sitter-dup1", "cat-sitter-dup2"),
    ),
    DemoQuestion("when is her sister's birthday?", ("sister-birthday", "sister-birthday-dup1")),
    DemoQuestion("when is Mara's Portuguese lesson?", ("language", "language-dup1")),
    DemoQuestion("what gift should I buy Rui?", ("gift-ideas-rui",)),
)

SHOWCASES: tuple[Showcase, ...] = (
    Showcase(
        "mmr, lambda 0.5",
        "mmr",
        {"lambda": 0.5},
        "when is her sister's birthday?",
        "mmr trades a little relevance for variety: sister-birthday says what "
        "sister-birthday-dup1 already said, so it gives its place to another memory.",
    ),
    Showcase(
        "decision, heuristic backend, keep yes",
        "decision",
        {"backend": "heuristic", "keep": "yes"},
        "what gift should I buy Rui?",
        "decision asks one yes/no question per candidate and keeps only the YES answers: the "
        "near misses (gifts for Ines, the anniversary) go, the one sure hit stays.",
    ),
    Showcase(
        "listwise, local backend",
        "listwise",
        {"backend": "local"},
        "what is her usual coffee order?",
        "listwise orders the pool in one request: coffee-order, which names her usual coffee, "
        "rises above lactose, which only mentions coffee in passing.",
    ),
    Showcase(
        "learned, the model trained on LoCoMo conversations (rankseam-learned-locomo)",
        "learned",
        {},
        "what time is Mara's flight to Porto?",
        "the coarse order puts her request first (it shares the most words, and no time); the "
        "model, trained on other people's conversations, ranks the fact derived from the "
        "booking's confirmation above it, and that fact holds the answer: 19:45.",
    ),
)

STAND_INS = (
    "The heuristic decision backend and the local generation backend are stand-ins for a model:\n"
    "they count shared words and do not read meaning (deterministic and free, for demos and\n"
    "tests). For real judgements give decision or listwise a model backend (rankseam-openai),\n"
    "or the similarity backend of rankseam-sentence-transformers (part 3)."
)

#: The semantic path: the decision reranker with a local sentence model, beside the heuristic.
SEMANTIC = Showcase(
    "decision, similarity backend (all-MiniLM-L6-v2), keep yes",
    "decision",
    {"backend": "similarity", "keep": "yes"},
    "what is Mara allergic to?",
    "the model judges meaning: only the two allergies answer the question, while the heuristic "
    "stand-in says YES to all five because each one names Mara.",
)
#: The semantic path's reranker (rankseam-sentence-transformers, where it ships one), on a
#: question the coarse order gets wrong.
SEMANTIC_RERANK = Showcase(
    "semantic reranker (all-MiniLM-L6-v2 cosine fused with the coarse score)",
    "semantic",
    {"weight": 0.6},  # at the default 0.4 the int8 model leaves her sister first
    "where does Mara live?",
    "the coarse order puts her parents first (their memory shares 'Mara' and 'live'); the "
    "model reads that the question asks where she lives, and her own address rises to the top.",
)
SEMANTIC_INSTALL = (
    "semantic search is not installed: pip install 'rankseam-sentence-transformers[torch]' "
    "(from a checkout: -e 'plugins/rankseam-sentence-transformers[torch]'; its README installs "
    "CPU torch first)"
)


def demo_records() -> Iterator[dict[str, Any]]:
    """The demo corpus, one record (``id``, ``text``, ``importance``, ``metadata``) a line."""
    text = resources.files("rankseam").joinpath("demo/memories.jsonl").read_text("utf-8")
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)


def _ids(memory: Memory, question: str, reranker: str | None, options: Mapping[str, Any]) -> Any:
    result = memory.search(question, SHOWN, reranker=reranker, reranker_options=dict(options))
    return result, [hit.ref.memory_id for hit in result.hits]


def what_changed(coarse: Sequence[str], reranked: Sequence[str]) -> str:
    """The difference between two top lists, in words: what left, what came in, and which
    memories now stand above one that was above them."""
    out = [i for i in coarse if i not in reranked]
    new = [i for i in reranked if i not in coarse]
    kept = [i for i in reranked if i in coarse]
    passed = [
        f"{b} above {a}"
        for n, b in enumerate(kept)
        for a in kept[n + 1 :]
        if coarse.index(a) < coarse.index(b)
    ]
    parts = []
    if out:
        parts.append(f"left out {', '.join(out)}")
    if new:
        parts.append(f"brought in {', '.join(new)}")
    if passed:
        parts.append(f"now {', '.join(passed[:3])}")
    return "; ".join(parts) or "nothing (the same top list)"


def _showcase(memory: Memory, case: Showcase, *, also: Sequence[str] = ()) -> None:
    _, coarse = _ids(memory, case.question, None, {})
    result, reranked = _ids(memory, case.question, case.reranker, case.options)
    rerank = result.trace.rerank
    calls = rerank.usage.calls if rerank is not None else 0
    cost = f", {calls} backend call{'' if calls == 1 else 's'}" if rerank is not None else ""
    click.echo(f'=== {case.label}: "{case.question}"  [{result.status.value}{cost}]')
    click.echo(f"  coarse:    {', '.join(coarse)}")
    click.echo(f"  reranked:  {', '.join(reranked) or '(no hits)'}")
    click.echo(f"  changed:   {what_changed(coarse, reranked)}")
    for line in also:
        click.echo(f"  {line}")
    click.echo(f"  why:       {case.why}")


#: Part 3: a question asked of one conversation, and a filter (docs/filters.md).
THREAD_QUESTION = ("which flight did Mara pick?", "chat-2026-11-28")
FILTER_QUESTION = (
    "what should I remember about Mara?",
    {"topic": "health", "importance": {"$gte": 0.9}},
)


def _conversations(memory: Memory, limit: int) -> None:
    question, thread = THREAD_QUESTION
    click.echo("\n3. Conversations and filters\n")
    click.echo(f"the conversation {thread}, in order (list(thread=...)):")
    for stored in memory.list(thread=thread):
        click.echo(f"  {stored.position:g}. {stored.text}")
    click.echo(
        f'\n=== "{question}", in that thread only (thread={thread!r}); "via context" marks a '
        "turn the context stage brought in as the neighbour of a stronger one"
    )
    print_hits(memory.search(question, min(limit, 3), thread=thread), indent="  ")
    question, where = FILTER_QUESTION
    click.echo(f'\n=== "{question}", where={json.dumps(where)}')
    print_hits(memory.search(question, min(limit, 3), where=where), indent="  ")


def _semantic(memory: Memory) -> None:
    rerankers = memory.context.available("reranker")
    similarity = "similarity" in memory.context.available("decision_backend")
    if SEMANTIC_RERANK.reranker not in rerankers and not similarity:
        click.echo(SEMANTIC_INSTALL)
        return
    click.echo("(loading the sentence model: a few seconds, more the first time)")
    try:
        _semantic_showcases(memory, rerankers, similarity)
    except ConfigurationError as exc:  # e.g. the torch-free install: its rerankers need torch
        click.echo(f"(the semantic showcases could not run: {exc})")


def _semantic_showcases(memory: Memory, rerankers: Sequence[str], similarity: bool) -> None:
    if SEMANTIC_RERANK.reranker in rerankers:
        _showcase(memory, SEMANTIC_RERANK)
    if not similarity:
        return
    if SEMANTIC.reranker not in rerankers:
        click.echo("(the similarity backend is installed, the decision reranker is not)")
        return
    heuristic = {**SEMANTIC.options, "backend": "heuristic"}
    _, words = _ids(memory, SEMANTIC.question, SEMANTIC.reranker, heuristic)
    _showcase(memory, SEMANTIC, also=[f"stand-in:  {', '.join(words)} (heuristic backend)"])


@click.command()
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="Build the demo store here (default: a temporary directory).",
)
@click.option(
    "--limit",
    "-k",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Hits shown per question in part 1.",
)
@click.option(
    "--semantic/--no-semantic",
    default=True,
    show_default=True,
    help="Part 3, when rankseam-sentence-transformers is installed (it loads a model).",
)
def demo(db: str | None, limit: int, semantic: bool) -> None:
    """Build a store from the demo corpus and search it: questions with the default policy,
    each installed reranker where its effect shows, and the semantic path."""
    with tempfile.TemporaryDirectory(prefix="rankseam-demo-") as tmp:
        path = db or str(Path(tmp) / "demo.sqlite3")
        with open_store(path, None, namespace=DEMO_NAMESPACE, reranker=None) as memory:
            report = memory.ingest(demo_records())
            click.echo(
                f"demo store: {memory.path}\n{report.records} memories ingested "
                f"({report.added} new) in {report.seconds:.2f} s\n"
            )
            click.echo(
                "1. Questions, with the default policy (the coarse order: words, character "
                "n-grams and importance; no reranker)\n"
            )
            for question in QUESTIONS:
                click.echo(f"=== {question.text}")
                print_hits(memory.search(question.text, limit), indent="  ")
            have = memory.context.available("reranker")
            click.echo("\n2. Rerankers, each on a question where its effect shows (top 5)\n")
            shown = [case for case in SHOWCASES if case.reranker in have]
            for case in shown:
                try:
                    _showcase(memory, case)
                except ConfigurationError as exc:  # e.g. rankseam-learned without a model
                    click.echo(f"=== {case.label}: could not run: {exc}")
            missing = [case.reranker for case in SHOWCASES if case.reranker not in have]
            if missing:
                click.echo(
                    f"(not installed: {', '.join(missing)}; `make demo` installs them, or "
                    "pip install rankseam-<name>)"
                )
            if shown:
                click.echo(f"\n{STAND_INS}")
            _conversations(memory, limit)
            click.echo("\n4. Semantic search (a local sentence model)\n")
            if semantic:
                _semantic(memory)
            else:
                click.echo("(skipped: --no-semantic)")
            traced = (
                shown[0] if shown else Showcase("identity", "identity", {}, QUESTIONS[0].text, "")
            )
            result = memory.search(
                traced.question,
                SHOWN,
                reranker=traced.reranker,
                reranker_options=dict(traced.options),
                pool=10,
            )
            click.echo(f'\ntrace of "{traced.question}" with reranker {traced.reranker}:')
            click.echo(json.dumps(result.trace.to_dict(), indent=2, ensure_ascii=False))
