"""The async twins of :class:`~rankseam.memory.Memory`'s writes and reads (docs/async.md).

Each ``aNAME`` runs ``NAME`` in a worker thread (``asyncio.to_thread``): the same arguments,
the same result, the same exceptions, and the same thread-safety, so they may run
concurrently with each other and with :meth:`~rankseam.memory.Memory.asearch` on one event
loop. The event loop is never blocked by the store. ``asearch`` lives with ``search``.

Cancelling the awaiting task stops the wait, not the work: a write already handed to its
thread completes (all or nothing, as its sync twin), so re-read before retrying.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

from rankseam.checks import is_int
from rankseam.errors import ValidationError
from rankseam.types import MAX_INT64

if TYPE_CHECKING:
    from datetime import datetime

    from rankseam.embedding import Embedder
    from rankseam.store.records import StoredMemory
    from rankseam.store.rows import Forgotten
    from rankseam.types import FeedbackRecord, MemoryRef, SearchResult
    from rankseam.writing.ingest import AddResult, IngestReport
    from rankseam.writing.reembed import ReembedProgress, ReembedReport

__all__ = ["AsyncMethods"]


class _Operations(Protocol):
    """The synchronous operations the async twins run (those of :class:`Memory`)."""

    @property
    def add(self) -> Callable[..., AddResult]: ...
    @property
    def update(self) -> Callable[..., MemoryRef]: ...
    @property
    def get(self) -> Callable[..., StoredMemory]: ...
    @property
    def delete(self) -> Callable[..., MemoryRef]: ...
    @property
    def ingest(self) -> Callable[..., IngestReport]: ...
    @property
    def stats(self) -> Callable[[], dict[str, Any]]: ...
    @property
    def reembed(self) -> Callable[..., ReembedReport]: ...
    @property
    def history(self) -> Callable[..., list[StoredMemory]]: ...
    @property
    def forget(self) -> Callable[..., Forgotten]: ...
    @property
    def reset(self) -> Callable[..., Forgotten]: ...
    @property
    def feedback(self) -> Callable[..., FeedbackRecord]: ...
    @property
    def feedback_records(self) -> Callable[..., list[FeedbackRecord]]: ...
    @property
    def delete_feedback(self) -> Callable[..., int]: ...


class _Listing(Protocol):
    """``list``, which :meth:`AsyncMethods.alist` pages (a name the class above cannot hold:
    it would shadow the builtin in its annotations)."""

    @property
    def list(self) -> Callable[..., Iterator[StoredMemory]]: ...


async def _in_thread(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    import asyncio  # on first use: synchronous callers never import asyncio

    return await asyncio.to_thread(fn, *args, **kwargs)


class AsyncMethods:
    """``aadd``, ``aupdate``, ``aget``, ``adelete``, ``aingest``, ``alist``, ``astats``,
    ``areembed``, ``ahistory``, ``aforget``, ``areset``, ``afeedback``, ``afeedback_records``
    and ``adelete_feedback`` of :class:`Memory`."""

    async def aadd(
        self: _Operations,
        text: str,
        *,
        namespace: str | None = None,
        memory_id: str | None = None,
        importance: float = 0.5,
        metadata: Mapping[str, Any] | None = None,
        gate: bool | None = None,
        thread: str | None = None,
        position: float | datetime | None = None,
        derived_from: str | None = None,
    ) -> AddResult:
        """:meth:`~rankseam.memory.Memory.add` for async code. The write gate, when asked,
        runs on the memory's own event-loop thread, exactly as for ``add`` (its
        ``timeout_s`` and failure policy hold the same)."""
        result: AddResult = await _in_thread(
            self.add,
            text,
            namespace=namespace,
            memory_id=memory_id,
            importance=importance,
            metadata=metadata,
            gate=gate,
            thread=thread,
            position=position,
            derived_from=derived_from,
        )
        return result

    async def aupdate(
        self: _Operations,
        memory_id: str,
        text: str,
        *,
        namespace: str | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        thread: str | None = None,
        position: float | datetime | None = None,
        derived_from: str | None = None,
    ) -> MemoryRef:
        """:meth:`~rankseam.memory.Memory.update` for async code."""
        ref: MemoryRef = await _in_thread(
            self.update,
            memory_id,
            text,
            namespace=namespace,
            importance=importance,
            metadata=metadata,
            thread=thread,
            position=position,
            derived_from=derived_from,
        )
        return ref

    async def aget(
        self: _Operations, memory_id_or_ref: str | MemoryRef, *, namespace: str | None = None
    ) -> StoredMemory:
        """:meth:`~rankseam.memory.Memory.get` for async code."""
        stored: StoredMemory = await _in_thread(self.get, memory_id_or_ref, namespace=namespace)
        return stored

    async def adelete(
        self: _Operations, memory_id: str, *, namespace: str | None = None
    ) -> MemoryRef:
        """:meth:`~rankseam.memory.Memory.delete` for async code."""
        ref: MemoryRef = await _in_thread(self.delete, memory_id, namespace=namespace)
        return ref

    async def aingest(
        self: _Operations,
        records: Iterable[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        batch_size: int = 500,
        progress: bool | Callable[[int], None] = False,
    ) -> IngestReport:
        """:meth:`~rankseam.memory.Memory.ingest` for async code. ``records`` is iterated and
        a ``progress`` callable called in the worker thread (a generator that reads a file is
        fine; one that awaits is not: collect it first)."""
        report: IngestReport = await _in_thread(
            self.ingest,
            records,
            namespace=namespace,
            batch_size=batch_size,
            progress=progress,
        )
        return report

    async def alist(
        self: _Listing,
        namespace: str | None = None,
        *,
        include_deleted: bool = False,
        where: Mapping[str, Any] | None = None,
        thread: str | None = None,
        since: Any = None,
        until: Any = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> builtins.list[StoredMemory]:
        """:meth:`~rankseam.memory.Memory.list` for async code, one page: the memories from
        ``offset`` on (0 = the first), at most ``limit`` of them (``None``: all, held in
        memory at once, so page a large namespace), read in one worker thread. The next
        page starts at ``offset + len(page)``; a short page is the last."""
        if not is_int(offset) or not 0 <= offset <= MAX_INT64:
            raise ValidationError(f"offset must be an integer in 0..{MAX_INT64}, got {offset!r}")
        if limit is not None and (not is_int(limit) or not 1 <= limit <= MAX_INT64):
            raise ValidationError(
                f"limit must be None or an integer in 1..{MAX_INT64}, got {limit!r}"
            )
        stop = None if limit is None else min(offset + limit, sys.maxsize)
        scope = {"where": where, "thread": thread, "since": since, "until": until}

        def page() -> builtins.list[StoredMemory]:
            stream = self.list(namespace, include_deleted=include_deleted, **scope)
            try:
                return builtins.list(islice(stream, min(offset, sys.maxsize), stop))
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()  # a page that stops early releases the store's cursor now

        memories: builtins.list[StoredMemory] = await _in_thread(page)
        return memories

    async def astats(self: _Operations) -> dict[str, Any]:
        """:meth:`~rankseam.memory.Memory.stats` for async code."""
        stats: dict[str, Any] = await _in_thread(self.stats)
        return stats

    async def areembed(
        self: _Operations,
        embedder: str | Embedder | None = None,
        *,
        batch_size: int = 500,
        progress: bool | Callable[[ReembedProgress], None] = False,
        max_memories: int | None = None,
        switch: bool = False,
    ) -> ReembedReport:
        """:meth:`~rankseam.memory.Memory.reembed` for async code: the passes run in a worker
        thread, a ``progress`` callable is called there (cancelling the wait does not stop
        the batch in hand; what is stored stays, and a later call resumes)."""
        report: ReembedReport = await _in_thread(
            self.reembed,
            embedder,
            batch_size=batch_size,
            progress=progress,
            max_memories=max_memories,
            switch=switch,
        )
        return report

    async def ahistory(
        self: _Operations, memory_id: str, *, namespace: str | None = None
    ) -> list[StoredMemory]:
        """:meth:`~rankseam.memory.Memory.history` for async code."""
        revisions: list[StoredMemory] = await _in_thread(
            self.history, memory_id, namespace=namespace
        )
        return revisions

    async def aforget(
        self: _Operations, memory_id: str, *, namespace: str | None = None
    ) -> Forgotten:
        """:meth:`~rankseam.memory.Memory.forget` for async code (cancelling the wait does
        not stop the hard delete once its thread has it)."""
        done: Forgotten = await _in_thread(self.forget, memory_id, namespace=namespace)
        return done

    async def areset(self: _Operations, namespace: str, *, confirm: bool = False) -> Forgotten:
        """:meth:`~rankseam.memory.Memory.reset` for async code (refused without
        ``confirm=True``, as ``reset``)."""
        done: Forgotten = await _in_thread(self.reset, namespace, confirm=confirm)
        return done

    async def afeedback(
        self: _Operations,
        result: SearchResult,
        used: Iterable[str] = (),
        *,
        note: str | None = None,
    ) -> FeedbackRecord:
        """:meth:`~rankseam.memory.Memory.feedback` for async code."""
        record: FeedbackRecord = await _in_thread(self.feedback, result, used, note=note)
        return record

    async def afeedback_records(
        self: _Operations,
        namespace: str | None = None,
        *,
        since: object = None,
        limit: int | None = None,
        all_namespaces: bool = False,
    ) -> list[FeedbackRecord]:
        """:meth:`~rankseam.memory.Memory.feedback_records` for async code."""
        records: list[FeedbackRecord] = await _in_thread(
            self.feedback_records,
            namespace,
            since=since,
            limit=limit,
            all_namespaces=all_namespaces,
        )
        return records

    async def adelete_feedback(
        self: _Operations,
        feedback_ids: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        confirm: bool = False,
    ) -> int:
        """:meth:`~rankseam.memory.Memory.delete_feedback` for async code (refused without
        ``confirm=True`` for a namespace or all, as ``delete_feedback``)."""
        count: int = await _in_thread(
            self.delete_feedback,
            feedback_ids,
            namespace=namespace,
            all_namespaces=all_namespaces,
            confirm=confirm,
        )
        return count
