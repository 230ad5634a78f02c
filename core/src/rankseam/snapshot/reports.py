"""What each snapshot operation reports (frozen, JSON-ready with ``to_dict``)."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["ExportReport", "ImportReport", "VerifyReport"]


def _rate(count: int, seconds: float) -> float | None:
    return round(count / seconds, 1) if seconds > 0 else None


class _Throughput:
    """``memories_per_second`` of a report that counts memories over seconds."""

    memories: int
    seconds: float

    @property
    def memories_per_second(self) -> float | None:
        return _rate(self.memories, self.seconds)


@attrs.frozen
class ExportReport(_Throughput):
    path: str
    snapshot_id: str
    gzip: bool
    memories: int
    revisions: int
    vectors: int
    bytes: int
    seconds: float
    #: Feedback records written (``include_feedback=True``); None: feedback was left out.
    feedback: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "snapshot_id": self.snapshot_id,
            "gzip": self.gzip,
            "memories": self.memories,
            "revisions": self.revisions,
            "vectors": self.vectors,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "memories_per_second": self.memories_per_second,
            "feedback": self.feedback,
        }


@attrs.frozen
class VerifyReport:
    path: str
    snapshot_id: str
    format_version: int
    gzip: bool
    tokenizer: str
    namespaces: tuple[str, ...]
    memories: int
    deleted: int
    revisions: int
    vectors: int
    spaces: tuple[str, ...]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "path": self.path,
            "snapshot_id": self.snapshot_id,
            "format_version": self.format_version,
            "gzip": self.gzip,
            "tokenizer": self.tokenizer,
            "namespaces": list(self.namespaces),
            "memories": self.memories,
            "deleted": self.deleted,
            "revisions": self.revisions,
            "vectors": self.vectors,
            "spaces": list(self.spaces),
            "seconds": round(self.seconds, 3),
        }


@attrs.frozen
class ImportReport(_Throughput):
    """What an import did. Merge counters: ``added`` (new memory), ``updated`` (the snapshot
    held newer revisions of a memory whose history matches), ``unchanged`` (identical),
    ``kept_newer`` (the target's head revision is as new or newer: left alone) and ``conflicts``
    (the histories differ at a revision both hold: the target's is kept)."""

    path: str
    snapshot_id: str
    merge: bool
    memories: int
    added: int
    updated: int
    unchanged: int
    kept_newer: int
    conflicts: int
    revisions_written: int
    vectors_written: int
    seconds: float
    notes: tuple[str, ...] = ()
    #: Feedback records the snapshot held (None: none) and how many were written.
    feedback: int | None = None
    feedback_written: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "snapshot_id": self.snapshot_id,
            "merge": self.merge,
            "memories": self.memories,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "kept_newer": self.kept_newer,
            "conflicts": self.conflicts,
            "revisions_written": self.revisions_written,
            "vectors_written": self.vectors_written,
            "seconds": round(self.seconds, 3),
            "memories_per_second": self.memories_per_second,
            "notes": list(self.notes),
            "feedback": self.feedback,
            "feedback_written": self.feedback_written,
        }
