"""A real cross-encoder (tiny, random weights) through the real rerankers library, the seam,
``Memory`` and the CLI: the model's scores on the hits and in the trace, identities by position
(never by text), one load per configuration, and nothing fetched from the network."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

import rankseam
from rankseam.testing import invoke_cli, run_reranker
from rankseam.types import Hit, MemoryRef, RerankStatus
from rankseam_rerankers import make_reranker

QUERY = "when is the conference in lisbon"
TEXTS = [
    "alice booked a flight to lisbon for the conference in may",
    "bob adopted a grey cat named pixel",
    "the team moved standup to nine thirty",
    "carol runs a marathon every october",
    "dinner with dana is on friday at the thai place",
    "the garden needs watering twice a week",
    "the spare key is under the blue flowerpot",
]


def reference_logits(model_dir: Path, query: str, texts: list[str]) -> list[float]:
    """The model's relevance logit for each (query, text), computed with transformers alone."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    out = []
    with torch.inference_mode():
        for text in texts:
            batch = tokenizer([(query, text)], return_tensors="pt", truncation=True)
            out.append(float(model(**batch).logits.squeeze()))
    return out


def options(model_dir: Path, **more: Any) -> dict[str, Any]:
    return {"model": str(model_dir), "model_type": "cross-encoder", **more}


def test_scores_on_the_hits_and_in_the_trace_through_memory(
    tiny_model: Path, tmp_path: Path
) -> None:
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        for text in TEXTS:
            memory.add(text)
        result = memory.search(
            QUERY, limit=4, reranker="rerankers", reranker_options=options(tiny_model)
        )
    trace = result.trace
    assert trace.rerank is not None and trace.status is RerankStatus.OK
    coarse = trace.coarse
    logits = reference_logits(tiny_model, QUERY, [c.text or "" for c in coarse])
    expected = sorted(range(len(coarse)), key=lambda i: -logits[i])[:4]
    assert trace.rerank.selected_ranks == tuple(i + 1 for i in expected)
    assert [h.ref for h in result.hits] == [coarse[i].ref for i in expected]
    got = [h.rerank_score for h in result.hits]
    assert got == pytest.approx([logits[i] for i in expected], abs=1e-5)
    assert got == sorted(got, reverse=True)  # the library's order: best score first
    assert list(trace.rerank.scores or ()) == got
    assert trace.to_dict()["rerank"]["scores"] == [round(s, 6) for s in got]
    assert [h.score for h in result.hits] == [coarse[i].score for i in expected]  # coarse
    assert trace.rerank.descriptor["ranker"] == "TransformerRanker"
    assert trace.rerank.usage.calls == 0  # a local model: no billable call


def test_identical_texts_map_back_to_their_own_positions(tiny_model: Path) -> None:
    same = "the spare key is under the blue flowerpot"
    texts = [TEXTS[0], same, TEXTS[1], same, TEXTS[2], same, TEXTS[3]]
    pool = tuple(
        Hit(MemoryRef("dup", f"m{i}", 1), text, 1.0 - i / 10) for i, text in enumerate(texts)
    )
    reranker = make_reranker(options(tiny_model), None)
    run = run_reranker(reranker, QUERY, pool, len(pool))
    hits, trace = run.hits, run.trace
    assert trace is not None and trace.status is RerankStatus.OK, trace
    assert trace.discarded_rank_count == 0
    assert sorted(trace.selected_ranks) == list(range(1, len(pool) + 1))  # each exactly once
    assert [h.ref for h in hits] == [pool[r - 1].ref for r in trace.selected_ranks]
    # The three copies score the same (up to padding noise in a batch); each is selected once,
    # as itself: mapping back by text would have put the first copy there three times.
    copies = sorted(r for r in trace.selected_ranks if texts[r - 1] == same)
    assert copies == [2, 4, 6]
    scores = dict(zip(trace.selected_ranks, trace.scores or (), strict=True))
    assert scores[2] == pytest.approx(scores[4], abs=1e-5) == pytest.approx(scores[6], abs=1e-5)


def test_identical_memories_through_memory_keep_their_identities(
    tiny_model: Path, tmp_path: Path
) -> None:
    same = "the spare key is under the blue flowerpot"
    with rankseam.open_memory(tmp_path / "d.sqlite3") as memory:
        added = [memory.add(same, memory_id=f"copy{i}").ref for i in range(3)]
        ids = [ref.memory_id for ref in added if ref is not None]
        assert len(ids) == 3
        memory.add(TEXTS[0])
        result = memory.search(
            "spare key", limit=4, reranker="rerankers", reranker_options=options(tiny_model)
        )
    assert result.status is RerankStatus.OK
    assert len({h.ref for h in result.hits}) == 4
    assert sorted(h.ref.memory_id for h in result.hits if h.text == same) == sorted(ids)


def test_the_model_loads_once_per_configuration_not_per_search(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rerankers.models.transformer_ranker import TransformerRanker

    loads: list[str] = []
    real_init = TransformerRanker.__init__

    def counting_init(self: Any, model_name_or_path: str, *args: Any, **kwargs: Any) -> None:
        loads.append(model_name_or_path)
        real_init(self, model_name_or_path, *args, **kwargs)

    monkeypatch.setattr(TransformerRanker, "__init__", counting_init)
    fresh = tmp_path / "fresh-copy"  # a configuration no other test loaded
    shutil.copytree(tiny_model, fresh)
    db = tmp_path / "m.sqlite3"
    with rankseam.open_memory(db) as memory:
        for text in TEXTS:
            memory.add(text)
        for query in (QUERY, "spare key", "who adopted a cat"):
            result = memory.search(query, reranker="rerankers", reranker_options=options(fresh))
            assert result.status is RerankStatus.OK
    args = ["search", "spare key", "--db", str(db), "--rerank", "rerankers"]
    args += ["--rerankers-model", str(fresh), "--rerankers-model-type", "cross-encoder"]
    out = invoke_cli(args, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert loads == [str(fresh.resolve())]


def test_the_cli_shows_scores_and_its_json_is_clean(tiny_model: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "cli.sqlite3")
    with rankseam.open_memory(db) as memory:
        for text in TEXTS:
            memory.add(text)
    args = ["search", QUERY, "--db", db, "--limit", "3", "--rerank", "rerankers"]
    args += ["--rerankers-model", str(tiny_model), "--rerankers-model-type", "cross-encoder"]
    out = invoke_cli(args, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert out.output.count("rerank_score=") == 3
    out = invoke_cli([*args, "--json", "--trace"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)  # nothing the library printed got mixed into the JSON
    scores = [h["rerank_score"] for h in data["hits"]]
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    assert data["trace"]["rerank"]["scores"] == scores
    assert data["trace"]["status"] == "ok"


def test_nothing_is_fetched_sockets_blocked(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every connection attempt, loopback included, is refused and recorded while a model
    that no test loaded before is loaded and used through Memory."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> Any:
        attempts.append(address)
        raise OSError(f"sockets blocked in this test: connect to {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)  # the plugin, not an offline flag, must hold
    fresh = tmp_path / "never-loaded"
    shutil.copytree(tiny_model, fresh)
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        for text in TEXTS:
            memory.add(text)
        result = memory.search(QUERY, reranker="rerankers", reranker_options=options(fresh))
    assert result.status is RerankStatus.OK
    assert all(h.rerank_score is not None for h in result.hits)
    assert attempts == []


def test_a_single_candidate_and_batches(tiny_model: Path) -> None:
    reranker = make_reranker(options(tiny_model, batch_size=2, max_length=16), None)
    pool = tuple(Hit(MemoryRef("b", f"m{i}", 1), t, 1.0) for i, t in enumerate(TEXTS))
    run = run_reranker(reranker, QUERY, pool[:1], 3)
    hits, trace = run.hits, run.trace
    assert trace is not None and trace.status is RerankStatus.OK
    assert hits == pool[:1] and trace.scores is not None and len(trace.scores) == 1
    # batch_size 2 over 7 texts ends with a batch of one: still one score per document
    run = run_reranker(reranker, QUERY, pool, 7)
    hits, trace = run.hits, run.trace
    assert trace is not None and trace.status is RerankStatus.OK
    assert sorted(trace.selected_ranks) == list(range(1, 8))
    unbatched = make_reranker(options(tiny_model, max_length=16), None)
    again = run_reranker(unbatched, QUERY, pool, 7).trace
    assert again is not None and again.selected_ranks == trace.selected_ranks
    assert again.scores == pytest.approx(trace.scores, abs=1e-5)


def test_texts_you_already_have_the_path_of_the_langchain_and_llamaindex_adapters(
    tiny_model: Path,
) -> None:
    """``rankseam.open_reranker`` is what RankseamCompressor (LangChain) and
    RankseamNodePostprocessor (LlamaIndex) call; duplicates keep their input positions."""
    same = "the spare key is under the blue flowerpot"
    texts = [same, TEXTS[0], same, TEXTS[1]]
    reranker = rankseam.open_reranker("rerankers", options=options(tiny_model))
    result = reranker.rerank(QUERY, texts, limit=4)
    assert result.status is RerankStatus.OK
    positions = [int(h.ref.memory_id) for h in result.hits]
    assert sorted(positions) == [1, 2, 3, 4]
    assert all(h.text == texts[p - 1] for h, p in zip(result.hits, positions, strict=True))
    logits = reference_logits(tiny_model, QUERY, texts)
    assert [h.rerank_score for h in result.hits] == pytest.approx(
        [logits[p - 1] for p in positions], abs=1e-5
    )
