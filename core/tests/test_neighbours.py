"""The neighbours of memories in their thread under a search's filter
(:mod:`rankseam.search.neighbours`): a reranker that asks for neighbours never sees a memory
the filter rejects, the others keep their place in the thread, and the context channel and the
rerank stage read them through the same helper."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import rankseam
from rankseam.plugin.channels import thread_neighbours
from rankseam.store.filters import parse_where
from rankseam.types import RerankDecision


@pytest.fixture
def memory(tmp_path: Path) -> Any:
    """A thread of ten turns about a ferry, the even ones of team ``a``, the odd ones of ``b``,
    and a note of team ``a`` outside any thread."""
    with rankseam.open_memory(tmp_path / "m.sqlite3", reranker=None) as m:
        m.ingest(
            [
                {
                    "id": f"t{i}",
                    "text": f"turn {i} of the ferry talk",
                    "thread": "s",
                    "position": i,
                    "metadata": {"team": "ab"[i % 2]},
                }
                for i in range(10)
            ]
            + [{"id": "note", "text": "a ferry note", "metadata": {"team": "a"}}]
        )
        yield m


class _Looking:
    """A reranker that asks for two neighbours each side, with metadata, and records them."""

    policy_id = "test.neighbours.v1"
    needs_event_loop = False
    needs_neighbours = (2, 2)
    needs_metadata = True

    def __init__(self) -> None:
        self.around: dict[str, Any] = {}

    def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
        self.around = {c.ref.memory_id: candidates.neighbours(i) for i, c in enumerate(candidates)}
        return RerankDecision(tuple(range(1, limit + 1)))


def test_a_reranker_never_sees_a_neighbour_the_filter_rejects(memory: Any) -> None:
    looking = _Looking()
    result = memory.search("ferry", limit=5, reranker=looking, where={"team": "a"})
    assert {h.metadata["team"] for h in result} == {"a"}
    seen = [n for around in looking.around.values() for n in around]
    assert seen, "the candidates of the thread have neighbours of their team"
    assert {n.metadata["team"] for n in seen} == {"a"}
    assert {n.ref.memory_id for n in seen} <= {f"t{i}" for i in range(0, 10, 2)}
    # the others keep their place in the thread: t4's neighbours are two turns away
    assert [(n.offset, n.ref.memory_id) for n in looking.around["t4"]] == [
        (-2, "t2"),
        (2, "t6"),
    ]
    assert looking.around["note"] == ()


def test_without_a_filter_a_reranker_sees_every_neighbour(memory: Any) -> None:
    looking = _Looking()
    memory.search("ferry", limit=11, reranker=looking)
    assert [(n.offset, n.ref.memory_id) for n in looking.around["t4"]] == [
        (-2, "t2"),
        (-1, "t3"),
        (1, "t5"),
        (2, "t6"),
    ]


def test_a_scope_on_a_field_holds_the_neighbours_too(memory: Any) -> None:
    looking = _Looking()
    memory.search("ferry", limit=5, reranker=looking, where={"position": {"$gte": 3}})
    seen = {n.ref.memory_id for around in looking.around.values() for n in around}
    assert seen and seen <= {f"t{i}" for i in range(3, 10)}


def test_the_context_channel_and_the_reranker_read_the_same_neighbours(memory: Any) -> None:
    where = parse_where({"team": "b"})
    with memory.store.read() as reader:
        keys = {f"t{i}": reader.resolve(memory.get(f"t{i}").ref) for i in range(10)}
        near = thread_neighbours(reader, [keys["t5"], keys["t0"]], 2, 1, where=where)
        rows = thread_neighbours(reader, [keys["t5"]], 2, 1, where=where, rows=True).rows
    # t5's neighbours are t3, t4 (before) and t6 (after): only t3 is of team b
    assert near.placed[keys["t5"]] == ((-2, keys["t3"]),)
    assert near.placed[keys["t0"]] == ((1, keys["t1"]),)
    assert {rows[k].metadata["team"] for _o, k in near.placed[keys["t5"]]} == {"b"}
