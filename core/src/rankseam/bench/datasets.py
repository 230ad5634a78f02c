"""Benchmark datasets: LoCoMo (conversation memory) and any BEIR-format folder.

A dataset is a list of :class:`Collection` s — each one store of memories with the queries
asked of it (one per LoCoMo conversation; one for a BEIR corpus). Every record carries its
duplicate *group* and every query its graded relevance over groups (docs/benchmarks.md).

Dataset specs (the ``--dataset`` option):

- ``locomo`` — ``locomo-dev.json`` under ``$RANKSEAM_DATA``, else the first
  ``shared/data/locomo-dev.json`` found above the working directory or this package;
- ``locomo:PATH`` — any JSON file of the LoCoMo schema;
- ``beir:PATH`` — a BEIR folder holding ``corpus.jsonl``, ``queries.jsonl`` and
  ``qrels/test.tsv``;
- ``beir:PATH@SPLIT`` — the same folder with the queries and judgements of another split,
  ``qrels/SPLIT.tsv`` (e.g. ``beir:../shared/data/scifact-train@train``, the development
  split; ``rankseam bench quality --split train`` says the same).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from rankseam.errors import ConfigurationError
from rankseam.types import frozen_mapping

__all__ = [
    "CATEGORY_NAMES",
    "HEADLINE_CATEGORIES",
    "LOCOMO_FILE",
    "Collection",
    "Dataset",
    "Query",
    "Record",
    "find_locomo",
    "load_beir",
    "load_dataset",
    "load_locomo",
]

LOCOMO_FILE = "locomo-dev.json"
#: What a BEIR split name may look like (``train``, ``dev``, ``test``, ``test-2``...).
_SPLIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
#: Categories averaged into the headline figures; category 5 (adversarial) is reported alone.
HEADLINE_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}


@attrs.frozen
class Record:
    """One memory to ingest. ``group`` is its duplicate group (LoCoMo: source ``dia_id``).
    ``thread``, ``position``, ``derived_from`` and ``created_at`` are its structure and time
    when the dataset has them (LoCoMo: a turn's session, its place in it and the session's
    date; an observation's source turn), else None."""

    id: str
    text: str
    group: str
    kind: str = "document"
    thread: str | None = None
    position: float | None = None
    derived_from: str | None = None
    created_at: float | None = None

    def to_ingest(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "metadata": {"group": self.group, "kind": self.kind},
        }
        for key in ("thread", "position", "derived_from", "created_at"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@attrs.frozen
class Query:
    """One question; ``relevance`` maps relevant groups to their gain (> 0)."""

    id: str
    text: str
    relevance: Mapping[str, float] = attrs.field(converter=frozen_mapping)
    category: int | None = None


@attrs.frozen
class Collection:
    """What one store holds and the queries asked of it."""

    name: str
    records: tuple[Record, ...]
    queries: tuple[Query, ...]

    def group_of(self) -> dict[str, str]:
        return {r.id: r.group for r in self.records}


@attrs.frozen
class Dataset:
    """A loaded dataset. ``stats`` holds the counts a report must show (dropped evidence, ...)."""

    name: str
    kind: str
    source: str
    collections: tuple[Collection, ...]
    stats: Mapping[str, Any] = attrs.field(converter=frozen_mapping)

    @property
    def query_count(self) -> int:
        return sum(len(c.queries) for c in self.collections)

    @property
    def record_count(self) -> int:
        return sum(len(c.records) for c in self.collections)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------- LoCoMo


def find_locomo() -> Path:
    """Locate ``locomo-dev.json`` (``$RANKSEAM_DATA``, then ``shared/data`` above us)."""
    env = os.environ.get("RANKSEAM_DATA")
    if env:
        path = Path(env) / LOCOMO_FILE
        if path.is_file():
            return path
        raise ConfigurationError(
            f"RANKSEAM_DATA={env!r} holds no {LOCOMO_FILE}; point it at the folder that has it "
            "or pass --dataset locomo:PATH"
        )
    starts = [Path.cwd().resolve(), Path(__file__).resolve().parent]
    for start in starts:
        for parent in (start, *start.parents):
            path = parent / "shared" / "data" / LOCOMO_FILE
            if path.is_file():
                return path
    raise ConfigurationError(
        f"could not find {LOCOMO_FILE}: set RANKSEAM_DATA to the folder that holds it, or pass "
        "--dataset locomo:PATH"
    )


def _turn_text(turn: Mapping[str, Any]) -> str:
    text = f"{turn.get('speaker', '')}: {turn.get('text', '')}".strip()
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares an image: {caption}]"
    return text


def _session_date(value: object) -> float | None:
    """A LoCoMo session date (``"1:56 pm on 8 May, 2023"``) as POSIX seconds, read as UTC;
    None when there is none or it reads otherwise."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return when.replace(tzinfo=UTC).timestamp()


def _iter_turns(
    conversation: Mapping[str, Any],
) -> Iterator[tuple[str, int, float | None, Mapping[str, Any]]]:
    """``(session, place, date, turn)`` of every turn of every ``session_N`` list, in session
    order: the session's key, the turn's place in it (0, 1, ...) and the session's date
    (``session_N_date_time``, POSIX seconds) when it has one. Date keys without a session and
    other non-list values are ignored."""

    def order(key: str) -> int:
        tail = key.rsplit("_", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    for key in sorted(conversation, key=order):
        value = conversation[key]
        if key.startswith("session_") and isinstance(value, list):
            date = _session_date(conversation.get(f"{key}_date_time"))
            place = 0
            for turn in value:
                if isinstance(turn, Mapping) and turn.get("dia_id"):
                    yield key, place, date, turn
                    place += 1


def _iter_observations(observation: Any) -> Iterator[tuple[str, str]]:
    """(fact text, source dia_id) pairs of a sample's ``observation`` block."""
    if not isinstance(observation, Mapping):
        return
    for _session, per_speaker in observation.items():
        if not isinstance(per_speaker, Mapping):
            continue
        for _speaker, facts in per_speaker.items():
            for fact in facts or ():
                if (
                    isinstance(fact, list | tuple)
                    and len(fact) == 2
                    and isinstance(fact[0], str)
                    and fact[0].strip()
                ):
                    sources = fact[1] if isinstance(fact[1], list) else [fact[1]]
                    for source in sources:
                        if isinstance(source, str):
                            yield fact[0], source


def load_locomo(path: str | os.PathLike[str] | None = None) -> Dataset:
    """Load a LoCoMo-schema file: one collection per conversation.

    Memories are the turns (id = ``dia_id``, group = ``dia_id``; thread = the session,
    ``session_N``; position = the turn's place in the session; created_at = the session's
    date) and the observations (id ``<dia_id>/obs<N>``, group = their source ``dia_id``,
    derived_from = that turn when the conversation has it). Evidence ids matching no turn are
    dropped and counted; a query left without evidence is skipped and counted.
    """
    p = Path(path) if path is not None else find_locomo()
    try:
        samples = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"LoCoMo file {str(p)!r} does not exist") from None
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"LoCoMo file {str(p)!r} is not valid JSON: {exc}") from None
    if not isinstance(samples, list):
        raise ConfigurationError(
            f"LoCoMo file {str(p)!r} must hold a JSON list of samples (conversation, qa, ...)"
        )
    collections: list[Collection] = []
    dropped_ids: list[str] = []
    skipped = 0
    orphan_observations = 0
    turns_total = 0
    obs_total = 0
    for index, sample in enumerate(samples):
        name = str(sample.get("sample_id") or f"sample-{index}")
        records: list[Record] = []
        turn_ids: set[str] = set()
        for session, place, date, turn in _iter_turns(sample.get("conversation") or {}):
            dia_id = str(turn["dia_id"])
            if dia_id in turn_ids:
                continue
            turn_ids.add(dia_id)
            records.append(
                Record(
                    dia_id,
                    _turn_text(turn),
                    dia_id,
                    "turn",
                    thread=session,
                    position=float(place),
                    created_at=date,
                )
            )
        turns_total += len(turn_ids)
        per_source: dict[str, int] = {}
        for text, source in _iter_observations(sample.get("observation")):
            if source not in turn_ids:
                orphan_observations += 1
            n = per_source[source] = per_source.get(source, 0) + 1
            records.append(
                Record(
                    f"{source}/obs{n}",
                    text,
                    source,
                    "observation",
                    derived_from=source if source in turn_ids else None,
                )
            )
            obs_total += 1
        queries: list[Query] = []
        for qi, qa in enumerate(sample.get("qa") or ()):
            evidence: dict[str, float] = {}
            for ev in qa.get("evidence") or ():
                ev_id = str(ev).strip()
                if ev_id in turn_ids:
                    evidence[ev_id] = 1.0
                else:
                    dropped_ids.append(ev_id)
            question = str(qa.get("question") or "").strip()
            if not evidence or not question:
                skipped += 1
                continue
            category = qa.get("category")
            queries.append(
                Query(
                    f"{name}/q{qi}",
                    question,
                    evidence,
                    int(category)
                    if isinstance(category, int | str) and str(category).isdigit()
                    else None,
                )
            )
        collections.append(Collection(name, tuple(records), tuple(queries)))
    return Dataset(
        name="locomo",
        kind="locomo",
        source=str(p),
        collections=tuple(collections),
        stats={
            "sha256": _sha256(p),
            "conversations": len(collections),
            "turns": turns_total,
            "observations": obs_total,
            "observations_with_unknown_source": orphan_observations,
            "queries": sum(len(c.queries) for c in collections),
            "dropped_evidence_ids": len(dropped_ids),
            "dropped_evidence_examples": sorted(set(dropped_ids))[:10],
            "skipped_queries_no_evidence": skipped,
        },
    )


# ----------------------------------------------------------------------------------------- BEIR


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigurationError(f"{path}:{lineno} is not valid JSON: {exc}") from None


def load_beir(folder: str | os.PathLike[str], *, split: str = "test") -> Dataset:
    """Load a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``).

    Only the queries judged in ``qrels/<split>.tsv`` are asked, so a folder holding several
    splits yields the queries of the one chosen.

    Every document is its own group; relevance is the qrels grade (grades <= 0 are ignored).
    Qrels naming an unknown document are dropped and counted; queries left with no relevant
    document are skipped.
    """
    root = Path(folder)
    if not split or not _SPLIT.fullmatch(split):
        raise ConfigurationError(
            f"BEIR split {split!r} is not a split name; use letters, digits, '-' or '_', "
            "e.g. beir:PATH@train"
        )
    needed = [root / "corpus.jsonl", root / "queries.jsonl", root / "qrels" / f"{split}.tsv"]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        splits = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
        hint = (
            f"; this folder has the split(s) {', '.join(splits)}: pass "
            f"beir:{root}@{splits[0]} (or --split {splits[0]})"
            if splits and needed[2].name not in {f"{s}.tsv" for s in splits}
            else "; a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv"
        )
        raise ConfigurationError(
            f"{str(root)!r} is not a BEIR folder for split {split!r}: missing "
            f"{', '.join(missing)}{hint}"
        )
    records = []
    doc_ids: set[str] = set()
    for doc in _read_jsonl(needed[0]):
        doc_id = str(doc.get("_id", ""))
        if not doc_id or doc_id in doc_ids:
            continue
        title = str(doc.get("title") or "").strip()
        body = str(doc.get("text") or "").strip()
        text = f"{title}\n{body}" if title and body else (title or body)
        if not text:
            continue
        doc_ids.add(doc_id)
        records.append(Record(doc_id, text, doc_id, "document"))
    query_text = {str(r.get("_id")): str(r.get("text") or "") for r in _read_jsonl(needed[1])}
    qrels: dict[str, dict[str, float]] = {}
    mentioned: set[str] = set()
    dropped = 0
    with needed[2].open(encoding="utf-8", newline="") as fh:
        for row in csv.reader(fh, delimiter="\t"):
            if len(row) < 3 or row[0] == "query-id":
                continue
            qid, did, grade = row[0], row[1], row[2]
            mentioned.add(qid)
            try:
                gain = float(grade)
            except ValueError:
                continue
            if gain <= 0:
                continue
            if did not in doc_ids:
                dropped += 1
                continue
            qrels.setdefault(qid, {})[did] = gain
    queries = []
    skipped = 0
    for qid in sorted(mentioned):
        text = query_text.get(qid, "").strip()
        if not text or not qrels.get(qid):
            skipped += 1
            continue
        queries.append(Query(qid, text, qrels[qid], None))
    return Dataset(
        name=f"beir:{root.name}" if split == "test" else f"beir:{root.name}@{split}",
        kind="beir",
        source=str(root),
        collections=(Collection(root.name, tuple(records), tuple(queries)),),
        stats={
            "documents": len(records),
            "queries": len(queries),
            "split": split,
            "dropped_qrels_unknown_document": dropped,
            "skipped_queries_no_relevant": skipped,
        },
    )


def load_dataset(spec: str, *, split: str | None = None) -> Dataset:
    """``locomo``, ``locomo:PATH``, ``beir:PATH`` or ``beir:PATH@SPLIT`` (see the module
    docstring). ``split`` chooses the BEIR split when the spec names none (default ``test``);
    a spec that names one must agree with it."""
    name, _, path = spec.partition(":")
    if name == "locomo":
        if split is not None:
            raise ConfigurationError(
                f"--split applies to BEIR folders only; LoCoMo ({spec!r}) has no splits"
            )
        return load_locomo(path or None)
    if name == "beir" and path:
        folder, at, named = path.rpartition("@")
        if not at or not _SPLIT.fullmatch(named) or not folder or Path(path).is_dir():
            folder, named = path, ""  # no split named (or a folder whose name holds '@')
        if named and split is not None and split != named:
            raise ConfigurationError(
                f"dataset {spec!r} names split {named!r} but --split says {split!r}; "
                "give the split once"
            )
        return load_beir(folder, split=named or split or "test")
    raise ConfigurationError(
        f"unknown dataset {spec!r}; use 'locomo', 'locomo:PATH' (a LoCoMo-schema JSON file), "
        "'beir:PATH' (a folder with corpus.jsonl, queries.jsonl, qrels/test.tsv) or "
        "'beir:PATH@SPLIT' (qrels/SPLIT.tsv, e.g. @train)"
    )
