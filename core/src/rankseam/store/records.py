"""Value objects and input validation of the embedded store."""

from __future__ import annotations

import hashlib
import json
import math
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import attrs
import numpy as np

from rankseam.checks import is_real
from rankseam.errors import ValidationError
from rankseam.store.rows import MemoryHead
from rankseam.types import MemoryRef, frozen_mapping, prechecked

__all__ = [
    "MAX_EXACT_POSITION",
    "MAX_ID_CHARS",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_TEXT_CHARS",
    "BatchCounts",
    "MemoryNotFoundError",
    "MemoryRows",
    "PreparedRecord",
    "RevisionRow",
    "StoredMemory",
    "Structure",
    "WritePlan",
    "check_created_at",
    "check_derived_from",
    "check_importance",
    "check_memory_id",
    "check_namespace",
    "check_position",
    "check_text",
    "check_thread",
    "check_unicode",
    "content_hash",
    "encode_metadata",
    "live_head",
    "new_memory_id",
    "placed",
    "plan_add",
    "plan_update",
    "plan_write",
    "prepare",
]

MAX_TEXT_CHARS = 1_000_000
MAX_ID_CHARS = 512
#: Largest metadata of one revision: its canonical JSON in UTF-8 bytes.
MAX_METADATA_BYTES = 64 * 1024
#: Deepest nesting of metadata (a flat object is 1 level).
MAX_METADATA_DEPTH = 32


#: The metadata of a revision stored without any: one read-only empty mapping for them all.
_NO_METADATA: Mapping[str, Any] = MappingProxyType({})


@attrs.frozen
class StoredMemory:
    """One stored revision of a memory, exactly as it was written.

    ``deleted`` is True when the memory has been deleted (tombstoned); its revisions stay
    readable by their :class:`~rankseam.types.MemoryRef`.

    The structure of a conversation (docs/store.md, "Threads, positions and sources"):
    ``thread`` is the conversation, session or run the memory belongs to, ``position`` its
    place in that thread (a sequence number or a POSIX timestamp, as a float) and
    ``derived_from`` the id of the memory (same namespace) it was derived from; each is
    ``None`` when not given.
    """

    ref: MemoryRef
    text: str
    importance: float
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=frozen_mapping, eq=False)
    created_at: float = 0.0
    content_hash: str = ""
    deleted: bool = False
    thread: str | None = None
    position: float | None = None
    derived_from: str | None = None

    #: The columns of a revision ``r`` that :meth:`from_row` reads, in its order (a store's
    #: queries select them, then the memory's ``deleted`` flag where they join it).
    COLUMNS: ClassVar[str] = (
        "r.rid, r.namespace, r.memory_id, r.revision, r.text, r.importance, r.metadata, "
        "r.created_at, r.content_hash, r.thread, r.position, r.derived_from"
    )

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> StoredMemory:
        """A stored revision from a row of :attr:`COLUMNS` (row key, namespace, memory id,
        revision, text, importance, metadata JSON, created at, content hash, thread,
        position, derived from), optionally followed by the memory's ``deleted`` flag
        (absent: not deleted)."""
        fields = row if len(row) == 12 else row[:12]  # a search's row has no flag: no copy
        _key, ns, mid, rev, text, importance, meta, created, chash, thread, pos, source = fields
        # a store's row holds what the store checked when it wrote it: built without
        # re-checking (a search reads dozens per query)
        return prechecked(
            cls,
            prechecked(MemoryRef, ns, mid, int(rev)),
            text,
            float(importance),
            _NO_METADATA if meta == "{}" else MappingProxyType(json.loads(meta)),
            float(created),
            chash,
            len(row) > 12 and bool(row[12]),
            thread,
            None if pos is None else float(pos),
            source,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.ref.to_dict(),
            "text": self.text,
            "importance": self.importance,
            "metadata": dict(self.metadata),
            "created_at": self.created_at,
            "content_hash": self.content_hash,
            "deleted": self.deleted,
            "thread": self.thread,
            "position": self.position,
            "derived_from": self.derived_from,
        }


@attrs.frozen
class PreparedRecord:
    """One checked record on its way into a store (text checked, metadata encoded, embedded).

    ``importance`` and ``metadata`` (canonical JSON) are ``None`` when the caller left them
    out: a new memory then gets 0.5 and ``"{}"``, a new revision keeps its predecessor's.
    ``vector`` is the record's vector in the space the write names (``None``: no vector).
    ``thread``, ``position`` and ``derived_from`` are ``None`` when left out: a new memory
    then has none, a new revision keeps its predecessor's.
    """

    namespace: str
    memory_id: str
    text: str
    importance: float | None
    metadata: str | None  # JSON; None keeps the previous revision's metadata
    created_at: float
    content_hash: str
    vector: np.ndarray | None = attrs.field(default=None, eq=False)
    thread: str | None = None
    position: float | None = None
    derived_from: str | None = None

    def structure(self) -> Structure:
        """The record's ``(thread, position, derived_from)``."""
        return (self.thread, self.position, self.derived_from)


#: A revision's ``(thread, position, derived_from)``.
Structure = tuple[str | None, float | None, str | None]


def _kept(given: Structure, previous: Structure) -> Structure:
    """Each of ``given`` that is not None, else the ``previous`` revision's."""
    return (
        previous[0] if given[0] is None else given[0],
        previous[1] if given[1] is None else given[1],
        previous[2] if given[2] is None else given[2],
    )


def placed(structure: Structure, created_at: float) -> Structure:
    """``structure`` with a position: a revision in a thread without one is placed at its
    ``created_at`` (so every memory of a thread has its place in the thread's order)."""
    thread, position, source = structure
    if thread is not None and position is None:
        return (thread, created_at, source)
    return structure


@attrs.frozen
class BatchCounts:
    """What one write batch did, and the ref each record ended at, in input order."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    refs: tuple[MemoryRef, ...] = ()


@attrs.frozen
class WritePlan:
    """What writing one record over its memory's current head does; every store writes by
    the same rules (:func:`plan_write`).

    ``change``: ``"added"`` (a new memory), ``"updated"`` (a new revision; ``retire`` is the
    row key of the live head it retires, ``None`` when the memory was deleted) or
    ``"unchanged"`` (same text, importance and metadata as the live head: nothing is written
    and ``revision`` is the head's). ``importance`` and ``metadata`` are what the new revision
    stores: the record's, else its predecessor's, else 0.5 and ``"{}"``; ``thread``,
    ``position`` and ``derived_from`` likewise: the record's, else its predecessor's, else
    None.
    """

    change: Literal["added", "updated", "unchanged"]
    revision: int
    importance: float
    metadata: str
    retire: int | None = None
    thread: str | None = None
    position: float | None = None
    derived_from: str | None = None


def plan_write(record: PreparedRecord, head: MemoryHead | None) -> WritePlan:
    """The :class:`WritePlan` of ``record`` over ``head``, the memory's current head, or
    ``None`` when the memory does not exist."""
    importance, metadata = record.importance, record.metadata
    if head is None:
        return WritePlan(
            "added",
            1,
            0.5 if importance is None else importance,
            metadata or "{}",
            None,
            *placed(record.structure(), record.created_at),
        )
    importance = head.importance if importance is None else importance
    metadata = head.metadata if metadata is None else metadata
    structure = placed(_kept(record.structure(), head.structure()), record.created_at)
    if (
        not head.deleted
        and head.content_hash == record.content_hash
        and head.importance == importance
        and head.metadata == metadata
        and head.structure() == structure
    ):
        return WritePlan("unchanged", int(head.revision), importance, metadata, None, *structure)
    return WritePlan(
        "updated",
        int(head.revision) + 1,
        0.5 if importance is None else importance,
        metadata or "{}",
        None if head.deleted else int(head.key),
        *structure,
    )


def plan_add(record: PreparedRecord, head: MemoryHead | None, *, same_is_ok: bool) -> WritePlan:
    """What ``Memory.add`` does over ``head``: ``"added"``, revision 1 or the next revision of
    a tombstoned id (the record's importance and metadata, else 0.5 and ``"{}"``). A live id
    is refused with a :class:`ValidationError` that says to use ``update``, except with
    ``same_is_ok`` when its head has the same content hash, importance (None counts as 0.5),
    metadata (None counts as ``"{}"``), thread, position and source: then ``"unchanged"`` at
    the head's revision."""
    importance = 0.5 if record.importance is None else record.importance
    metadata = record.metadata or "{}"
    structure = placed(record.structure(), record.created_at)
    if head is None or head.deleted:
        revision = 1 if head is None else head.revision + 1
        return WritePlan("added", revision, importance, metadata, None, *structure)
    if record.position is None and record.thread is not None and record.thread == head.thread:
        structure = (record.thread, head.position, record.derived_from)  # placed before
    same = (head.content_hash, head.importance, head.metadata, head.structure()) == (
        record.content_hash,
        importance,
        metadata,
        structure,
    )
    if same_is_ok and same:
        return WritePlan(
            "unchanged", head.revision, head.importance, head.metadata, None, *structure
        )
    where = f"memory {record.memory_id!r} already exists in namespace {record.namespace!r}"
    raise ValidationError(
        f"{where} with a different text, importance, metadata, thread, position or "
        "derived_from; use update() to write a new revision, or choose another id"
        if same_is_ok
        else f"{where}; use update() to write a new revision, or choose another id"
    )


def plan_update(record: PreparedRecord, head: MemoryHead | None) -> WritePlan:
    """What ``Memory.update`` does over ``head``: the next revision, retiring the live head;
    importance, metadata, thread, position and derived_from left None keep the head's.
    :class:`MemoryNotFoundError` for an unknown or deleted id."""
    head = live_head(head, record.namespace, record.memory_id)
    return WritePlan(
        "updated",
        head.revision + 1,
        head.importance if record.importance is None else record.importance,
        record.metadata or head.metadata,
        head.key,
        *placed(_kept(record.structure(), head.structure()), record.created_at),
    )


def live_head(head: MemoryHead | None, namespace: str, memory_id: str) -> MemoryHead:
    """``head`` when the memory exists and is not deleted, else the
    :class:`MemoryNotFoundError` an update or delete raises."""
    if head is None or head.deleted:
        raise MemoryNotFoundError.no_head(namespace, memory_id, deleted=head is not None)
    return head


@attrs.frozen
class RevisionRow:
    """One revision as bulk rows carry it. ``seq`` is its position in the store's write order
    (a clean import uses it as the row key, so every tie order is kept); ``metadata`` is
    canonical JSON; ``vectors`` are ``(space key, little-endian float32 bytes)``; ``thread``,
    ``position`` and ``derived_from`` as :class:`StoredMemory`'s."""

    revision: int
    seq: int
    text: str
    importance: float
    metadata: str
    created_at: float
    content_hash: str
    vectors: tuple[tuple[str, bytes], ...]
    thread: str | None = None
    position: float | None = None
    derived_from: str | None = None


@attrs.frozen
class MemoryRows:
    """A memory with its whole history, oldest revision first, and its tombstone."""

    namespace: str
    memory_id: str
    deleted: bool
    deleted_at: float | None
    revisions: tuple[RevisionRow, ...]


class MemoryNotFoundError(ValidationError, KeyError):
    """No memory (or revision) with that identity exists in that namespace. A store raises it
    through the constructors below, so every store words the same miss the same way."""

    __str__ = Exception.__str__  # not KeyError's quoted form

    @classmethod
    def no_memory(cls, namespace: str, memory_id: str) -> MemoryNotFoundError:
        """``get`` found no memory with that id."""
        return cls(
            f"no memory {memory_id!r} in namespace {namespace!r}; check the id and the "
            "namespace (Memory.list() shows what is stored)"
        )

    @classmethod
    def no_head(cls, namespace: str, memory_id: str, *, deleted: bool) -> MemoryNotFoundError:
        """An update or delete found no live memory with that id (``deleted``: it had one)."""
        state = "was deleted" if deleted else "does not exist"
        return cls(
            f"memory {memory_id!r} {state} in namespace {namespace!r}; add() it first "
            "(check the id and the namespace)"
        )

    @classmethod
    def forgotten(cls, namespace: str, memory_id: str, at: float) -> MemoryNotFoundError:
        """The memory was forgotten (hard-deleted) at ``at`` (POSIX seconds): nothing of it
        can be read back."""
        when = datetime.fromtimestamp(at, tz=UTC).isoformat(timespec="seconds")
        return cls(
            f"memory {memory_id!r} in namespace {namespace!r} was forgotten (hard-deleted) at "
            f"{when}: its text, metadata and vectors are gone and cannot be read back (adding "
            "the id again stores a new memory under it)"
        )

    @classmethod
    def no_revision(cls, ref: MemoryRef) -> MemoryNotFoundError:
        """``get`` found no revision for that reference."""
        return cls(
            f"no revision {ref.revision} of memory {ref.memory_id!r} in namespace "
            f"{ref.namespace!r}; check the reference"
        )


def content_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_unicode(value: str, what: str) -> None:
    """Refuse a string that cannot be stored as UTF-8 (a lone surrogate, e.g. from an escaped
    ``\\ud800`` in JSON or an undecodable byte in a command-line argument)."""
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{what} is not valid Unicode (a lone surrogate at character {exc.start}); pass "
            "proper text (UTF-8)"
        ) from None


def _check_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a non-empty string, got {value!r}")
    if "\x00" in value:
        raise ValidationError(f"{what} must not contain NUL characters")
    if len(value) > MAX_ID_CHARS:
        raise ValidationError(f"{what} is {len(value)} characters long; at most {MAX_ID_CHARS}")
    check_unicode(value, what)
    if value.strip() != value:
        raise ValidationError(f"{what} {value!r} has surrounding whitespace; strip it")
    return value


def check_namespace(value: object) -> str:
    return _check_name(value, "namespace")


def check_memory_id(value: object) -> str:
    return _check_name(value, "memory id")


def check_text(value: object) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"memory text must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValidationError("memory text is empty; a memory needs some text")
    if "\x00" in value:
        raise ValidationError("memory text contains a NUL character; remove it")
    if len(value) > MAX_TEXT_CHARS:
        raise ValidationError(
            f"memory text is {len(value)} characters long; at most {MAX_TEXT_CHARS} are stored "
            "(split it into several memories)"
        )
    check_unicode(value, "memory text")
    return value


def check_importance(value: object) -> float:
    if not is_real(value):
        raise ValidationError(f"importance must be a number in [0, 1], got {value!r}")
    out = float(value)
    if not math.isfinite(out) or not 0.0 <= out <= 1.0:
        raise ValidationError(f"importance must be a number in [0, 1], got {value!r}")
    return out


def _check_metadata_shape(value: Mapping[Any, Any]) -> None:
    """Refuse metadata nested deeper than :data:`MAX_METADATA_DEPTH` or certainly larger than
    :data:`MAX_METADATA_BYTES`, walking it without recursion and stopping at the first excess
    (so a huge or deep value costs no more than the caps)."""
    budget = MAX_METADATA_BYTES
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_METADATA_DEPTH:
            raise ValidationError(
                f"metadata is nested more than {MAX_METADATA_DEPTH} levels deep; flatten it"
            )
        if isinstance(item, str):
            budget -= len(item)
        elif isinstance(item, Mapping | list | tuple):
            budget -= 2 + len(item)  # brackets and separators, before looking inside
            if budget < 0:
                raise _metadata_too_large()
            if isinstance(item, Mapping):
                for key, child in item.items():
                    budget -= len(key) if isinstance(key, str) else 1
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
        if budget < 0:
            raise _metadata_too_large()


def _metadata_too_large() -> ValidationError:
    return ValidationError(
        f"metadata is larger than {MAX_METADATA_BYTES} bytes as JSON; keep metadata small "
        "(put long content in the memory text)"
    )


def encode_metadata(value: object) -> str:
    """Metadata as canonical JSON, refused unless it is a JSON object of at most
    :data:`MAX_METADATA_BYTES` UTF-8 bytes, nested at most :data:`MAX_METADATA_DEPTH` levels,
    with finite numbers and valid Unicode."""
    if value is None:
        return "{}"
    if not isinstance(value, Mapping):
        raise ValidationError(
            f"metadata must be a JSON object (a mapping), got {type(value).__name__}"
        )
    _check_metadata_shape(value)
    try:
        encoded = json.dumps(dict(value), sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"metadata must be JSON-serialisable: {exc}") from None
    if len(encoded) > MAX_METADATA_BYTES:
        raise _metadata_too_large()
    check_unicode(encoded, "metadata")
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise _metadata_too_large()
    return encoded


def check_created_at(value: object) -> float | None:
    """Epoch seconds, or an ISO 8601 string; ``None`` means now."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValidationError(
            f"created_at must be epoch seconds or an ISO 8601 string, got {value!r}"
        )
    if isinstance(value, int | float):
        if not is_real(value):  # NaN, an infinity, or an int too large for a float
            shown = repr(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise ValidationError(f"created_at must be finite epoch seconds, got {shown}")
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            pass
    raise ValidationError(f"created_at must be epoch seconds or an ISO 8601 string, got {value!r}")


def check_thread(value: object) -> str | None:
    """A memory's thread: ``None``, or a name checked as a memory id is (non-empty, at most
    :data:`MAX_ID_CHARS` characters, no NUL, no surrounding whitespace)."""
    return None if value is None else _check_name(value, "thread")


def check_derived_from(value: object) -> str | None:
    """The id of the memory a memory was derived from: ``None``, or a memory id (checked as
    one; it need not exist)."""
    return None if value is None else _check_name(value, "derived_from")


#: Largest integer a position may be: every integer up to it is exact as a float.
MAX_EXACT_POSITION = 2**53


def check_position(value: object) -> float | None:
    """A memory's position in its thread as the store keeps it: ``None``; a finite number
    (a sequence number or a timestamp; an integer beyond ``±2**53`` is refused, a float
    could not hold it exactly); a :class:`~datetime.datetime` or an ISO 8601 string, as its
    POSIX timestamp (a naive one is local time, as ``datetime.timestamp`` reads it)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            raise ValidationError(
                f"position must be a number, a datetime or an ISO 8601 string, got {value!r}"
            ) from None
    if isinstance(value, bool) or not is_real(value):
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise ValidationError(
            f"position must be a finite number (a sequence number or a timestamp), a datetime "
            f"or an ISO 8601 string, got {shown}"
        )
    if isinstance(value, int) and abs(value) > MAX_EXACT_POSITION:
        raise ValidationError(
            f"position {value} is beyond +-2**53, where a float cannot hold every integer; use "
            "a smaller sequence number"
        )
    out = float(value)  # type: ignore[arg-type]
    if not math.isfinite(out):
        raise ValidationError(f"position must be a finite number, got {value!r}")
    return out


def new_memory_id() -> str:
    """A new random memory id (32 hex digits)."""
    return uuid.uuid4().hex


def prepare(
    namespace: str,
    memory_id: str,
    text: str,
    *,
    importance: float | None,
    metadata: str | None,
    created_at: float | None,
    content_hash: str,
    vector: np.ndarray | None = None,
    thread: str | None = None,
    position: float | None = None,
    derived_from: str | None = None,
) -> PreparedRecord:
    return PreparedRecord(
        namespace=namespace,
        memory_id=memory_id,
        text=text,
        importance=importance,
        metadata=metadata,
        created_at=time.time() if created_at is None else created_at,
        content_hash=content_hash,
        vector=vector,
        thread=thread,
        position=position,
        derived_from=derived_from,
    )
