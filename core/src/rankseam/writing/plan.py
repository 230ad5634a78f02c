"""How every store is written, decided once, on the host side: a write reads the heads of its
memories, plans each record over its memory's head (``plan_add``, ``plan_update``,
``plan_write``) and applies the plans through the store's
:class:`~rankseam.store.contract.BatchWriter`, in ONE transaction (``Store.batch``). A store
only applies planned writes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rankseam.store.contract import BatchWriter, Store
from rankseam.store.records import (
    BatchCounts,
    PreparedRecord,
    WritePlan,
    live_head,
    plan_add,
    plan_update,
    plan_write,
)
from rankseam.store.rows import Added, MemoryHead, MemoryKey
from rankseam.types import MemoryRef

__all__ = ["add_memory", "delete_memory", "update_memory", "write_batch"]


def _head(writer: BatchWriter, namespace: str, memory_id: str) -> MemoryHead | None:
    heads = writer.heads([MemoryKey(namespace, memory_id)])
    return heads[0] if heads else None


def add_memory(
    store: Store,
    record: PreparedRecord,
    *,
    space: str | None,
    same_is_ok: bool = False,
    written: list[int] | None = None,
) -> Added:
    """Add a new memory: revision 1, or the next revision of a tombstoned id (see
    ``plan_add``). ``space``: the space of ``record.vector``. ``written``, when given,
    receives the new revision's row key (nothing when nothing was written)."""
    with store.batch([record.namespace]) as writer:
        plan = plan_add(
            record, _head(writer, record.namespace, record.memory_id), same_is_ok=same_is_ok
        )
        ref = MemoryRef(record.namespace, record.memory_id, plan.revision)
        if plan.change == "unchanged":
            return Added(ref, written=False)
        key = writer.write(record, plan, space=space, vector=record.vector)
    if written is not None:
        written.append(key)
    return Added(ref, written=True)


def update_memory(
    store: Store, record: PreparedRecord, *, space: str | None, written: list[int] | None = None
) -> MemoryRef:
    """Write the next revision of a live memory, retiring the previous head (``plan_update``).
    ``written``, when given, receives the new revision's row key."""
    with store.batch([record.namespace]) as writer:
        plan = plan_update(record, _head(writer, record.namespace, record.memory_id))
        head = _apply(writer, record, plan, space, record.vector)
    if written is not None:
        written.append(head.key)
    return MemoryRef(record.namespace, record.memory_id, plan.revision)


def delete_memory(store: Store, namespace: str, memory_id: str) -> MemoryRef:
    """Tombstone a memory: its head leaves search, every revision stays readable; the head's
    ref. ``MemoryNotFoundError`` for an unknown or already deleted id."""
    with store.batch([namespace]) as writer:
        head = live_head(_head(writer, namespace, memory_id), namespace, memory_id)
        writer.retire(namespace, head.key)
        writer.tombstone(namespace, memory_id)
    return MemoryRef(namespace, memory_id, head.revision)


def write_batch(
    store: Store,
    records: Sequence[PreparedRecord],
    *,
    space: str | None,
    vectors: np.ndarray | None = None,
    written: list[tuple[int, int]] | None = None,
) -> BatchCounts:
    """Write ``records`` in ONE transaction, in order (an id may occur several times). A new id
    is added (revision 1); a known id gets the next revision when its content hash,
    importance or metadata changed or it was deleted, else it is counted ``unchanged``
    (``plan_write``). ``vectors``: one row per record (else each record's ``vector``), stored
    in ``space``. ``written``, when given, receives ``(record index, row key)`` of every
    revision written (after the transaction committed)."""
    counts = {"added": 0, "updated": 0, "unchanged": 0}
    new_rows: list[tuple[int, int]] = []
    refs: list[MemoryRef] = []
    if not records:
        return BatchCounts()
    with store.batch([r.namespace for r in records]) as writer:
        keys = list(dict.fromkeys(MemoryKey(r.namespace, r.memory_id) for r in records))
        heads = {MemoryKey(h.namespace, h.memory_id): h for h in writer.heads(keys)}
        for i, rec in enumerate(records):
            key = MemoryKey(rec.namespace, rec.memory_id)
            plan = plan_write(rec, heads.get(key))
            counts[plan.change] += 1
            refs.append(MemoryRef(rec.namespace, rec.memory_id, plan.revision))
            if plan.change != "unchanged":
                vector = rec.vector if vectors is None else vectors[i]
                heads[key] = _apply(writer, rec, plan, space, vector)
                new_rows.append((i, heads[key].key))
    if written is not None:
        written.extend(new_rows)
    return BatchCounts(counts["added"], counts["updated"], counts["unchanged"], tuple(refs))


def _apply(
    writer: BatchWriter,
    record: PreparedRecord,
    plan: WritePlan,
    space: str | None,
    vector: np.ndarray | None,
) -> MemoryHead:
    """Retire what ``plan`` retires and write its revision; the memory's new head."""
    if plan.retire is not None:
        writer.retire(record.namespace, plan.retire)
    key = writer.write(record, plan, space=space, vector=vector)
    return MemoryHead(
        record.namespace,
        record.memory_id,
        key,
        plan.revision,
        False,
        record.content_hash,
        plan.importance,
        plan.metadata,
        plan.thread,
        plan.position,
        plan.derived_from,
    )
