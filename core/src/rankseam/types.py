"""Frozen value objects shared by the host and every plugin.

Everything here is an immutable ``attrs`` class with validators. Plugins receive these
objects; they cannot change them, and the host never trusts a plugin to build a hit.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType, MemberDescriptorType
from typing import Any, TypeVar

import attrs
import numpy as np

from rankseam.checks import is_int, is_real

__all__ = [
    "Candidate",
    "CandidateRecord",
    "FeedbackHit",
    "FeedbackRecord",
    "Hit",
    "MemoryRef",
    "Neighbour",
    "RerankDecision",
    "RerankStatus",
    "RerankTrace",
    "SearchResult",
    "SearchTrace",
    "TraceCandidate",
    "Usage",
    "frozen_mapping",
    "readonly_float32",
    "readonly_vector",
]


def frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy of ``value`` (empty for None): what frozen value objects hold."""
    return MappingProxyType(dict(value or {}))


_T = TypeVar("_T")
_BUILDERS: dict[type, Callable[..., Any]] = {}


def prechecked(cls: type[_T], *values: Any) -> _T:
    """An instance of the attrs class ``cls`` holding ``values`` (one per field, in order)
    as they are: no converter or validator runs. For the host's hot paths only (a store's
    rows, the fused hits), with values already checked and of the types the converters give
    (a read-only mapping for a mapping field, a tuple for a tuple field)."""
    build = _BUILDERS.get(cls)
    if build is None:
        build = _BUILDERS[cls] = _builder(cls)
    return build(*values)  # type: ignore[no-any-return]


def _builder(cls: type) -> Callable[..., Any]:
    # one generated function per class: a loop over the fields costs more than the stores.
    # A slotted class's fields are set through their slots' own setters (half the cost of
    # object.__setattr__, which looks each name up); any other through object.__setattr__.
    names = [a.name for a in attrs.fields(cls)]
    params = ", ".join(f"v{i}" for i in range(len(names)))
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
    sets = ""
    for i, name in enumerate(names):
        slot = next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)
        if isinstance(slot, MemberDescriptorType):
            scope[f"set{i}"] = slot.__set__
            sets += f"    set{i}(inst, v{i})\n"
        else:
            scope[f"set{i}"] = object.__setattr__
            sets += f"    set{i}(inst, {name!r}, v{i})\n"
    source = f"def build({params}):\n    inst = new(cls)\n{sets}    return inst\n"
    exec(compile(source, f"<prechecked {cls.__name__}>", "exec"), scope)
    return scope["build"]  # type: ignore[no-any-return]


# Converters are Python functions, never builtins (``converter=float``): attrs reads a builtin's
# signature with the tokenizer, whose pattern costs milliseconds to compile in every process.
def to_float(value: Any) -> float:
    """``float(value)``: the converter of a float field."""
    return float(value)


def to_int(value: Any) -> int:
    """``int(value)``: the converter of an int field."""
    return int(value)


def to_bool(value: Any) -> bool:
    """``bool(value)``: the converter of a bool field."""
    return bool(value)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _optional_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if value is None else frozen_mapping(value)


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _any_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


def _record_tuple(value: Iterable[CandidateRecord]) -> tuple[CandidateRecord, ...]:
    return tuple(value)


def _non_negative_int(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not is_int(value) or value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative integer, got {value!r}")


def _optional_non_negative_int(
    _inst: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    if value is not None:
        _non_negative_int(_inst, attribute, value)


def _optional_real(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not is_real(value):
        raise ValueError(f"{attribute.name} must be None or a finite number, got {value!r}")


def _finite(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite number, got {value!r}")


#: The largest revision (and count) a store holds: SQLite's INTEGER is a signed 64-bit number.
MAX_INT64 = 2**63 - 1


@attrs.frozen(order=True)
class MemoryRef:
    """The identity of one immutable revision of a memory: what a hit cites."""

    namespace: str = attrs.field(validator=attrs.validators.instance_of(str))
    memory_id: str = attrs.field(validator=attrs.validators.instance_of(str))
    revision: int = attrs.field(validator=_non_negative_int)

    def __attrs_post_init__(self) -> None:
        if not self.namespace:
            raise ValueError("MemoryRef.namespace must not be empty")
        if not self.memory_id:
            raise ValueError("MemoryRef.memory_id must not be empty")
        if self.revision < 1:
            raise ValueError(f"MemoryRef.revision starts at 1, got {self.revision}")
        if self.revision > MAX_INT64:
            raise ValueError(
                f"MemoryRef.revision is at most {MAX_INT64} (a signed 64-bit integer, the "
                f"largest a store holds), got {self.revision}"
            )

    def sort_key(self) -> bytes:
        """Deterministic tie-break key: the UTF-8 bytes of the identity."""
        return b"\x00".join(
            (self.namespace.encode(), self.memory_id.encode(), str(self.revision).encode())
        )

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "memory_id": self.memory_id, "revision": self.revision}


@attrs.frozen
class Usage:
    """Cost of model calls. ``None`` token counts mean *unknown*, and unknown is contagious.

    Usage is summable: ``Usage.zero() + Usage(calls=1, input_tokens=None)`` has one call and
    unknown input tokens.
    """

    calls: int = attrs.field(default=0, validator=_non_negative_int)
    input_tokens: int | None = attrs.field(default=0, validator=_optional_non_negative_int)
    output_tokens: int | None = attrs.field(default=0, validator=_optional_non_negative_int)

    @classmethod
    def zero(cls) -> Usage:
        return cls(0, 0, 0)

    @classmethod
    def one_call(cls, input_tokens: int | None = None, output_tokens: int | None = None) -> Usage:
        return cls(1, input_tokens, output_tokens)

    @classmethod
    def total(cls, usages: Iterable[Usage]) -> Usage:
        out = cls.zero()
        for usage in usages:
            out = out + usage
        return out

    @classmethod
    def of_failed_call(cls, exc: BaseException) -> Usage:
        """The cost of one failed backend call: what the backend attached to its error as
        ``exc.usage`` (e.g. every retried attempt; zero calls when no request was sent), or to
        the error it was raised from (``__cause__``: a timeout that cancelled the call), else
        one call with unknown tokens."""
        seen: BaseException | None = exc
        for _ in range(8):  # a short chain; never loop on a cyclic one
            if seen is None:
                break
            usage = getattr(seen, "usage", None)
            if isinstance(usage, Usage):
                return usage
            seen = seen.__cause__
        return cls(1, None, None)

    def __add__(self, other: object) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented

        def add(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a + b

        return Usage(
            self.calls + other.calls,
            add(self.input_tokens, other.input_tokens),
            add(self.output_tokens, other.output_tokens),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


@attrs.frozen
class Hit:
    """One search result: an exact stored revision, with how it was found.

    ``score`` is the coarse (fused) score; rerankers re-select hits but never rewrite it.
    ``rerank_score`` is the reranker's own score for this hit (e.g. a cross-encoder's
    relevance) when the reranker gave one and its selection was used, else ``None``. It is
    shown, never used by the host to order hits; it does not take part in equality.
    ``thread``, ``position`` and ``derived_from`` are the stored revision's place in a
    conversation (docs/store.md, "Threads, positions and sources"), ``None`` when it has none.
    """

    ref: MemoryRef
    text: str
    score: float = attrs.field(converter=to_float, validator=_finite)
    importance: float = attrs.field(default=0.5, converter=to_float)
    matched_by: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    channel_scores: Mapping[str, float] = attrs.field(
        factory=dict, converter=frozen_mapping, eq=False
    )
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=frozen_mapping, eq=False)
    created_at: float = attrs.field(default=0.0, converter=to_float)
    content_hash: str = ""
    rerank_score: float | None = attrs.field(
        default=None,
        converter=_optional_float,
        validator=attrs.validators.optional(_finite),
        eq=False,
    )
    thread: str | None = None
    position: float | None = attrs.field(default=None, converter=_optional_float)
    derived_from: str | None = None

    def to_dict(self, *, text: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {**self.ref.to_dict()}
        if text:
            out["text"] = self.text
        out.update(
            score=round(self.score, 6),
            importance=self.importance,
            matched_by=list(self.matched_by),
            channel_scores={k: round(v, 6) for k, v in self.channel_scores.items()},
            metadata=dict(self.metadata),
            created_at=self.created_at,
            content_hash=self.content_hash,
            rerank_score=None if self.rerank_score is None else round(self.rerank_score, 6),
            thread=self.thread,
            position=self.position,
            derived_from=self.derived_from,
        )
        return out


def readonly_float32(value: object) -> np.ndarray:
    """``value`` as a read-only float32 array; one that already is (the store's vectors) is
    shared, not copied."""
    if type(value) is np.ndarray and not value.flags.writeable and value.dtype == np.float32:
        return value
    arr = np.array(value, dtype=np.float32, copy=True)
    arr.setflags(write=False)
    return arr


def readonly_vector(value: object) -> np.ndarray | None:
    """``value`` as a read-only one-dimensional float32 vector (``None`` stays ``None``); a
    vector that already is one is shared, not copied."""
    if value is None:
        return None
    arr = readonly_float32(value)
    if arr.ndim != 1:
        raise ValueError(f"Candidate.embedding must be one-dimensional, got shape {arr.shape}")
    return arr


@attrs.frozen
class Candidate:
    """The read-only view of one coarse-pool entry that a reranker sees.

    ``rank`` is the 1-based coarse position: the only currency a reranker may answer in.
    ``text`` is already cut to the seam's ``max_chars``. ``embedding`` is the stored vector
    (float32, read-only) when the reranker asked for vectors and one exists in the store's
    active embedding space, else ``None``.

    ``thread``, ``position`` and ``derived_from`` (every candidate carries them: ``None`` when
    the memory has none) place the memory in its conversation (docs/seam.md, "What a
    candidate carries"). ``metadata`` is the memory's metadata when the reranker asked for it
    (``needs_metadata = True``), else ``None``.
    """

    rank: int = attrs.field(validator=_non_negative_int)
    ref: MemoryRef
    text: str
    score: float
    importance: float = 0.5
    matched_by: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    channel_scores: Mapping[str, float] = attrs.field(
        factory=dict, converter=frozen_mapping, eq=False
    )
    embedding: np.ndarray | None = attrs.field(default=None, converter=readonly_vector, eq=False)
    embedding_space: str | None = None
    thread: str | None = None
    position: float | None = attrs.field(default=None, converter=_optional_float)
    derived_from: str | None = None
    metadata: Mapping[str, Any] | None = attrs.field(
        default=None, converter=_optional_mapping, eq=False
    )


@attrs.frozen
class Neighbour:
    """A memory next to a candidate in its thread, as a reranker that asked for neighbours
    sees it (``CandidateViews.neighbours``; docs/seam.md, "Neighbours"): read from the search's
    own snapshot, never a pool entry a reranker can select.

    ``offset`` is its place relative to the candidate: ``-1`` the memory just before, ``1``
    the one just after, ``-2`` the one before that, ... ``text`` is cut to the seam's
    ``max_chars``; ``metadata`` is ``None`` unless the reranker asked for metadata.
    """

    offset: int
    ref: MemoryRef
    text: str
    thread: str | None = None
    position: float | None = attrs.field(default=None, converter=_optional_float)
    derived_from: str | None = None
    importance: float = 0.5
    created_at: float = 0.0
    metadata: Mapping[str, Any] | None = attrs.field(
        default=None, converter=_optional_mapping, eq=False
    )


@attrs.frozen
class CandidateRecord:
    """What a per-candidate policy did with one candidate (kept in the trace).

    ``confidence`` is the policy's own score for the candidate where it has one (the
    ``decision`` reranker copies its backend's ``DecisionResult.confidence``; the ``learned``
    reranker its probability); ``to_dict`` writes it only when set, so traces of policies
    without one keep their shape.
    """

    rank: int
    outcome: str
    latency_ms: float = 0.0
    usage: Usage = attrs.field(factory=Usage.zero)
    detail: str | None = None
    confidence: float | None = attrs.field(default=None, validator=_optional_real)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rank": self.rank,
            "outcome": self.outcome,
            "latency_ms": round(self.latency_ms, 3),
            "usage": self.usage.to_dict(),
            "detail": self.detail,
        }
        if self.confidence is not None:
            out["confidence"] = round(self.confidence, 6)
        return out


def _optional_any_tuple(value: Iterable[Any] | None) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class RerankDecision:
    """What a reranker answers: 1-based coarse positions, best first, plus cost.

    ``selected_ranks`` is taken as the plugin gave it; the seam validates every element
    (non-integers, out-of-range and repeated ranks are discarded and counted). ``used_fallback``
    means the *reranker* fell back to coarse ranks because it had no valid selection; it is not
    a backend degradation (that is ``DecisionResult.used_fallback``).

    ``scores`` (optional) is the reranker's own score for each element of ``selected_ranks``,
    position for position (``scores[i]`` belongs to ``selected_ranks[i]``). The seam checks it
    like the ranks: a tuple of another length is invalid output; a score that is not a finite
    real number makes its rank invalid (discarded and counted). Kept scores are shown on the
    hits (``Hit.rerank_score``) and in the trace; the host never reorders by them.
    """

    selected_ranks: tuple[Any, ...] = attrs.field(converter=_any_tuple)
    usage: Usage = attrs.field(factory=Usage.zero, validator=attrs.validators.instance_of(Usage))
    discarded_rank_count: int = attrs.field(default=0, validator=_non_negative_int)
    used_fallback: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    records: tuple[CandidateRecord, ...] = attrs.field(default=(), converter=_record_tuple)
    scores: tuple[Any, ...] | None = attrs.field(default=None, converter=_optional_any_tuple)


class RerankStatus(str, enum.Enum):
    """How the rerank stage ended.

    - ``ok``: the reranker's selection was used as given.
    - ``repaired``: some ranks were invalid and discarded, or the reranker answered more
      ranks than the limit (``over_limit_count``); the valid rest, up to the limit, was used.
    - ``fell_back``: no valid rank remained; coarse ranks ``1..min(limit, n)`` were used.
    - ``degraded``: the reranker failed and ``on_error="coarse"`` returned the coarse order.
    - ``skipped``: no rerank ran (no reranker assembled, or an empty pool).
    """

    OK = "ok"
    REPAIRED = "repaired"
    FELL_BACK = "fell_back"
    DEGRADED = "degraded"
    SKIPPED = "skipped"


@attrs.frozen
class TraceCandidate:
    """One coarse-pool entry as recorded in a trace (text optional: traces are sensitive)."""

    rank: int
    ref: MemoryRef
    score: float
    matched_by: tuple[str, ...]
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rank": self.rank,
            **self.ref.to_dict(),
            "score": round(self.score, 6),
        }
        out["matched_by"] = list(self.matched_by)
        if self.text is not None:
            out["text"] = self.text
        return out


@attrs.frozen
class RerankTrace:
    """Everything the seam knows about one rerank stage. JSON-serialisable via ``to_dict``."""

    policy_id: str
    status: RerankStatus
    selected_ranks: tuple[int, ...] = ()
    discarded_rank_count: int = 0
    used_fallback: bool = False
    reason: str | None = None
    usage: Usage = attrs.field(factory=Usage.zero)
    latency_ms: float = 0.0
    descriptor: Mapping[str, Any] = attrs.field(factory=dict, converter=frozen_mapping, eq=False)
    records: tuple[CandidateRecord, ...] = ()
    candidate_count: int = 0
    limit: int = 0
    #: The reranker's scores for ``selected_ranks``, position for position; ``None`` when it
    #: gave none or its selection was not used (fallback, degraded).
    scores: tuple[float, ...] | None = None
    #: Elements of the reranker's answer after the ``limit``-th kept rank: ignored, never
    #: validated, counted so that a reranker that over-answers can be spotted.
    over_limit_count: int = 0
    #: A reranker chain's stages, each its own trace entry, in order (docs/seam.md, "Reranker
    #: chains"); empty for a single reranker. ``selected_ranks`` are then the final hits'
    #: coarse ranks, ``usage`` the stages' sum and ``status`` the worst of theirs.
    stages: tuple[RerankTrace, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policy_id": self.policy_id,
            "status": self.status.value,
            "reason": self.reason,
            "candidate_count": self.candidate_count,
            "limit": self.limit,
            "selected_ranks": list(self.selected_ranks),
            "scores": None if self.scores is None else [round(s, 6) for s in self.scores],
            "discarded_rank_count": self.discarded_rank_count,
            "over_limit_count": self.over_limit_count,
            "used_fallback": self.used_fallback,
            "usage": self.usage.to_dict(),
            "latency_ms": round(self.latency_ms, 3),
            "descriptor": _jsonable(self.descriptor),
            "records": [r.to_dict() for r in self.records],
        }
        if self.stages:  # a single reranker's trace keeps its shape
            out["stages"] = [stage.to_dict() for stage in self.stages]
        return out


@attrs.frozen
class SearchTrace:
    """The trace of one search: the coarse pool and, when a reranker ran, its stage."""

    query: str
    namespace: str
    limit: int
    pool_size: int
    coarse: tuple[TraceCandidate, ...]
    rerank: RerankTrace | None = None
    latency_ms: float = 0.0
    channels: tuple[str, ...] = ()
    #: Things about this search the user should know that are not the rerank stage's own,
    #: e.g. that ``RANKSEAM_RERANK`` switched off the configured reranker.
    notes: tuple[str, ...] = ()
    #: The search's filter as checked (``where`` with its thread and time scope), or None.
    where: Mapping[str, Any] | None = None
    #: The search's score cut-off, or None.
    min_score: float | None = None

    @property
    def status(self) -> RerankStatus:
        return self.rerank.status if self.rerank is not None else RerankStatus.SKIPPED

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "namespace": self.namespace,
            "limit": self.limit,
            "pool_size": self.pool_size,
            "channels": list(self.channels),
            "status": self.status.value,
            "notes": list(self.notes),
            "where": self.where,
            "min_score": self.min_score,
            "latency_ms": round(self.latency_ms, 3),
            "coarse": [c.to_dict() for c in self.coarse],
            "rerank": self.rerank.to_dict() if self.rerank is not None else None,
        }


def _hit_tuple(value: Iterable[Hit]) -> tuple[Hit, ...]:
    return tuple(value)


@attrs.frozen
class SearchResult:
    """Final hits plus the trace. Iterating a result iterates its hits."""

    hits: tuple[Hit, ...] = attrs.field(converter=_hit_tuple)
    trace: SearchTrace

    @property
    def status(self) -> RerankStatus:
        return self.trace.status

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, index: int) -> Hit:
        return self.hits[index]

    def to_dict(self, *, text: bool = True) -> dict[str, Any]:
        return {"hits": [h.to_dict(text=text) for h in self.hits], "trace": self.trace.to_dict()}


def _feedback_hits(value: Iterable[FeedbackHit]) -> tuple[FeedbackHit, ...]:
    return tuple(value)


def _optional_str(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{attribute.name} must be a string or None, got {value!r}")


@attrs.frozen
class FeedbackHit:
    """One hit a search showed, as a :class:`FeedbackRecord` keeps it: its rank in the
    result (1 = first), the memory and revision it cited, and its score."""

    rank: int = attrs.field(validator=_non_negative_int)
    memory_id: str = attrs.field(validator=attrs.validators.instance_of(str))
    revision: int = attrs.field(validator=_non_negative_int)
    score: float = attrs.field(converter=to_float, validator=_finite)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "memory_id": self.memory_id,
            "revision": self.revision,
            "score": self.score,
        }


@attrs.frozen
class FeedbackRecord:
    """What an application said about one search result: which of the hits it showed it
    used (``Memory.feedback``; docs/store.md, "Feedback"). Kept in a table of its own beside
    the memories: never memory state, never searched, bounded per namespace, and left out of
    snapshots unless asked.

    ``shown`` holds the result's hits in rank order (ranks ``1..n``); ``used`` the memory ids
    the application used, each one of ``shown``, in the order it gave them (empty: it used
    none). ``where`` is the search's filter as checked (with its thread and time scope) and
    ``min_score`` its cut-off, both None when the search had none; ``policy_id`` the
    reranker's (None: the coarse order). ``created_at`` is POSIX seconds."""

    feedback_id: str = attrs.field(validator=attrs.validators.instance_of(str))
    namespace: str = attrs.field(validator=attrs.validators.instance_of(str))
    query: str = attrs.field(validator=attrs.validators.instance_of(str))
    shown: tuple[FeedbackHit, ...] = attrs.field(converter=_feedback_hits)
    used: tuple[str, ...] = attrs.field(converter=_str_tuple)
    created_at: float = attrs.field(converter=to_float, validator=_finite)
    where: Mapping[str, Any] | None = attrs.field(
        default=None, converter=_optional_mapping, eq=False
    )
    min_score: float | None = attrs.field(default=None, converter=_optional_float)
    policy_id: str | None = attrs.field(default=None, validator=_optional_str)
    note: str | None = attrs.field(default=None, validator=_optional_str)

    def __attrs_post_init__(self) -> None:
        if not self.feedback_id or not self.namespace:
            raise ValueError("FeedbackRecord.feedback_id and .namespace must not be empty")
        ranks = [hit.rank for hit in self.shown]
        if ranks != list(range(1, len(ranks) + 1)):
            raise ValueError(f"FeedbackRecord.shown must be ranked 1..n in order, got {ranks}")
        shown = {hit.memory_id for hit in self.shown}
        for memory_id in self.used:
            if memory_id not in shown:
                raise ValueError(
                    f"FeedbackRecord.used names {memory_id!r}, which is not among the hits "
                    f"shown ({sorted(shown)})"
                )
        if len(set(self.used)) != len(self.used):
            raise ValueError(f"FeedbackRecord.used names an id twice: {list(self.used)}")

    @property
    def used_ranks(self) -> tuple[int, ...]:
        """The ranks of the used hits, in the order of ``used``."""
        rank_of = {hit.memory_id: hit.rank for hit in self.shown}
        return tuple(rank_of[memory_id] for memory_id in self.used)

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready values (one line of a feedback export)."""
        return {
            "feedback_id": self.feedback_id,
            "namespace": self.namespace,
            "query": self.query,
            "shown": [hit.to_dict() for hit in self.shown],
            "used": list(self.used),
            "created_at": self.created_at,
            "where": None if self.where is None else _jsonable(self.where),
            "min_score": self.min_score,
            "policy_id": self.policy_id,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeedbackRecord:
        """The record :meth:`to_dict` wrote; a :class:`ValueError` naming what is wrong."""
        try:
            return cls(
                feedback_id=data["feedback_id"],
                namespace=data["namespace"],
                query=data["query"],
                shown=[FeedbackHit(**hit) for hit in data["shown"]],
                used=data["used"],
                created_at=data["created_at"],
                where=data.get("where"),
                min_score=data.get("min_score"),
                policy_id=data.get("policy_id"),
                note=data.get("note"),
            )
        except KeyError as exc:
            raise ValueError(f"a feedback record needs the key {exc.args[0]!r}") from None
        except TypeError as exc:
            raise ValueError(f"not a feedback record: {exc}") from None


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return repr(value)
