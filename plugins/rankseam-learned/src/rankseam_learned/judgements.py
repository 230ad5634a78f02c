"""What training learns from: judged queries over a store (docs/plugins/learned.md, "Training").

A :class:`Judgement` is one query with the memories relevant to it and their grades; a
:class:`JudgedStore` is one opened store (a :class:`rankseam.Memory` and a namespace) with the
judgements asked of it. Three sources give them:

- a **judgements file** (:func:`read_judgements`): JSON Lines, one query a line::

      {"query": "When did Ana move to Porto?", "relevant": ["m12", "m40"]}
      {"query": "...", "relevant": ["m7"], "grades": {"m7": 2}, "thread": "chat-3",
       "namespace": "support", "id": "q-17"}

  ``relevant`` lists memory ids (at least one); ``grades`` optionally gives a relevant memory
  a gain other than 1; ``thread`` keeps queries about one conversation in one fold; a line
  without ``namespace`` asks the store's default one;
- the **feedback** an application recorded on its search results (:func:`feedback_judgements`);
- a **bench data set** (:func:`dataset_stores`: LoCoMo, SciFact, any ``rankseam bench quality``
  spec), each collection ingested into a scratch store.

A memory derived from another (``derived_from``) counts as its source: relevance is kept per
*source group* (the memory it was derived from, or itself), as the benchmarks count it, so a
fact restating a relevant turn is a hit for that turn.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from rankseam.errors import ConfigurationError
from rankseam.types import frozen_mapping

__all__ = [
    "JudgedStore",
    "Judgement",
    "dataset_stores",
    "feedback_judgements",
    "read_judgements",
]


@attrs.frozen
class Judgement:
    """One judged query: ``relevance`` maps source groups to their gain (> 0). ``thread`` keeps
    it in one fold with the other queries of its thread; ``headline`` is False for queries
    reported on a line of their own (LoCoMo's adversarial category 5)."""

    id: str
    query: str
    relevance: Mapping[str, float] = attrs.field(converter=frozen_mapping)
    thread: str | None = None
    headline: bool = True
    #: The search's filter and cut-off, as recorded with feedback (None: none).
    where: Mapping[str, Any] | None = None
    min_score: float | None = None


@attrs.frozen(eq=False)
class JudgedStore:
    """One opened store, the namespace searched and the judgements asked of it. ``group_of``
    maps memory ids to their source group where the data set says so (bench data sets);
    otherwise a memory's group is its ``derived_from`` or its own id."""

    name: str
    memory: Any
    judgements: tuple[Judgement, ...]
    namespace: str | None = None
    group_of: Mapping[str, str] | None = None
    #: Counts a report shows: relevant ids that named no memory, queries left with none.
    dropped_ids: int = 0
    skipped_queries: int = 0


def _fail(path: Path, lineno: int, what: str) -> ConfigurationError:
    return ConfigurationError(
        f"{path}:{lineno}: {what}; a judgements line is a JSON object "
        '{"query": "...", "relevant": ["memory id", ...]} with optional "grades" '
        '({"memory id": gain}), "thread", "namespace" and "id" (docs/plugins/learned.md)'
    )


def _parse_line(path: Path, lineno: int, raw: str) -> dict[str, Any]:
    try:
        line = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _fail(path, lineno, f"not valid JSON ({exc.msg})") from None
    if not isinstance(line, dict):
        raise _fail(path, lineno, "not a JSON object")
    unknown = set(line) - {"query", "relevant", "grades", "thread", "namespace", "id"}
    if unknown:
        raise _fail(path, lineno, f"unknown key(s) {sorted(unknown)}")
    query = line.get("query")
    if not isinstance(query, str) or not query.strip():
        raise _fail(path, lineno, '"query" must be a non-empty string')
    relevant = line.get("relevant")
    if (
        not isinstance(relevant, list)
        or not relevant
        or not all(isinstance(r, str) and r for r in relevant)
    ):
        raise _fail(path, lineno, '"relevant" must be a non-empty list of memory ids')
    grades = line.get("grades", {})
    if not isinstance(grades, dict) or not all(
        k in relevant
        and isinstance(v, int | float)
        and not isinstance(v, bool)
        and math.isfinite(v)
        and v > 0
        for k, v in grades.items()
    ):
        raise _fail(path, lineno, '"grades" must map ids listed in "relevant" to gains > 0')
    for key in ("thread", "namespace", "id"):
        if key in line and not (isinstance(line[key], str) and line[key]):
            raise _fail(path, lineno, f'"{key}" must be a non-empty string')
    return line


def _group_of_stored(memory: Any, namespace: str | None, memory_id: str) -> str | None:
    """The source group of a stored memory, or None when there is no such memory."""
    from rankseam.errors import StoreError

    try:
        stored = memory.get(memory_id, namespace=namespace)
    except (StoreError, KeyError, LookupError):
        return None
    if getattr(stored, "deleted", False):
        return None
    derived = getattr(stored, "derived_from", None)
    return derived if derived is not None else memory_id


def read_judgements(
    path: str | os.PathLike[str], memory: Any, *, namespace: str | None = None
) -> list[JudgedStore]:
    """The judgements of a JSON Lines file over ``memory``, one :class:`JudgedStore` per
    namespace the lines name (a line without one: ``namespace``, else the store's default).
    A relevant id that names no memory is dropped and counted; a query left with none is
    skipped and counted. A malformed line is an error naming its line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError(f"judgements file {str(p)!r} does not exist") from None
    by_namespace: dict[str | None, list[Judgement]] = {}
    dropped: dict[str | None, int] = {}
    skipped: dict[str | None, int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        line = _parse_line(p, lineno, raw)
        ns = line.get("namespace", namespace)
        relevance: dict[str, float] = {}
        grades = line.get("grades", {})
        for memory_id in line["relevant"]:
            group = _group_of_stored(memory, ns, memory_id)
            if group is None:
                dropped[ns] = dropped.get(ns, 0) + 1
                continue
            gain = float(grades.get(memory_id, 1.0))
            relevance[group] = max(relevance.get(group, 0.0), gain)
        if not relevance:
            skipped[ns] = skipped.get(ns, 0) + 1
            by_namespace.setdefault(ns, [])
            continue
        by_namespace.setdefault(ns, []).append(
            Judgement(
                id=line.get("id", f"line-{lineno}"),
                query=line["query"].strip(),
                relevance=relevance,
                thread=line.get("thread"),
            )
        )
    if not by_namespace:
        raise ConfigurationError(f"judgements file {str(p)!r} holds no judgement")
    return _stores(memory, by_namespace, dropped, skipped)


def _stores(
    memory: Any,
    by_namespace: Mapping[Any, Sequence[Judgement]],
    dropped: Mapping[Any, int],
    skipped: Mapping[Any, int],
) -> list[JudgedStore]:
    """One :class:`JudgedStore` per namespace of ``by_namespace``, with its counts."""
    return [
        JudgedStore(
            name=ns if ns is not None else "default",
            memory=memory,
            judgements=tuple(judgements),
            namespace=ns,
            dropped_ids=dropped.get(ns, 0),
            skipped_queries=skipped.get(ns, 0),
        )
        for ns, judgements in by_namespace.items()
    ]


def feedback_judgements(
    memory: Any, *, namespace: str | None = None, all_namespaces: bool = False
) -> list[JudgedStore]:
    """The feedback recorded on ``memory``'s search results (``Memory.feedback``), one
    :class:`JudgedStore` per namespace: each record is a query whose relevant memories are
    the hits the application used, searched again with the record's filter and cut-off. A
    record that used none of its hits says what is not relevant but not what is: it is
    skipped and counted, as is a used memory deleted since."""
    records = memory.feedback_records(namespace, all_namespaces=all_namespaces)
    by_namespace: dict[str, list[Judgement]] = {}
    dropped: dict[str, int] = {}
    skipped: dict[str, int] = {}
    for record in records:
        ns = record.namespace
        by_namespace.setdefault(ns, [])
        relevance: dict[str, float] = {}
        for memory_id in record.used:
            group = _group_of_stored(memory, ns, memory_id)
            if group is None:
                dropped[ns] = dropped.get(ns, 0) + 1
            else:
                relevance[group] = 1.0
        if not relevance:
            skipped[ns] = skipped.get(ns, 0) + 1
            continue
        by_namespace[ns].append(
            Judgement(
                id=record.feedback_id,
                query=record.query,
                relevance=relevance,
                where=record.where,
                min_score=record.min_score,
            )
        )
    if not by_namespace:
        scope = "any namespace" if all_namespaces else f"namespace {namespace or 'default'!r}"
        raise ConfigurationError(
            f"no feedback is recorded in {scope} of this store: record it with "
            "Memory.feedback(result, used=[...]) on search results, or train on a judgements "
            "file (docs/plugins/learned.md)"
        )
    return _stores(memory, by_namespace, dropped, skipped)


@contextlib.contextmanager
def dataset_stores(
    spec: str,
    *,
    open_memory: Callable[..., Any] | None = None,
    workdir: str | os.PathLike[str] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Iterator[list[JudgedStore]]:
    """The collections of the bench data set ``spec`` (``locomo``, ``scifact`` or a
    ``rankseam bench quality --dataset`` spec), each ingested into a scratch store that lives
    as long as the ``with`` block. LoCoMo's queries are threaded by conversation (its folds
    leave one conversation out) and its category 5 is off the headline, as the bench reports
    it."""
    from rankseam_learned import benchdata

    dataset = benchdata.load(spec)
    if open_memory is None:
        import rankseam

        open_memory = rankseam.open_memory
    threaded = dataset.kind == "locomo"
    with tempfile.TemporaryDirectory(prefix="rankseam-train-", dir=workdir) as tmp:
        stores: list[JudgedStore] = []
        try:
            for index, collection in enumerate(dataset.collections):
                if progress is not None:
                    progress("ingest", index, len(dataset.collections))
                memory = open_memory(str(Path(tmp) / f"store-{index}.sqlite3"), create=True)
                stores.append(
                    JudgedStore(
                        name=collection.name,
                        memory=memory,
                        judgements=tuple(
                            Judgement(
                                id=q.id,
                                query=q.text,
                                relevance=q.relevance,
                                thread=collection.name if threaded else None,
                                headline=(
                                    q.category is None
                                    or q.category in benchdata.HEADLINE_CATEGORIES
                                ),
                            )
                            for q in collection.queries
                        ),
                        group_of=collection.group_of(),
                    )
                )
                memory.ingest(r.to_ingest() for r in collection.records)
            if progress is not None:
                progress("ingest", len(dataset.collections), len(dataset.collections))
            yield stores
        finally:
            for store in stores:
                store.memory.close()


def judged_count(stores: Sequence[JudgedStore]) -> int:
    """How many judged queries ``stores`` hold."""
    return sum(len(s.judgements) for s in stores)
