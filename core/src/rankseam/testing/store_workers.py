"""Helpers of :class:`rankseam.testing.StoreContract`: how the kit opens a store, and the
writer processes and the embedding probe of its standard tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from rankseam.types import Candidate, MemoryRef, RerankDecision

__all__ = [
    "BASE_CONFIG",
    "KILL_BATCH",
    "OTHER_SPACE",
    "REEMBED_BATCH",
    "EmbeddingProbe",
    "StallingEmbedder",
    "endless_ingest",
    "open_kit",
    "process_writer",
    "stalled_reembed",
]

#: The configuration every standard test opens its store with (no reranker, the built-in
#: hashed embedder, so the tests need nothing but rankseam and the store's plugin).
BASE_CONFIG: Mapping[str, Any] = {"embedder": "hashed", "namespace": "kit"}
#: Another embedder space (the hashed embedder at other dimensions).
OTHER_SPACE: Mapping[str, Any] = {"hashed": {"dimensions": 128}}


def open_kit(target: str, **overrides: Any) -> Any:
    import rankseam

    config = dict(BASE_CONFIG)
    for key in ("embedders",):
        if key in overrides:
            config[key] = overrides.pop(key)
    return rankseam.open_memory(target, config=config, reranker=None, **overrides)


class EmbeddingProbe:
    """A reranker that asks for stored vectors and records what the seam handed it."""

    policy_id = "rankseam.testing.embedding-probe.v1"
    deterministic = True
    needs_embeddings = True
    needs_event_loop = False

    def __init__(self) -> None:
        self.seen: list[tuple[MemoryRef, Any, str | None]] = []

    async def rerank(
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision:
        for c in candidates:
            self.seen.append((c.ref, c.embedding, c.embedding_space))
        return RerankDecision(selected_ranks=tuple(range(1, min(limit, len(candidates)) + 1)))


def process_writer(target: str, worker: int, count: int) -> dict[str, int]:
    """One writer process: ingest ``count`` memories in batches, update every third, delete
    every fifth, search once; return the revision each of its ids should end at."""
    memory = open_kit(target)
    try:
        ids = [f"p{worker}-{i}" for i in range(count)]
        memory.ingest(
            (
                {"id": mid, "text": f"process {worker} writes memory {i} zebra"}
                for i, mid in enumerate(ids)
            ),
            batch_size=7,
        )
        expected = dict.fromkeys(ids, 1)
        for i, mid in enumerate(ids):
            if i % 3 == 0:
                expected[mid] = memory.update(mid, f"process {worker} rewrote memory {i}").revision
        for i, mid in enumerate(ids):
            if i % 5 == 0:
                memory.delete(mid)
                expected[mid] = -expected[mid]  # negative: deleted at that revision
        for hit in memory.search("zebra memory", 10):
            assert memory.get(hit.ref).text == hit.text
        return expected
    finally:
        memory.close()


#: Records per batch of the killed writer.
KILL_BATCH = 40


def endless_ingest(target: str) -> None:
    """A writer process that ingests numbered memories in batches until it is killed."""
    memory = open_kit(target)

    def records() -> Iterator[dict[str, Any]]:
        i = 0
        while True:
            yield {"id": f"k{i:07d}", "text": f"killed writer memory {i} about a bittern"}
            i += 1

    memory.ingest(records(), batch_size=KILL_BATCH)


#: Memories per batch of the kit's re-embeds.
REEMBED_BATCH = 10


class StallingEmbedder:
    """Embeds as ``inner`` does, but its ``stall_at``-th call waits for ``release`` first
    (forever without one: a re-embed stalled in the middle of a batch, to be killed)."""

    def __init__(self, inner: Any, stall_at: int, release: threading.Event | None = None) -> None:
        self.descriptor = inner.descriptor
        self._inner = inner
        self._stall_at = stall_at
        self._release = release or threading.Event()
        self.calls = 0
        self.stalled = threading.Event()

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        self.calls += 1
        if self.calls == self._stall_at:
            self.stalled.set()
            self._release.wait()
        return np.asarray(self._inner.embed(texts), dtype=np.float32)


def stalled_reembed(target: str, stall_at: int) -> None:
    """A process that re-embeds the store into :data:`OTHER_SPACE` and stalls in the middle
    of batch ``stall_at`` until it is killed."""
    memory = open_kit(target, embedders=OTHER_SPACE)
    memory.reembed(StallingEmbedder(memory.embedder, stall_at), batch_size=REEMBED_BATCH)
