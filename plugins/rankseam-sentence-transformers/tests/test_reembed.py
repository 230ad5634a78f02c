"""``rankseam reembed --embedder sentence-transformers`` converts a real store; searches then use
the semantic vectors, and vectors of the old space never mix in."""

from __future__ import annotations

from pathlib import Path

import pytest

import rankseam
from rankseam.testing import invoke_cli

ST = "sentence-transformers"
MEMORIES = [
    ("pet", "Caroline adopted a puppy from the shelter and called him Max."),
    ("trip", "Jon flew to Lisbon in May for a three-day conference on databases."),
    ("food", "Melanie is allergic to peanuts and always checks the label."),
    ("job", "Andrew quit the bank and now teaches mathematics at a high school."),
    ("music", "Maria plays the cello in a community orchestra every Thursday."),
]
# No content word shared with the memory each is about: only meaning can find it.
QUESTIONS = {
    "Who got a new canine companion?": "pet",
    "Where did he travel for the meeting?": "trip",
    "Which food can make her sick?": "food",
    "What does he do for work nowadays?": "job",
    "Which instrument does she perform on?": "music",
}
QUERY, ANSWER = next(iter(QUESTIONS.items()))


def _top(memory: rankseam.Memory, query: str, limit: int = 5) -> list[str]:
    return [hit.ref.memory_id for hit in memory.search(query, limit, reranker=None).hits]


@pytest.fixture()
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "store.sqlite3")
    with rankseam.open_memory(path, embedder="hashed") as memory:
        for memory_id, text in MEMORIES:
            memory.add(text, memory_id=memory_id)
    return path


def _reembed(db: str) -> str:
    result = invoke_cli(["reembed", "--db", db, "--embedder", ST])
    assert result.exit_code == 0, result.output
    return result.output


def _right_first(memory: rankseam.Memory) -> int:
    return sum(_top(memory, q)[0] == want for q, want in QUESTIONS.items())


def test_reembed_converts_the_store_and_search_uses_the_new_vectors(db: str) -> None:
    with rankseam.open_memory(db, embedder="hashed", sources=["vector"]) as memory:
        assert _right_first(memory) <= 1  # the hashed space cannot answer these
    output = _reembed(db)
    assert f"embedded {len(MEMORIES)} memories into {ST}/all-MiniLM-L6-v2@sha256:" in output
    assert "RANKSEAM_EMBEDDER=sentence-transformers" in output
    with rankseam.open_memory(db, embedder=ST, sources=["vector"]) as memory:
        stats = memory.stats()
        key = memory.embedder.descriptor.key
        assert stats["vectors_by_space"][key] == len(MEMORIES)
        assert stats["vector_coverage"] == 1.0
        assert _right_first(memory) == len(QUESTIONS)
    # a second run finds nothing left to do
    assert f"embedded 0 memories into {ST}/" in _reembed(db)


def test_vectors_of_another_space_never_mix_in(db: str) -> None:
    _reembed(db)
    late_text = "Priya repaired the brakes on her bicycle over the weekend."
    with rankseam.open_memory(db, embedder="hashed") as memory:  # gets a hashed vector only
        memory.add(late_text, memory_id="late")
    with rankseam.open_memory(db, embedder=ST, sources=["vector"]) as memory:
        assert memory.stats()["vector_coverage"] < 1.0
        found = _top(memory, late_text, limit=10)
        assert "late" not in found, "a hashed vector was compared in the semantic space"
        assert set(found) <= {m for m, _ in MEMORIES}
    _reembed(db)
    with rankseam.open_memory(db, embedder=ST, sources=["vector"]) as memory:
        assert _top(memory, late_text)[0] == "late"
        assert _top(memory, QUERY)[0] == ANSWER


def test_reembed_moves_a_store_between_the_torch_and_the_torch_free_space(db: str) -> None:
    """The torch model's vectors and the packaged int8 graph's are two spaces: a store embedded
    with one is moved to the other by reembed, and each search uses only its own space."""
    _reembed(db)
    result = invoke_cli(["reembed", "--db", db, "--embedder", "minilm-int8"])
    assert result.exit_code == 0, result.output
    assert f"embedded {len(MEMORIES)} memories into minilm-int8/all-MiniLM-L6-v2@sha256:" in (
        result.output
    )
    with rankseam.open_memory(db, embedder="minilm-int8", sources=["vector"]) as memory:
        spaces = memory.stats()["vectors_by_space"]
        int8_key = memory.embedder.descriptor.key
        assert _right_first(memory) == len(QUESTIONS)
    with rankseam.open_memory(db, embedder=ST, sources=["vector"]) as memory:
        torch_key = memory.embedder.descriptor.key
    assert int8_key != torch_key
    assert spaces[int8_key] == spaces[torch_key] == len(MEMORIES)
