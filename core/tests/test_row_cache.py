"""The embedded store keeps the rows a search read for the searches of the same write
version: a write makes the next search read again, and a forget leaves no erased text in
the process."""

from __future__ import annotations

import rankseam


def _texts_held(memory) -> set[str]:
    return {row.text for row in memory.store.row_cache.held().values()}


def test_a_write_is_seen_by_the_next_search(tmp_path):
    with rankseam.open_memory(tmp_path / "m.db") as memory:
        memory.add("the ferry leaves at noon", memory_id="ferry")
        memory.add("the harbour opens at dawn", memory_id="harbour")
        first = memory.search("ferry noon", 5, reranker=None)
        assert first.hits[0].text == "the ferry leaves at noon"
        assert "the ferry leaves at noon" in _texts_held(memory)
        memory.update("ferry", "the ferry leaves at one, not noon")
        after = memory.search("ferry noon", 5, reranker=None)
        assert after.hits[0].text == "the ferry leaves at one, not noon"
        assert after.hits[0].ref.revision == 2
        memory.delete("harbour")
        assert [h.ref.memory_id for h in memory.search("harbour dawn", 5, reranker=None).hits] == [
            "ferry"
        ]


def test_a_forget_leaves_no_erased_text_in_the_cache(tmp_path):
    with rankseam.open_memory(tmp_path / "m.db") as memory:
        memory.add("my locker code is 4711", memory_id="secret")
        memory.add("the ferry leaves at noon", memory_id="ferry")
        memory.search("locker code", 5, reranker=None)
        assert "my locker code is 4711" in _texts_held(memory)
        memory.forget("secret")
        assert "my locker code is 4711" not in _texts_held(memory)
        hits = memory.search("locker code", 5, reranker=None).hits
        assert [h.ref.memory_id for h in hits] == ["ferry"]


def test_facts_read_at_once_answer_as_those_read_by_key(tmp_path):
    path = tmp_path / "m.db"
    with rankseam.open_memory(path) as memory:
        ids = [
            memory.add(f"note {i}: the ferry {'leaves' if i % 2 else 'arrives'} at {i}").ref
            for i in range(60)
        ]
        for ref in ids[::7]:
            memory.delete(ref.memory_id)  # retired revisions stay in the store
        memory.update(ids[1].memory_id, "note 1: the ferry leaves at one")
        questions = [f"ferry {w} {i}" for i in range(20) for w in ("leaves", "arrives")]
        answers = [memory.search(q, 10, reranker=None) for q in questions]
        with memory.store.read() as reader:
            assert memory.store.facts.table(reader.write_version()).whole
        # a second process-cache (another Memory) answers by reading the keys one by one
        with rankseam.open_memory(path) as fresh:
            for q, answer in zip(questions[:3], answers, strict=False):
                first = fresh.search(q, 10, reranker=None)
                assert [(h.ref, h.score) for h in first.hits] == [
                    (h.ref, h.score) for h in answer.hits
                ]
            for q, answer in zip(questions, answers, strict=True):
                again = memory.search(q, 10, reranker=None)
                assert [(h.ref, h.score) for h in again.hits] == [
                    (h.ref, h.score) for h in answer.hits
                ]
