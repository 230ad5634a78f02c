"""Feedback on search results: :meth:`Memory.feedback` records which hits of a result an
application used; :meth:`Memory.feedback_records` lists them, :meth:`Memory.export_feedback`
writes them as JSON lines and :meth:`Memory.delete_feedback` removes them (docs/store.md,
"Feedback"). Their async twins are in :mod:`rankseam.memory_async`.

Feedback lives in a table of its own beside the memories (the store's
:class:`~rankseam.store.feedback.FeedbackStore` capability): never memory state, never
searched, bounded per namespace (``[feedback] max_records``, default 10,000; a write past it
drops the oldest and says so in a log line), and left out of snapshots unless asked.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

from rankseam.checks import is_int, is_real
from rankseam.errors import ValidationError
from rankseam.store.feedback import FeedbackQuery, FeedbackStore, feedback_store
from rankseam.types import FeedbackHit, FeedbackRecord, Hit, MemoryRef, SearchResult

if TYPE_CHECKING:
    from rankseam.config import Config
    from rankseam.store.contract import Store

__all__ = ["FeedbackMethods", "feedback_record", "when"]

log = logging.getLogger("rankseam.feedback")

#: The longest note a feedback record keeps, in characters.
MAX_NOTE_CHARS = 4096


def _used_id(item: object) -> str:
    """A memory id from what ``used`` may hold: an id, a :class:`MemoryRef` or a :class:`Hit`."""
    if isinstance(item, Hit):
        return item.ref.memory_id
    if isinstance(item, MemoryRef):
        return item.memory_id
    if isinstance(item, str):
        return item
    raise ValidationError(
        f"feedback(used=...) takes memory ids (or the hits or refs of the result), got {item!r}"
    )


def feedback_record(
    result: SearchResult, used: Iterable[object], note: str | None, *, now: float | None = None
) -> FeedbackRecord:
    """The record of feedback on ``result``: its query, namespace, filter, cut-off and
    policy, the hits it showed with their ranks, and the ids ``used`` (each one of the hits,
    none twice). A :class:`ValidationError` naming what is wrong."""
    if not isinstance(result, SearchResult):
        raise ValidationError(
            "feedback() takes the SearchResult that Memory.search returned, got "
            f"{type(result).__name__}"
        )
    if isinstance(used, str | bytes):
        raise ValidationError(
            f"feedback(used=...) takes a list of memory ids, got the string {used!r}; "
            f"write used=[{used!r}]"
        )
    ids = [_used_id(item) for item in used]
    if len(ids) > len(result.hits):
        raise ValidationError(
            f"feedback(used=...) names {len(ids)} memories but the result holds "
            f"{len(result.hits)} hits: name at most the hits the result showed"
        )
    shown = {hit.ref.memory_id for hit in result.hits}
    for memory_id in ids:
        if memory_id not in shown:
            raise ValidationError(
                f"feedback(used=...) names {memory_id!r}, which is not among the result's hits "
                f"({sorted(shown)}); name only ids the result showed"
            )
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise ValidationError(f"feedback(used=...) names {twice} more than once; name each once")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS):
        raise ValidationError(
            f"feedback(note=...) must be a string of at most {MAX_NOTE_CHARS} characters, "
            f"got {type(note).__name__}" + (f" of {len(note)}" if isinstance(note, str) else "")
        )
    trace = result.trace
    return FeedbackRecord(
        feedback_id=uuid.uuid4().hex,
        namespace=trace.namespace,
        query=trace.query,
        shown=[
            FeedbackHit(rank, hit.ref.memory_id, hit.ref.revision, hit.score)
            for rank, hit in enumerate(result.hits, start=1)
        ],
        used=ids,
        created_at=time.time() if now is None else now,
        where=trace.where,
        min_score=trace.min_score,
        policy_id=None if trace.rerank is None else trace.rerank.policy_id,
        note=note,
    )


def when(value: object, name: str) -> float | None:
    """POSIX seconds of ``value`` (a number, a datetime or an ISO 8601 string; None: None)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if is_real(value) and not isinstance(value, bool) and math.isfinite(float(value)):  # type: ignore[arg-type]
        return float(value)  # type: ignore[arg-type]
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            pass
    raise ValidationError(
        f"{name} must be a datetime, POSIX seconds or an ISO 8601 string such as "
        f"'2026-12-07T18:00:00+00:00', got {value!r}"
    )


def _limit(value: object) -> int | None:
    if value is None:
        return None
    if not is_int(value) or isinstance(value, bool) or value < 1:  # type: ignore[operator]
        raise ValidationError(f"limit must be a positive whole number or None, got {value!r}")
    return int(value)  # type: ignore[call-overload]


class FeedbackMethods:
    """``feedback``, ``feedback_records``, ``export_feedback`` and ``delete_feedback`` of
    :class:`~rankseam.memory.Memory`."""

    _store: Store
    _config: Config

    if TYPE_CHECKING:

        def _ns(self, namespace: str | None) -> str: ...

    @property
    def _feedback(self) -> FeedbackStore:
        return feedback_store(self._store)

    def _feedback_scope(self, namespace: str | None, all_namespaces: bool) -> str | None:
        """The namespace a feedback call means (None: every namespace)."""
        if all_namespaces is True:
            if namespace is not None:
                raise ValidationError("name a namespace or pass all_namespaces=True, not both")
            return None
        return self._ns(namespace)

    def feedback(
        self, result: SearchResult, used: Iterable[str] = (), *, note: str | None = None
    ) -> FeedbackRecord:
        """Record which hits of ``result`` (what :meth:`search` returned) the application
        used: their memory ids (or the hits themselves), each one of the result's hits; none
        (the default) says none was. The record keeps the search's query, namespace, filter
        (``where`` with its thread and time scope), cut-off and reranker policy, the hits
        shown in rank order, the ids used and ``note``. It is stored in a table of its own
        beside the memories, never as memory state (no search, history or snapshot sees it
        unless asked), and each namespace keeps its newest ``[feedback] max_records``
        (default 10,000): a write past the bound drops the oldest and logs it
        (docs/store.md, "Feedback"). Returns the stored record."""
        record = feedback_record(result, used, note)
        store = self._feedback
        cap = self._config.feedback_max_records
        done = store.write_feedback([record], cap=cap)
        _log_dropped(done.dropped, cap)
        return record

    def feedback_records(
        self,
        namespace: str | None = None,
        *,
        since: object = None,
        limit: int | None = None,
        all_namespaces: bool = False,
    ) -> list[FeedbackRecord]:
        """The feedback recorded in ``namespace`` (default: this Memory's), or in every
        namespace with ``all_namespaces=True``, oldest first; ``since``: created at or after
        (a datetime, POSIX seconds or an ISO 8601 string); ``limit``: at most that many (the
        oldest of them)."""
        query = FeedbackQuery(
            namespace=self._feedback_scope(namespace, all_namespaces),
            since=when(since, "since"),
            limit=_limit(limit),
        )
        return self._feedback.feedback_records(query)

    def export_feedback(
        self,
        out: str | os.PathLike[str] | IO[str],
        namespace: str | None = None,
        *,
        since: object = None,
        all_namespaces: bool = False,
    ) -> int:
        """Write the feedback :meth:`feedback_records` lists as JSON lines (one
        :meth:`~rankseam.types.FeedbackRecord.to_dict` per line) into the file ``out`` (a
        path, replaced, or an open text file); how many records were written."""
        records = self.feedback_records(namespace, since=since, all_namespaces=all_namespaces)
        if isinstance(out, str | os.PathLike):
            with open(out, "w", encoding="utf-8") as handle:
                return _write_lines(handle, records)
        return _write_lines(out, records)

    def delete_feedback(
        self,
        feedback_ids: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        confirm: bool = False,
    ) -> int:
        """Delete feedback records: those of ``feedback_ids`` (ids not held are skipped), or
        every record of ``namespace`` (named explicitly), or of every namespace
        (``all_namespaces=True``). Deleting a namespace's or all feedback is refused unless
        ``confirm=True`` (it cannot be undone). Memories are never touched. How many records
        went."""
        if feedback_ids is not None:
            if namespace is not None or all_namespaces:
                raise ValidationError(
                    "delete_feedback() takes feedback ids, or a namespace, or "
                    "all_namespaces=True: one of them"
                )
            if isinstance(feedback_ids, str) or not all(isinstance(i, str) for i in feedback_ids):
                raise ValidationError(
                    f"delete_feedback(feedback_ids=...) takes a list of ids, got {feedback_ids!r}"
                )
            return self._feedback.delete_feedback(FeedbackQuery(feedback_ids=feedback_ids))
        if namespace is None and not all_namespaces:
            raise ValidationError(
                "delete_feedback() needs the records' ids, a namespace (named explicitly: "
                "there is no default) or all_namespaces=True"
            )
        ns = self._feedback_scope(namespace, all_namespaces)
        if confirm is not True:
            what = "every namespace" if ns is None else f"namespace {ns!r}"
            call = "all_namespaces=True" if ns is None else f"namespace={ns!r}"
            raise ValidationError(
                f"delete_feedback() deletes the feedback of {what} for good (it cannot be "
                f"undone); call delete_feedback({call}, confirm=True) to do it"
            )
        return self._feedback.delete_feedback(FeedbackQuery(namespace=ns))


def _write_lines(handle: IO[str], records: Sequence[FeedbackRecord]) -> int:
    for record in records:
        handle.write(json.dumps(record.to_dict(), sort_keys=True, ensure_ascii=False) + "\n")
    return len(records)


def _log_dropped(dropped: Any, cap: int) -> None:
    for namespace, count in sorted(dict(dropped).items()):
        if count:
            log.info(
                "feedback of namespace %r is at its bound of %d records ([feedback] "
                "max_records): dropped the %d oldest",
                namespace,
                cap,
                count,
                extra={"namespace": namespace, "dropped": count, "cap": cap},
            )
