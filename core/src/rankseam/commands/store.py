"""Store commands: ``add``, ``ingest``, ``stats``, ``reembed`` (``search`` is
:mod:`rankseam.commands.search`, re-exported here).

Every command takes ``--db PATH|URL`` (default: ``RANKSEAM_DB``, else the platform default) and
``--config FILE`` (a ``rankseam.toml``). ``search`` also accepts ``--<component>-<option>
VALUE`` for the chosen reranker, e.g. ``--rerank mmr --mmr-lambda 0.7`` (VALUE is a TOML
literal: number, bool or string; a bare word is a string).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from rankseam.checks import parse_json
from rankseam.commands.common import (
    CommandError,
    echo_json,
    json_option,
    open_store,
    store_options,
    structure_options,
)
from rankseam.commands.search import (
    COMPONENT_ARGS,
    ComponentOptionsCommand,
    parse_component_options,
    search,
)
from rankseam.errors import RankseamError, StoreError, ValidationError
from rankseam.memory import IngestError, ReembedProgress
from rankseam.types import MAX_INT64
from rankseam.writing.ingest import MAX_LINE_BYTES

__all__ = [
    "COMPONENT_ARGS",
    "ComponentOptionsCommand",
    "add",
    "ingest",
    "parse_component_options",
    "reembed",
    "search",
    "stats",
]


# -- add -----------------------------------------------------------------------------------


@click.command()
@click.argument("text")
@store_options
@click.option("--namespace", "-n", default=None, help="Namespace (default: the configured one).")
@click.option("--id", "memory_id", default=None, help="Memory id (default: a new random id).")
@click.option("--importance", type=float, default=0.5, show_default=True)
@click.option("--metadata", default=None, help="Metadata as a JSON object.")
@click.option("--gate/--no-gate", default=None, help="Ask the write gate first.")
@structure_options(keep=False)
@json_option
def add(
    text: str,
    db: str | None,
    config_file: str | None,
    namespace: str | None,
    memory_id: str | None,
    importance: float,
    metadata: str | None,
    gate: bool | None,
    thread: str | None,
    position: Any,
    derived_from: str | None,
    as_json: bool,
) -> None:
    """Add one memory."""
    meta = None
    if metadata is not None:
        try:
            meta = parse_json(os.fsencode(metadata))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--metadata") from None
    with open_store(db, config_file) as memory:
        result = memory.add(
            text,
            namespace=namespace,
            memory_id=memory_id,
            importance=importance,
            metadata=meta,
            gate=gate,
            thread=thread,
            position=position,
            derived_from=derived_from,
        )
    out = {
        "stored": result.stored,
        "unchanged": result.unchanged,
        "ref": result.ref.to_dict() if result.ref else None,
        "gate": None
        if result.gate is None
        else {"outcome": result.gate.outcome.value, "degraded": result.gate.degraded},
    }
    if as_json:
        echo_json(out)
    elif result.ref is not None:
        r = result.ref
        if result.unchanged:
            click.echo(
                f"unchanged {r.namespace}/{r.memory_id} revision {r.revision} (already stored)"
            )
        else:
            click.echo(f"stored {r.namespace}/{r.memory_id} revision {r.revision}")
    else:
        click.echo("not stored: the write gate said no")


# -- ingest --------------------------------------------------------------------------------


class _BadLine(ValidationError):
    """A line of the ingest file cannot be read as a record (``number`` is its line)."""

    def __init__(self, number: int, reason: str) -> None:
        super().__init__(f"line {number}: {reason}")
        self.number = number
        self.reason = reason


def _jsonl_records(path: str, lines_of: list[int]) -> Iterator[Any]:
    """The records of a JSONL file (``-``: stdin), read in bytes one line at a time: a line is
    refused (:class:`_BadLine`) when it is longer than :data:`MAX_LINE_BYTES`, not UTF-8, not
    JSON or nested too deeply, before any of it is parsed further."""
    stream = sys.stdin.buffer if path == "-" else open(path, "rb")
    try:
        number = 0
        while line := stream.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(line) > MAX_LINE_BYTES:
                raise _BadLine(
                    number,
                    f"longer than {MAX_LINE_BYTES} bytes; one line holds one record (a text of "
                    "at most 1,000,000 characters): split it",
                )
            if not line.strip():
                continue
            try:
                record = parse_json(line)
            except ValueError as exc:
                raise _BadLine(number, str(exc)) from None
            lines_of.append(number)
            yield record
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _count_lines(path: str) -> int | None:
    """About how many records ``path`` holds (its line breaks), for the progress bar."""
    if path == "-":
        return None
    count, content = 0, False
    with open(path, "rb") as fh:  # in blocks: a huge line is never held whole
        for block in iter(lambda: fh.read(1 << 20), b""):
            *ended, rest = block.split(b"\n")
            for part in ended:
                count += content or bool(part.strip())
                content = False
            content = content or bool(rest.strip())
    return count + content


def _ingest_failure(committed: int, lines_of: list[int], where: str, reason: str) -> str:
    """``N records committed, line L: reason; ...``: what was kept and where to resume."""
    if not committed:
        return f"0 records committed, {where}: {reason}; nothing was stored: fix it and run again"
    last = lines_of[committed - 1]
    return (
        f"{committed} records committed, {where}: {reason}; nothing of its batch was written: "
        f"lines up to {last} are stored, fix it and resume after line {last}"
    )


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@store_options
@click.option("--namespace", "-n", default=None, help="Namespace of records that name none.")
@click.option("--batch-size", type=click.IntRange(1, MAX_INT64), default=500, show_default=True)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr (default: only when stderr is a terminal).",
)
@json_option
def ingest(
    file: str,
    db: str | None,
    config_file: str | None,
    namespace: str | None,
    batch_size: int,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Bulk-add memories from a JSONL file (one JSON object per line: text, id, importance,
    metadata, namespace, created_at). Each batch is written all or nothing."""
    if file != "-" and not Path(file).is_file():
        raise click.BadParameter(f"{file!r} does not exist", param_hint="FILE")
    lines_of: list[int] = []
    committed = [0]
    if progress is None:
        progress = sys.stderr.isatty()
    total = _count_lines(file) if progress else None
    with open_store(db, config_file) as memory:
        bar_cm = (
            click.progressbar(length=total or 0, label="ingest", file=sys.stderr, show_pos=True)
            if progress and total
            else None
        )
        bar = bar_cm.__enter__() if bar_cm else None

        def tick(n: int) -> None:
            committed[0] += n
            if bar is not None:
                bar.update(n)

        try:
            report = memory.ingest(
                _jsonl_records(file, lines_of),
                namespace=namespace,
                batch_size=batch_size,
                progress=tick,
            )
        except IngestError as exc:
            line = lines_of[exc.index - 1] if 0 < exc.index <= len(lines_of) else exc.index
            raise CommandError(
                _ingest_failure(exc.committed, lines_of, f"line {line}", exc.reason),
                kind=type(exc).__name__,
            ) from None
        except _BadLine as exc:
            raise CommandError(
                _ingest_failure(committed[0], lines_of, f"line {exc.number}", exc.reason),
                kind="IngestError",
            ) from None
        except OSError as exc:
            raise CommandError(
                _ingest_failure(
                    committed[0], lines_of, f"reading {file!r}", exc.strerror or str(exc)
                ),
                kind="IngestError",
            ) from None
        except RankseamError as exc:  # the store failed (a full disk): say what was kept
            raise CommandError(
                f"{committed[0]} records committed, then: {exc}", kind=type(exc).__name__
            ) from None
        finally:
            if bar_cm is not None:
                bar_cm.__exit__(None, None, None)
        # a large namespace gets its ANN index now, not in the first search's background
        namespaces = {namespace} if namespace is not None else set(memory.namespaces())
        indexed, index_error = _maintain_indexes(memory, namespaces)
    if as_json:
        extra = {} if index_error is None else {"ann_error": index_error}
        echo_json({**report.to_dict(), "ann_indexed": sum(m.count for m in indexed), **extra})
    else:
        d = report.to_dict()
        click.echo(
            f"{d['records']} records: {d['added']} added, {d['updated']} updated, "
            f"{d['unchanged']} unchanged in {d['batches']} batch(es), {d['seconds']} s"
        )
    if index_error is not None:
        click.echo(f"warning: every record is stored, but {index_error}", err=True)


def _maintain_indexes(memory: Any, namespaces: set[str]) -> tuple[list[Any], str | None]:
    """Bring the ANN index of each namespace up to date: the manifests, and the first index
    that could not be saved (a full disk: :class:`StoreError`, in the user's words). The
    records are stored either way; searches are exact where an index is missing."""
    indexed: list[Any] = []
    for ns in sorted(namespaces, key=str):
        try:
            manifest = memory.maintain_index(ns)
        except StoreError as exc:
            return indexed, str(exc)
        if manifest:
            indexed.append(manifest)
    return indexed, None


# -- stats / reembed -----------------------------------------------------------------------


@click.command()
@store_options
def stats(db: str | None, config_file: str | None) -> None:
    """Print store statistics as JSON."""
    with open_store(db, config_file, create=False) as memory:
        echo_json(memory.stats())


@click.command()
@store_options
@click.option("--embedder", default=None, help="Embedder name (default: the configured one).")
@click.option(
    "--batch-size",
    type=click.IntRange(1, MAX_INT64),
    default=500,
    show_default=True,
    help="Memories embedded and stored per transaction.",
)
@click.option(
    "--max",
    "max_memories",
    type=click.IntRange(1, MAX_INT64),
    default=None,
    help="Stop after embedding this many memories (run again to continue).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress on stderr [default: when stderr is a terminal].",
)
@json_option
def reembed(
    db: str | None,
    config_file: str | None,
    embedder: str | None,
    batch_size: int,
    max_memories: int | None,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Embed every live memory that lacks a vector in an embedder's space. Resumable: an
    interrupted run keeps what it stored, and the next run embeds only what is left."""
    if progress is None:
        progress = sys.stderr.isatty()
    with open_store(db, config_file, create=False) as memory:
        report = memory.reembed(
            embedder,
            batch_size=batch_size,
            progress=_reembed_lines if progress and not _has_tqdm() else progress,
            max_memories=max_memories,
        )
        counts = memory.stats()
        coverage = counts["vectors_by_space"].get(report.space, 0)
        live = counts["memories"]
    if as_json:
        echo_json({**report.to_dict(), "vectors": coverage, "memories": live})
        return
    click.echo(f"embedded {report.embedded} memories into {report.space} in {report.seconds:.2f} s")
    if not report.complete:
        click.echo(
            f"stopped at --max {max_memories}: {coverage} of {live} live memories have a vector "
            "in that space; run the command again to continue"
        )
    elif embedder and embedder != memory.config.embedder:
        click.echo(
            f"to search with it, set embedder = {embedder!r} in rankseam.toml "
            f"or RANKSEAM_EMBEDDER={embedder}"
        )


def _has_tqdm() -> bool:
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


def _reembed_lines(p: ReembedProgress) -> None:
    """Progress without tqdm: one line on stderr per batch."""
    click.echo(
        f"reembed {p.space}: {p.embedded} embedded, about {p.remaining} left "
        f"({100 * p.fraction:.0f} %)",
        err=True,
    )
