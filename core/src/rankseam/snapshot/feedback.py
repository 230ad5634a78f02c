"""Feedback in snapshots: left out unless asked (``export_snapshot(...,
include_feedback=True)``, ``rankseam export --include-feedback``), then written as
``feedback.jsonl`` beside the memories, one :meth:`~rankseam.types.FeedbackRecord.to_dict`
per line, oldest first, and named in the manifest's ``feedback`` entry (``path``,
``records``, ``bytes``, ``sha256``). An import writes the records it holds into a store that
keeps feedback (docs/snapshots.md, "Feedback").

Feedback is not memory state, so the snapshot id (a name of the memories) does not cover it:
the entry's own checksum does. A snapshot without the entry (every snapshot written before
feedback existed, and every export that did not ask) holds no feedback. The file is read and
checked whole before an import writes anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rankseam.checks import is_int, parse_json
from rankseam.snapshot.format import MAX_LINE_BYTES, SnapshotError, file_sha256
from rankseam.store.contract import Store
from rankseam.store.feedback import FeedbackQuery, feedback_store
from rankseam.types import FeedbackRecord

__all__ = ["FEEDBACK_PATH", "read_feedback", "write_feedback"]

#: The feedback file's name in a snapshot folder.
FEEDBACK_PATH = "feedback.jsonl"


def write_feedback(store: Store, folder: Path) -> dict[str, Any]:
    """Write every feedback record of ``store`` into ``folder``; the manifest's entry."""
    records = feedback_store(store).feedback_records(FeedbackQuery())
    path = folder / FEEDBACK_PATH
    with path.open("wb") as out:
        for record in records:
            out.write(_line(record))
    sha, size = file_sha256(path)
    return {"path": FEEDBACK_PATH, "records": len(records), "bytes": size, "sha256": sha}


def _line(record: FeedbackRecord) -> bytes:
    return (json.dumps(record.to_dict(), sort_keys=True, ensure_ascii=False) + "\n").encode()


def _fail(message: str) -> SnapshotError:
    return SnapshotError(
        f"the snapshot's feedback is damaged: {message}; export the store again with its "
        "feedback (or without it)",
        reason="feedback",
    )


def read_feedback(folder: Path, manifest: Mapping[str, Any]) -> list[FeedbackRecord] | None:
    """The feedback records a snapshot holds, checked whole (None: it holds none)."""
    entry = manifest.get("feedback")
    if entry is None:
        return None
    if (
        not isinstance(entry, dict)
        or entry.get("path") != FEEDBACK_PATH  # never follow a path out of the folder
        or not all(is_int(entry.get(key)) and entry[key] >= 0 for key in ("records", "bytes"))
        or not isinstance(entry.get("sha256"), str)
    ):
        raise _fail(f"the manifest's feedback entry {entry!r} is not one an export writes")
    path = folder / FEEDBACK_PATH
    if not path.is_file():
        raise _fail(f"{FEEDBACK_PATH} is missing")
    sha, size = file_sha256(path)
    if size != entry["bytes"] or sha != entry["sha256"]:
        raise _fail(f"{FEEDBACK_PATH} does not match its checksum ({size} bytes)")
    records: list[FeedbackRecord] = []
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if len(line) > MAX_LINE_BYTES:
                raise _fail(f"line {number} is longer than {MAX_LINE_BYTES} bytes")
            try:
                records.append(FeedbackRecord.from_dict(parse_json(line)))
            except (ValueError, AttributeError) as exc:
                raise _fail(f"line {number}: {exc}") from None
    if len(records) != entry["records"]:
        raise _fail(f"it holds {len(records)} records, the manifest says {entry['records']}")
    return records
