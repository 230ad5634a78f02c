"""A memory's history, and the hard deletes: :meth:`Memory.history`, :meth:`Memory.forget`
and :meth:`Memory.reset` (docs/store.md, "History" and "Forgetting"). Their async twins are
in :mod:`rankseam.memory_async`.

``delete`` (a tombstone: search stops finding the memory, every revision stays readable) and
``forget`` (a hard delete: every revision's text, metadata and vectors leave the store, its
indexes and later snapshots; the id and the time stay) are two different verbs on purpose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rankseam.errors import ValidationError
from rankseam.store.records import (
    MemoryNotFoundError,
    StoredMemory,
    check_memory_id,
    check_namespace,
)
from rankseam.store.rows import Forgotten

if TYPE_CHECKING:
    from rankseam.store.contract import Store

__all__ = ["Forgotten", "LifecycleMethods"]


class LifecycleMethods:
    """``history``, ``forget`` and ``reset`` of :class:`~rankseam.memory.Memory`."""

    _store: Store

    if TYPE_CHECKING:

        def _ns(self, namespace: str | None) -> str: ...

    def history(self, memory_id: str, *, namespace: str | None = None) -> list[StoredMemory]:
        """Every revision of a memory, oldest first (revision 1 first), each as it was
        written, with ``deleted`` set on each when the memory is tombstoned. A
        :class:`~rankseam.memory.MemoryNotFoundError` when there is no such memory, or when
        it was forgotten (the message says when)."""
        return self._store.history(self._ns(namespace), check_memory_id(memory_id))

    def forget(self, memory_id: str, *, namespace: str | None = None) -> Forgotten:
        """Hard-delete a memory: the text, metadata and vectors of every revision leave the
        store, its indexes (full text, metadata filters, vectors, the ANN index) and every
        later snapshot, in one transaction. What stays is the id and the time it was
        forgotten: :meth:`get` and :meth:`history` then say so, and a later :meth:`add` of
        the id stores a new memory from revision 1. Unlike :meth:`delete` (a tombstone that
        keeps every revision readable), it cannot be undone. A tombstoned memory can be
        forgotten; an unknown or already forgotten one raises
        :class:`~rankseam.memory.MemoryNotFoundError`."""
        ns, mid = self._ns(namespace), check_memory_id(memory_id)
        done = self._store.forget(ns, [mid])
        if not done.memories:
            self._store.get(ns, mid)  # raises: unknown, or forgotten (and when)
            raise MemoryNotFoundError.no_memory(ns, mid)  # pragma: no cover - a race
        return done

    def reset(self, namespace: str, *, confirm: bool = False) -> Forgotten:
        """Forget every memory of ``namespace`` (named explicitly: there is no default), as
        :meth:`forget` does for one, in one transaction. Refused unless ``confirm=True``:
        nothing of it can be undone. Returns what was removed (0 memories for an empty or
        unknown namespace)."""
        ns = check_namespace(namespace)
        if confirm is not True:
            raise ValidationError(
                f"reset({ns!r}) forgets every memory of namespace {ns!r} for good (text, "
                "metadata, vectors and history; it cannot be undone); call "
                f"reset({ns!r}, confirm=True) to do it"
            )
        return self._store.reset(ns)
