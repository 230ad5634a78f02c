"""Import: a checked snapshot written into a store in ONE write transaction, either into an
empty store (an exact clone) or merged into one that holds memories (never overwriting a
revision it holds)."""

from __future__ import annotations

import logging
import os
import time

import attrs

from rankseam.embedding import EmbedderDescriptor
from rankseam.snapshot.feedback import read_feedback
from rankseam.snapshot.format import SnapshotError
from rankseam.snapshot.reports import ImportReport
from rankseam.snapshot.verify import RecordReader, open_snapshot
from rankseam.store.contract import BulkWriter, Store
from rankseam.store.feedback import DEFAULT_FEEDBACK_CAP, FeedbackStore
from rankseam.store.records import MemoryRows
from rankseam.store.rows import RevisionDigest

__all__ = ["import_snapshot"]

log = logging.getLogger("rankseam.snapshot")


@attrs.define
class _MergeCounts:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    kept_newer: int = 0
    conflicts: int = 0


def _merge_one(bulk: BulkWriter, mem: MemoryRows, n: _MergeCounts) -> None:
    """Merge one memory; never overwrite a revision the target holds."""
    head = bulk.head(mem.namespace, mem.memory_id)
    if head is None:
        bulk.append(mem, mem.revisions)
        n.added += 1
        return
    head_rid, head_rev, head_deleted = head.key, head.revision, head.deleted
    theirs = bulk.history(mem.namespace, mem.memory_id, min(head_rev, len(mem.revisions)))
    ours = [
        RevisionDigest(
            r.revision,
            r.content_hash,
            r.importance,
            r.metadata,
            r.thread,
            r.position,
            r.derived_from,
        )
        for r in mem.revisions
    ]
    if theirs != ours[: len(theirs)]:
        n.conflicts += 1
        return
    if head_rev >= len(mem.revisions):
        if head_rev == len(mem.revisions) and head_deleted == mem.deleted:
            n.unchanged += 1
        else:
            n.kept_newer += 1
        return
    if not head_deleted:  # retire the target's live head: the snapshot's is newer
        bulk.retire(head_rid)
    bulk.append(mem, mem.revisions[head_rev:])
    n.updated += 1


def import_snapshot(
    store: Store,
    path: str | os.PathLike[str],
    *,
    merge: bool = False,
    active_space: EmbedderDescriptor | None = None,
    feedback_cap: int = DEFAULT_FEEDBACK_CAP,
) -> ImportReport:
    """Hydrate ``store`` from a snapshot in ONE write transaction. The store must hold no
    memories unless ``merge=True``; a merge adds what the store lacks and never overwrites a
    revision it holds. Any problem raises :class:`SnapshotError` and leaves the store exactly as
    it was. ``active_space``: the embedder space searches use; the report notes when the
    snapshot holds no vectors of it. Feedback the snapshot holds (:mod:`.feedback`) is
    checked before anything is written and written after the memories, in a transaction of
    its own, each namespace kept within ``feedback_cap`` records."""
    started = time.perf_counter()
    snap = open_snapshot(path)
    tokenizer = snap.manifest["store"]["tokenizer"]
    # snapshots written before stores were plugins carry no kind: they come from SQLite
    kind = snap.manifest["store"].get("kind", "sqlite")
    if kind == store.kind and tokenizer != store.tokenizer:
        raise SnapshotError(
            f"the snapshot comes from a store with FTS tokenizer {tokenizer!r}, the target uses "
            f"{store.tokenizer!r}; lexical scores would differ: import into a store created "
            f"with tokenizer {tokenizer!r}",
            reason="tokenizer",
        )
    feedback = read_feedback(snap.folder, snap.manifest)
    counts = _MergeCounts()
    reader = RecordReader(snap)
    with store.bulk_write() as bulk:  # one transaction: all or nothing
        held = bulk.counts()
        existing = held.memories
        if (held.memories or held.revisions) and not merge:
            raise SnapshotError(
                f"the target store already holds {existing} memories; import into a new "
                "database (--db NEW), or merge into this one (--merge / merge=True)",
                reason="target_not_empty",
            )
        for key in sorted(snap.spaces):
            bulk.register_space(snap.spaces[key])
        for mem in reader:
            if merge:
                _merge_one(bulk, mem, counts)
            else:
                bulk.insert(mem)
        reader.finish()
    if not merge:
        counts.added = reader.memories
    notes = []
    feedback_written = 0
    if feedback and isinstance(store, FeedbackStore):
        feedback_written = store.write_feedback(feedback, cap=feedback_cap).written
    elif feedback:
        notes.append(
            f"the snapshot holds {len(feedback)} feedback records; this {store.kind!r} store "
            "keeps no feedback, so they were not imported"
        )
    if kind != store.kind:
        notes.append(
            f"the snapshot comes from a {kind!r} store, this is a {store.kind!r} store: every id, "
            "revision, text and vector is kept; lexical scores follow this store's analysis"
        )
    if active_space is not None and reader.memories and active_space.key not in snap.spaces:
        notes.append(
            f"the snapshot holds no vectors of the active embedder space {active_space.key!r}; "
            "run `rankseam reembed` so that vector search covers the imported memories"
        )
    report = ImportReport(
        path=str(snap.folder),
        snapshot_id=snap.snapshot_id,
        merge=merge,
        memories=reader.memories,
        added=counts.added,
        updated=counts.updated,
        unchanged=counts.unchanged,
        kept_newer=counts.kept_newer,
        conflicts=counts.conflicts,
        revisions_written=bulk.revisions_written,
        vectors_written=bulk.vectors_written,
        seconds=time.perf_counter() - started,
        notes=tuple(notes),
        feedback=None if feedback is None else len(feedback),
        feedback_written=feedback_written,
    )
    log.info(
        "snapshot imported",
        extra={"event": "snapshot.import", "memories": report.memories, "merge": merge},
    )
    return report
