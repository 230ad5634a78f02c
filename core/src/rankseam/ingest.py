"""The write path: records checked, embedded and handed to the store (add, update, ingest in
batches, re-embedding into another vector space)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import attrs

from rankseam.checks import is_int
from rankseam.decision import GateVerdict
from rankseam.embedding import Embedder, embed_checked
from rankseam.errors import ValidationError
from rankseam.store.contract import Store
from rankseam.store.records import (
    PreparedRecord,
    check_created_at,
    check_importance,
    check_memory_id,
    check_namespace,
    check_text,
    content_hash,
    encode_metadata,
    new_memory_id,
    prepare,
)
from rankseam.store.rows import VectorItem
from rankseam.store.writes import add_memory, delete_memory, update_memory, write_batch
from rankseam.types import MemoryRef

__all__ = [
    "MAX_LINE_BYTES",
    "RECORD_KEYS",
    "AddResult",
    "IngestError",
    "IngestReport",
    "ReembedReport",
    "Writer",
]

#: The keys of an ingest record (``text`` is required).
RECORD_KEYS = frozenset({"text", "id", "importance", "metadata", "namespace", "created_at"})
#: Longest line of a JSONL ingest file, in bytes: every valid record fits (a text at its
#: character cap, escaped, with metadata at its cap); a longer line is refused unread.
MAX_LINE_BYTES = 16 * 1024 * 1024


@attrs.frozen
class AddResult:
    """What :meth:`Memory.add` did. ``ref`` is None when the write gate said no.

    ``unchanged`` is True when the given id already held exactly this memory (same text,
    importance and metadata): nothing was written (``stored`` is False) and ``ref`` cites the
    revision that was already there. Adding with your own ids is therefore idempotent.
    """

    ref: MemoryRef | None
    stored: bool
    gate: GateVerdict | None = None
    unchanged: bool = False


@attrs.frozen
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    batches: int = 0
    seconds: float = 0.0

    @property
    def records(self) -> int:
        return self.added + self.updated + self.unchanged

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "batches": self.batches,
            "seconds": round(self.seconds, 3),
            "records_per_second": round(self.records / self.seconds, 1) if self.seconds else None,
        }


class IngestError(ValidationError):
    """A record of an ingest is invalid. ``index`` is its 1-based position in the input;
    ``committed`` counts the records of the batches committed before it (nothing of the
    failing batch was written); ``reason`` is what is wrong with the record."""

    def __init__(self, message: str, *, index: int, committed: int, reason: str = "") -> None:
        super().__init__(message)
        self.index = index
        self.committed = committed
        self.reason = reason or message


@attrs.frozen
class ReembedReport:
    space: str
    embedded: int
    seconds: float


class Writer:
    """Checks records, embeds them with the active embedder and hands them to the store."""

    def __init__(self, store: Store, embedder: Embedder, namespace: str) -> None:
        self._store = store
        self._embedder = embedder
        self._namespace = namespace
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    def namespace(self, namespace: str | None) -> str:
        """``namespace``, or the configured one when None, checked."""
        return check_namespace(self._namespace if namespace is None else namespace)

    def record(
        self,
        text: object,
        namespace: str | None,
        memory_id: object,
        importance: object,
        metadata: object,
        created_at: object = None,
    ) -> PreparedRecord:
        """One checked record, not yet embedded (a new id when ``memory_id`` is None)."""
        checked = check_text(text)
        return prepare(
            self.namespace(namespace),
            new_memory_id() if memory_id is None else check_memory_id(memory_id),
            checked,
            importance=None if importance is None else check_importance(importance),
            metadata=None if metadata is None else encode_metadata(metadata),
            created_at=check_created_at(created_at),
            content_hash=content_hash(checked),
        )

    def _embedded(self, rec: PreparedRecord) -> PreparedRecord:
        return attrs.evolve(rec, vector=embed_checked(self._embedder, [rec.text])[0])

    def add(self, rec: PreparedRecord, *, same_is_ok: bool = False) -> tuple[MemoryRef, bool]:
        """Store ``rec`` as a new memory (revision 1); True when written. With
        ``same_is_ok``, an id that already holds exactly this memory is not an error: its ref
        comes back with False."""
        added = add_memory(
            self._store,
            self._embedded(rec),
            space=self._embedder.descriptor.key,
            same_is_ok=same_is_ok,
        )
        return added.ref, added.written

    def update(self, rec: PreparedRecord) -> MemoryRef:
        """Store ``rec`` as a new revision of its memory."""
        return update_memory(self._store, self._embedded(rec), space=self._embedder.descriptor.key)

    def delete(self, namespace: str, memory_id: str) -> MemoryRef:
        """Tombstone a memory (its revisions stay readable)."""
        return delete_memory(self._store, namespace, memory_id)

    def ingest(
        self,
        records: Iterable[Mapping[str, Any]],
        *,
        namespace: str | None,
        batch_size: int,
        progress: bool | Callable[[int], None],
    ) -> IngestReport:
        """Bulk-write records, one transaction per batch (see :meth:`Memory.ingest`)."""
        if not is_int(batch_size) or batch_size < 1:
            raise ValidationError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        tick, done_bar = _progress(progress)
        started = time.perf_counter()
        totals = [0, 0, 0, 0]
        batch: list[PreparedRecord] = []
        space = self._embedder.descriptor.key
        # The write of one batch (the store works without the GIL) overlaps the checks and the
        # embedding of the next; batches are still written one at a time, in order.
        writing: list[tuple[Future[Any], int]] = []

        def settle() -> None:
            while writing:
                future, size = writing.pop()
                counts = future.result()
                totals[0] += counts.added
                totals[1] += counts.updated
                totals[2] += counts.unchanged
                totals[3] += 1
                tick(size)

        def flush() -> None:
            if not batch:
                return
            vectors = embed_checked(self._embedder, [r.text for r in batch])
            recs = list(batch)
            batch.clear()
            settle()
            future = self._write_thread().submit(
                write_batch, self._store, recs, space=space, vectors=vectors
            )
            writing.append((future, len(recs)))

        try:
            try:
                for index, raw in enumerate(records, start=1):
                    try:
                        batch.append(self._ingest_record(raw, namespace))
                    except ValidationError as exc:
                        settle()
                        committed = totals[0] + totals[1] + totals[2]
                        raise IngestError(
                            f"record {index}: {exc}; nothing of its batch was written "
                            f"({committed} earlier record(s) were committed)",
                            index=index,
                            committed=committed,
                            reason=str(exc),
                        ) from None
                    if len(batch) >= batch_size:
                        flush()
                flush()
            finally:
                settle()
        finally:
            done_bar()
        return IngestReport(
            totals[0], totals[1], totals[2], totals[3], time.perf_counter() - started
        )

    def _write_thread(self) -> ThreadPoolExecutor:
        """The one thread that writes ingest batches (started on first use)."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="rankseam-ingest")
            return self._executor

    def close(self) -> None:
        """Stop the ingest thread (after its last write)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _ingest_record(self, raw: object, namespace: str | None) -> PreparedRecord:
        if not isinstance(raw, Mapping):
            raise ValidationError(f"a record must be a JSON object, got {type(raw).__name__}")
        unknown = sorted(set(raw) - RECORD_KEYS)
        if unknown:
            raise ValidationError(
                f"unknown key(s) {unknown}; a record has {sorted(RECORD_KEYS)} ('text' required)"
            )
        if "text" not in raw:
            raise ValidationError("the record has no 'text'")
        return self.record(
            raw["text"],
            raw.get("namespace", namespace),
            raw.get("id"),
            raw.get("importance"),
            raw.get("metadata"),
            raw.get("created_at"),
        )

    def reembed(self, embedder: Embedder, *, batch_size: int) -> ReembedReport:
        """Embed every live memory that has no vector in ``embedder``'s space."""
        space = embedder.descriptor
        self._store.register_space(space)
        started = time.perf_counter()
        total = 0
        for page in self._store.iter_missing_vectors(space.key, page=batch_size):
            vectors = embed_checked(embedder, [p.text for p in page])
            self._store.put_vectors(
                [VectorItem(p.key, p.namespace, v) for p, v in zip(page, vectors, strict=True)],
                space=space.key,
            )
            total += len(page)
        return ReembedReport(space.key, total, time.perf_counter() - started)


def _progress(
    progress: bool | Callable[[int], None],
) -> tuple[Callable[[int], None], Callable[[], None]]:
    if callable(progress):
        return progress, lambda: None
    if not progress:
        return (lambda _n: None), (lambda: None)
    try:
        from tqdm import tqdm
    except ImportError:
        return (lambda _n: None), (lambda: None)
    bar = tqdm(unit="rec", desc="ingest", file=sys.stderr)
    return bar.update, bar.close
