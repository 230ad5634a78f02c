"""The two built-in uses of conversation structure (docs/store.md): the context stage (the
``context`` channel, a channel of the ``context`` stage, over the fused pool) and source-aware
selection (``distinct_sources``), through the public API on real SQLite files; and the host's
merge of a context channel's answer (``rankseam.search.fusion.widen``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import rankseam
from rankseam import ConfigurationError, MemoryRef, RerankDecision, ValidationError
from rankseam.search.fusion import Fused, widen

WITHOUT_CONTEXT = {"search": {"sources": ["lexical", "vector", "importance"]}}

CHAT = [
    # session 1: a question, its short reply, and small talk around them
    ("s1:0", "Ada: morning! how was the weekend", "s1", 0),
    ("s1:1", "Ben: did you visit the lighthouse museum in Porto?", "s1", 1),
    ("s1:2", "Ada: yes, last tuesday!", "s1", 2),
    ("s1:3", "Ben: nice, I should go too", "s1", 3),
    ("s1:4", "Ada: bring a jacket, it is windy", "s1", 4),
    # session 2: unrelated
    ("s2:0", "Ben: my bicycle has a flat tyre", "s2", 0),
    ("s2:1", "Ada: the repair shop opens at nine", "s2", 1),
]


def _chat(memory: rankseam.Memory) -> None:
    memory.ingest(
        {"id": mid, "text": text, "thread": thread, "position": pos}
        for mid, text, thread, pos in CHAT
    )


@pytest.fixture
def chat(tmp_path: Path):
    with rankseam.open_memory(tmp_path / "chat.sqlite3") as memory:
        _chat(memory)
        yield memory


def _coarse(result) -> dict[str, object]:
    return {c.ref.memory_id: c for c in result.trace.coarse}


def test_a_reply_enters_the_pool_through_the_turn_it_answers(chat) -> None:
    result = chat.search("lighthouse museum", 10, reranker=None)
    pool = _coarse(result)
    question = pool["s1:1"]
    reply = pool["s1:2"]  # shares no word with the query
    assert question.matched_by[0] == "lexical" and "lexical" not in reply.matched_by
    assert reply.matched_by[-1] == "context"
    # its score is derived from the turn it neighbours: 0.8 × that turn's fused score
    assert reply.score == pytest.approx(0.8 * question.score)
    hit = next(h for h in result if h.ref.memory_id == "s1:2")
    assert hit.channel_scores["context"] == pytest.approx(0.8 * question.score)
    # one before (s1:0) and two after (s1:2, s1:3) the strongest candidate, by default
    for mid in ("s1:0", "s1:3"):
        assert pool[mid].score == pytest.approx(0.8 * question.score)
        assert pool[mid].matched_by[-1] == "context"
    assert "context" in result.trace.channels
    assert result[0].ref.memory_id == "s1:1"
    assert result[1].score == pytest.approx(0.8 * question.score)
    assert result.trace.to_dict()["coarse"][1]["matched_by"][-1] == "context"


def test_without_the_context_channel_the_reply_stays_low(tmp_path: Path, chat) -> None:
    with rankseam.open_memory(tmp_path / "c.sqlite3", config=WITHOUT_CONTEXT) as memory:
        _chat(memory)
        result = memory.search("lighthouse museum", 10, reranker=None)
    pool = _coarse(result)
    widened = _coarse(chat.search("lighthouse museum", 10, reranker=None))
    # the hashed vector channel admits it, far below the turn it answers; nothing lifts it
    assert pool["s1:2"].score < 0.5 * pool["s1:1"].score
    assert pool["s1:1"].score == widened["s1:1"].score
    assert widened["s1:2"].score == pytest.approx(0.8 * pool["s1:1"].score)
    assert "context" not in result.trace.channels
    assert all("context" not in c.matched_by for c in result.trace.coarse)


def test_the_channel_takes_its_options(tmp_path: Path) -> None:
    config = {
        "search": {"sources": ["lexical", "vector", "context"]},
        "sources": {"context": {"before": 0, "after": 3, "weight": 0.5, "strongest": 1}},
    }
    with rankseam.open_memory(tmp_path / "c.sqlite3", config=config) as memory:
        _chat(memory)
        pool = _coarse(memory.search("lighthouse museum", 10, reranker=None))
    assert "s1:0" not in pool or "context" not in pool["s1:0"].matched_by
    assert {"s1:2", "s1:3", "s1:4"} <= set(pool)
    assert pool["s1:4"].score == pytest.approx(0.5 * pool["s1:1"].score)
    with pytest.raises(ConfigurationError, match="sources.context"):
        rankseam.open_memory(
            tmp_path / "d.sqlite3", config={"sources": {"context": {"weight": 1.5}}}
        )


def test_the_stage_drops_nothing_and_at_most_doubles_the_pool(chat, tmp_path: Path) -> None:
    grown = False
    with rankseam.open_memory(tmp_path / "chat.sqlite3", config=WITHOUT_CONTEXT) as fused_only:
        for query in ("lighthouse museum", "lighthouse museum Porto weekend", "bicycle tyre"):
            for pool in (1, 2, 3, 30):
                coarse = chat.search(query, 1, reranker=None, pool=pool).trace.coarse
                fused = fused_only.search(query, 1, reranker=None, pool=pool).trace.coarse
                assert len(coarse) <= 2 * pool
                assert {c.ref for c in fused} <= {c.ref for c in coarse}  # nothing dropped
                grown = grown or len(coarse) > pool
    assert grown  # the neighbours joined the pool rather than displacing what fusion found
    # pool 2: the question first, then its neighbours at 0.8 of its score
    result = chat.search("lighthouse museum Porto weekend", 2, reranker=None, pool=2)
    assert result.trace.coarse[0].ref.memory_id == "s1:1"
    assert "s1:2" in _coarse(result)


def test_documents_without_threads_answer_exactly_as_without_the_stage(tmp_path: Path) -> None:
    docs = [
        {"id": f"d{i}", "text": text}
        for i, text in enumerate(
            [
                "green tea lowers blood pressure in adults",
                "black tea and coffee raise alertness",
                "a cup of green tea every morning",
                "tea plantations in the highlands of Sri Lanka",
                "coffee prices rose sharply this year",
            ]
        )
    ]
    answers = []
    for name, config in (("with", None), ("without", WITHOUT_CONTEXT)):
        with rankseam.open_memory(tmp_path / f"{name}.sqlite3", config=config) as memory:
            memory.ingest(docs)
            result = memory.search("green tea morning", 4, reranker=None, pool=4)
            answers.append([(h.ref, h.score, h.matched_by, dict(h.channel_scores)) for h in result])
    assert answers[0] == answers[1]
    assert len(answers[0]) == 4


def test_the_first_conversation_of_a_store_of_documents_is_seen_at_once(tmp_path: Path) -> None:
    # a store without a thread answers the stage at once (known per write version); the
    # write that adds the first conversation must make the next search see it
    with rankseam.open_memory(tmp_path / "docs.sqlite3") as memory:
        memory.add("the lighthouse museum in Porto has a new wing", memory_id="doc")
        before = memory.search("lighthouse museum", 10, reranker=None)
        assert all("context" not in c.matched_by for c in before.trace.coarse)
        _chat(memory)
        after = _coarse(memory.search("lighthouse museum", 10, reranker=None))
        assert after["s1:2"].matched_by[-1] == "context"  # the reply, through its question


def test_a_context_stage_never_brings_back_a_deleted_turn(chat) -> None:
    chat.delete("s1:2")
    pool = _coarse(chat.search("lighthouse museum", 10, reranker=None))
    assert "s1:2" not in pool
    assert "s1:3" in pool  # the next live turn is the neighbour now


# -------------------------------------------------------------- source-aware selection

FACTS = [
    {"id": "t1", "text": "Ada: I adopted a grey cat named Pixel", "thread": "s", "position": 1},
    {"id": "t1/f1", "text": "Ada adopted a grey cat", "derived_from": "t1"},
    {"id": "t1/f2", "text": "Ada's cat is named Pixel, a grey cat", "derived_from": "t1"},
    {"id": "t9", "text": "Ben: my neighbour's cat sleeps all day", "thread": "s", "position": 9},
]


@pytest.fixture
def facts(tmp_path: Path):
    config = {"search": {"sources": ["lexical", "vector", "importance"]}}
    with rankseam.open_memory(tmp_path / "f.sqlite3", config=config) as memory:
        memory.ingest(FACTS)
        yield memory


def _group(hit) -> str:
    return hit.derived_from or hit.ref.memory_id


def test_memories_of_one_source_do_not_crowd_the_top(facts) -> None:
    plain = facts.search("grey cat Pixel", 4, reranker=None, distinct_sources=False)
    spread = facts.search("grey cat Pixel", 4, reranker=None)
    before = [h.ref.memory_id for h in plain]
    after = [h.ref.memory_id for h in spread]
    # by score the source and its facts fill the top 3; the other memory comes 4th
    assert [_group(h) for h in plain][:3] == ["t1", "t1", "t1"] and before[3] == "t9"
    # source-aware: the first memory of each group, in score order, then the repeats
    assert after == [before[0], "t9", *[m for m in before if m not in (before[0], "t9")]]
    assert sorted(after) == sorted(before)
    # scores are not changed, and the coarse trace shows the order the hits come in
    assert {h.ref: h.score for h in spread} == {h.ref: h.score for h in plain}
    assert [c.ref.memory_id for c in spread.trace.coarse] == after


def test_distinct_sources_is_configurable(tmp_path: Path) -> None:
    config = {"search": {"sources": ["lexical", "vector"], "distinct_sources": False}}
    with rankseam.open_memory(tmp_path / "f.sqlite3", config=config) as memory:
        memory.ingest(FACTS)
        off = [h.ref.memory_id for h in memory.search("grey cat Pixel", 4, reranker=None)]
        on = memory.search("grey cat Pixel", 4, reranker=None, distinct_sources=True)
    assert [m.split("/")[0] for m in off][:3] == ["t1", "t1", "t1"]
    assert on[1].ref.memory_id == "t9"
    with pytest.raises(ConfigurationError, match="search.distinct_sources must be true or false"):
        rankseam.open_memory(tmp_path / "g.sqlite3", config={"search": {"distinct_sources": "yes"}})


def test_a_bad_distinct_sources_argument_is_named(facts) -> None:
    with pytest.raises(ValidationError, match="distinct_sources must be True, False or None"):
        facts.search("cat", 3, distinct_sources="no")


class Recorder:
    policy_id = "test.record.v1"
    descriptor: dict[str, str] = {}
    deterministic = True

    def __init__(self) -> None:
        self.seen: list[list[MemoryRef]] = []

    async def rerank(self, query, candidates, limit, /):
        self.seen.append([c.ref for c in candidates])
        return RerankDecision(tuple(range(1, min(limit, len(candidates)) + 1)))


def test_a_reranker_sees_the_pool_in_source_aware_order(facts) -> None:
    recorder = Recorder()
    reranked = facts.search("grey cat Pixel", 4, reranker=recorder)
    coarse = facts.search("grey cat Pixel", 4, reranker=None)
    assert recorder.seen == [[h.ref for h in coarse]]
    assert [h.ref for h in reranked] == [h.ref for h in coarse]
    assert coarse[1].ref.memory_id == "t9"


# ------------------------------------------------------------------------ the host's merge


def _ref(key: int) -> MemoryRef:
    return MemoryRef("ns", f"m{key:02d}", 1)


def _fused(key: int, score: float, by: tuple[str, ...] = ("lexical",)) -> Fused:
    return Fused(key, score, by, {"lexical": score * 10})


def test_widen_takes_the_larger_score_adds_the_channel_and_cuts_the_pool() -> None:
    pool = [_fused(1, 0.9), _fused(2, 0.5), _fused(3, 0.4)]
    out = widen(pool, "context", [(4, 0.72), (3, 0.45), (2, 0.1)], _ref, 3)
    assert [f.key for f in out] == [1, 4, 2]  # 3 (0.45) is cut below 2 (0.5)
    assert out[1] == Fused(4, 0.72, ("context",), {"context": 0.72})
    assert out[2] == Fused(2, 0.5, ("lexical", "context"), {"lexical": 5.0, "context": 0.1})
    # a raised score moves the memory up
    out = widen(pool, "context", [(3, 0.6)], _ref, 3)
    assert [(f.key, f.score) for f in out] == [(1, 0.9), (3, 0.6), (2, 0.5)]


def test_widen_drops_keys_without_a_live_revision_and_ignores_bad_scores() -> None:
    pool = [_fused(1, 0.9), _fused(2, 0.5)]
    out = widen(
        pool,
        "context",
        [(7, 0.8), (8, float("nan")), (9, 0.7)],
        lambda k: None if k == 7 else _ref(k),
        5,
    )
    assert [f.key for f in out] == [1, 9, 2]
    assert widen(pool, "context", [], _ref, 5) == pool


def test_widen_breaks_ties_by_identity_bytes() -> None:
    pool = [_fused(5, 0.9), _fused(6, 0.4)]
    out = widen(pool, "context", [(9, 0.4), (2, 0.4)], _ref, 4)
    assert [f.key for f in out] == [5, 2, 6, 9]  # m02 < m06 < m09 at 0.4


def test_a_channel_of_an_unknown_stage_is_refused(tmp_path: Path, monkeypatch) -> None:
    from rankseam.search.channels import context as module

    monkeypatch.setattr(module.ContextSource, "stage", "later")
    with pytest.raises(ConfigurationError, match="ContextSource.stage must be one of"):
        rankseam.open_memory(tmp_path / "s.sqlite3")


def test_a_context_channel_alone_admits_nothing(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no source that admits"):
        rankseam.open_memory(tmp_path / "s.sqlite3", config={"search": {"sources": ["context"]}})
