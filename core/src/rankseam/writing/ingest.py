"""The write path: records checked, embedded and handed to the store (add, update, ingest in
batches, re-embedding into another vector space)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import numpy as np

from rankseam.checks import is_int
from rankseam.embedding import Embedder, embed_checked
from rankseam.errors import ValidationError
from rankseam.store.contract import Store
from rankseam.store.records import (
    PreparedRecord,
    check_created_at,
    check_derived_from,
    check_importance,
    check_memory_id,
    check_namespace,
    check_position,
    check_text,
    check_thread,
    content_hash,
    encode_metadata,
    new_memory_id,
    prepare,
)
from rankseam.store.rows import VectorItem
from rankseam.types import MAX_INT64, MemoryRef
from rankseam.writing.gate import GateVerdict
from rankseam.writing.plan import add_memory, delete_memory, update_memory, write_batch
from rankseam.writing.reembed import (
    ReembedProgress,
    ReembedReport,
    SharedExclusive,
    reembed_pass,
    reembed_progress,
)

if TYPE_CHECKING:  # the ingest thread's pool is imported where it is first started
    from concurrent.futures import Future, ThreadPoolExecutor

__all__ = [
    "MAX_LINE_BYTES",
    "RECORD_KEYS",
    "AddResult",
    "IngestError",
    "IngestReport",
    "ReembedProgress",
    "ReembedReport",
    "Writer",
]

T = TypeVar("T")

#: The keys of an ingest record (``text`` is required).
RECORD_KEYS = frozenset(
    {
        "text",
        "id",
        "importance",
        "metadata",
        "namespace",
        "created_at",
        "thread",
        "position",
        "derived_from",
    }
)
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


class Writer:
    """Checks records, embeds them with the active embedder and hands them to the store."""

    def __init__(self, store: Store, embedder: Embedder, namespace: str) -> None:
        self._store = store
        self._embedder = embedder
        self._namespace = namespace
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        # Writes hold it shared; the end of a re-embed (its last pass and the switch) holds it
        # exclusively, so that no write of this Writer falls between them.
        self._switch_lock = SharedExclusive()
        # The spaces being re-embedded into (space key: embedder, running re-embeds): every
        # write gives its revisions a vector there too.
        self._also: dict[str, tuple[Embedder, int]] = {}

    @property
    def embedder(self) -> Embedder:
        """The active embedder: writes store its vectors (a switching re-embed changes it)."""
        return self._embedder

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
        *,
        thread: object = None,
        position: object = None,
        derived_from: object = None,
    ) -> PreparedRecord:
        """One checked record, not yet embedded (a new id when ``memory_id`` is None)."""
        checked = check_text(text)
        mid = new_memory_id() if memory_id is None else check_memory_id(memory_id)
        source = check_derived_from(derived_from)
        if source is not None and source == mid:
            raise ValidationError(
                f"memory {mid!r} cannot be derived from itself; derived_from names another "
                "memory of the namespace (the one it was extracted from)"
            )
        return prepare(
            self.namespace(namespace),
            mid,
            checked,
            importance=None if importance is None else check_importance(importance),
            metadata=None if metadata is None else encode_metadata(metadata),
            created_at=check_created_at(created_at),
            content_hash=content_hash(checked),
            thread=check_thread(thread),
            position=check_position(position),
            derived_from=source,
        )

    def _write(
        self,
        recs: Sequence[PreparedRecord],
        vectors: tuple[str, np.ndarray] | None,
        write: Callable[[str, np.ndarray, list[tuple[int, int]]], T],
    ) -> T:
        """Run ``write(space, vectors, written)``: ONE store transaction writing ``recs`` with
        the active space's vectors, which appends ``(record index, row key)`` of each revision
        it wrote to ``written``. ``vectors``: ``(space key, rows)`` embedded beforehand (rows of
        another space than the active one are embedded again). Then every revision written
        gets a vector in each space being re-embedded into as well; the end of a re-embed
        waits for this (see :meth:`reembed`)."""
        with self._switch_lock.shared():
            active = self._embedder
            key = active.descriptor.key
            if vectors is None or vectors[0] != key:
                vectors = (key, embed_checked(active, [r.text for r in recs]))
            written: list[tuple[int, int]] = []
            result = write(key, vectors[1], written)
            with self._lock:
                also = list(self._also.items())
            for space, (embedder, _runs) in also:
                if written and space != key:
                    rows = embed_checked(embedder, [recs[i].text for i, _key in written])
                    self._store.put_vectors(
                        [
                            VectorItem(row_key, recs[i].namespace, vector)
                            for (i, row_key), vector in zip(written, rows, strict=True)
                        ],
                        space=space,
                    )
            return result

    def add(self, rec: PreparedRecord, *, same_is_ok: bool = False) -> tuple[MemoryRef, bool]:
        """Store ``rec`` as a new memory (revision 1); True when written. With
        ``same_is_ok``, an id that already holds exactly this memory is not an error: its ref
        comes back with False."""
        embedder = self._embedder
        pre = (embedder.descriptor.key, embed_checked(embedder, [rec.text]))

        def write(space: str, vectors: np.ndarray, written: list[tuple[int, int]]) -> Any:
            keys: list[int] = []
            added = add_memory(
                self._store,
                attrs.evolve(rec, vector=vectors[0]),
                space=space,
                same_is_ok=same_is_ok,
                written=keys,
            )
            written.extend((0, k) for k in keys)
            return added

        added = self._write([rec], pre, write)
        return added.ref, added.written

    def update(self, rec: PreparedRecord) -> MemoryRef:
        """Store ``rec`` as a new revision of its memory."""
        embedder = self._embedder
        pre = (embedder.descriptor.key, embed_checked(embedder, [rec.text]))

        def write(space: str, vectors: np.ndarray, written: list[tuple[int, int]]) -> MemoryRef:
            keys: list[int] = []
            ref = update_memory(
                self._store, attrs.evolve(rec, vector=vectors[0]), space=space, written=keys
            )
            written.extend((0, k) for k in keys)
            return ref

        return self._write([rec], pre, write)

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
        check_batch_size(batch_size)
        tick, done_bar = _progress(progress)
        started = time.perf_counter()
        totals = [0, 0, 0, 0]
        batch: list[PreparedRecord] = []
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
            embedder = self._embedder
            vectors = (embedder.descriptor.key, embed_checked(embedder, [r.text for r in batch]))
            recs = list(batch)
            batch.clear()
            settle()

            def write(space: str, rows: np.ndarray, written: list[tuple[int, int]]) -> Any:
                return write_batch(self._store, recs, space=space, vectors=rows, written=written)

            future = self._write_thread().submit(self._write, recs, vectors, write)
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
        from concurrent.futures import ThreadPoolExecutor

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
            thread=raw.get("thread"),
            position=raw.get("position"),
            derived_from=raw.get("derived_from"),
        )

    def reembed(
        self,
        embedder: Embedder,
        *,
        batch_size: int,
        progress: bool | Callable[[ReembedProgress], None],
        max_memories: int | None,
        switch: Callable[[Embedder], None] | None,
    ) -> ReembedReport:
        """Give every live memory a vector in ``embedder``'s space (see
        :meth:`Memory.reembed`): pages of revisions without one, in key order, embedded and
        stored one transaction per page (what is stored stays: a killed run loses at most one
        page, and the next run continues with what is still missing). Meanwhile this
        Writer's writes store a vector in that space as well. ``switch``: called with
        ``embedder`` once the space is complete, before any further write of this Writer;
        it becomes the active embedder."""
        check_batch_size(batch_size)
        if max_memories is not None and (not is_int(max_memories) or max_memories < 1):
            raise ValidationError(
                f"max_memories must be None or an integer >= 1, got {max_memories!r}"
            )
        space = embedder.descriptor.key
        self._store.register_space(embedder.descriptor)
        started = time.perf_counter()
        stats = self._store.stats()
        remaining = max(0, int(stats["memories"]) - int(stats["vectors_by_space"].get(space, 0)))
        tick, done_bar = reembed_progress(progress, space, remaining)
        counts = [0, remaining]  # embedded by this call, remaining (estimated)
        complete = switched = False

        def page_done(n: int) -> None:
            counts[0] += n
            counts[1] = max(0, counts[1] - n)
            tick(ReembedProgress(space, counts[0], counts[1]))

        def counted(n: int) -> None:  # no callback while this Writer's writes wait (it may write)
            counts[0] += n

        with self._lock:
            _emb, runs = self._also.get(space, (embedder, 0))
            self._also[space] = (embedder, runs + 1)
        try:
            tick(ReembedProgress(space, 0, remaining))
            if not reembed_pass(self._store, embedder, batch_size, max_memories, page_done):
                # The last pass, with this Writer's writes held back: what committed behind
                # the first pass (another process's writes; a server store may commit row
                # keys out of order). This Writer's own writes already stored this space.
                with self._switch_lock.exclusive():
                    reembed_pass(self._store, embedder, batch_size, None, counted)
                    complete = True
                    if switch is not None and space != self._embedder.descriptor.key:
                        switch(embedder)
                        self._embedder = embedder
                        switched = True
                counts[1] = 0
                tick(ReembedProgress(space, counts[0], 0))
        finally:
            with self._lock:
                _emb, runs = self._also[space]
                if runs > 1:
                    self._also[space] = (embedder, runs - 1)
                else:
                    del self._also[space]
            done_bar()
        embedded = counts[0]
        return ReembedReport(space, embedded, time.perf_counter() - started, complete, switched)


def check_batch_size(batch_size: object) -> None:
    """A batch size is an integer in 1..2**63 - 1 (a page of a store's query: SQLite's LIMIT
    is a signed 64-bit integer)."""
    if not is_int(batch_size) or not 1 <= batch_size <= MAX_INT64:
        raise ValidationError(
            f"batch_size must be an integer in 1..{MAX_INT64} (memories per transaction; "
            f"a few hundred is usual), got {batch_size!r}"
        )


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
