"""The embedded store keeps the rows a search read for the searches of the same write
version: a write makes the next search read again, and a forget leaves no erased text in
the process."""

from __future__ import annotations

import rankseam


def _texts_held(memory) -> set[str]:
    return {row.text for row in memory.store.row_cache.held()}


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
