"""Commands on single memories: ``get``, ``list`` (paged), ``update``, ``delete``.

Each takes ``--db``/``--config`` (see :mod:`rankseam.commands.common`), ``--namespace`` and
``--json``. Read-only commands refuse a missing store instead of creating one.
"""

from __future__ import annotations

import os
import sys
from itertools import islice
from typing import Any

import click

from rankseam.checks import parse_json
from rankseam.commands.common import (
    echo_report,
    filter_options,
    json_option,
    open_store,
    place_of,
    store_options,
    structure_options,
)
from rankseam.types import MAX_INT64, MemoryRef

__all__ = ["delete", "get", "list_", "update"]

namespace_option = click.option(
    "--namespace", "-n", default=None, help="Namespace (default: the configured one)."
)


def _preview(text: str, width: int = 72) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _place(memory: dict[str, Any]) -> str:
    """``  [thread T #position]`` for a listed memory in a thread."""
    if memory.get("thread") is None:
        return ""
    return f"  [{memory['thread']} #{memory['position']:.15g}]"


def _metadata(value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = parse_json(os.fsencode(value))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--metadata") from None
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--metadata")
    return parsed


@click.command()
@click.argument("memory_id")
@store_options
@namespace_option
@click.option(
    "--revision",
    type=click.IntRange(1, MAX_INT64),
    default=None,
    help="An exact revision (1 up to 2**63 - 1).",
)
@json_option
def get(
    memory_id: str,
    db: str | None,
    config_file: str | None,
    namespace: str | None,
    revision: int | None,
    as_json: bool,
) -> None:
    """Show a memory: its current revision, or exactly --revision N."""
    with open_store(db, config_file, create=False) as memory:
        if revision is None:
            stored = memory.get(memory_id, namespace=namespace)
        else:
            ns = memory.config.namespace if namespace is None else namespace
            stored = memory.get(MemoryRef(ns, memory_id, revision))
    out = stored.to_dict()
    state = " (deleted)" if out.get("deleted") else ""
    echo_report(
        out,
        as_json,
        [
            f"{out['namespace']}/{out['memory_id']} revision {out['revision']}{state}  "
            f"importance={out['importance']}{place_of(stored)}",
            out["text"],
        ],
    )


@click.command(name="list")
@store_options
@namespace_option
@click.option(
    "--limit", type=click.IntRange(min=1, max=10_000), default=50, show_default=True,
    help="Memories per page.",
)  # fmt: skip
@click.option(
    "--offset", type=click.IntRange(0, MAX_INT64), default=0, show_default=True,
    help="Memories to skip (the previous page's next offset).",
)  # fmt: skip
@click.option("--include-deleted", is_flag=True, help="Also list deleted memories.")
@filter_options(min_score=False)
@json_option
def list_(
    db: str | None,
    config_file: str | None,
    namespace: str | None,
    limit: int,
    offset: int,
    include_deleted: bool,
    where: dict[str, Any] | None,
    thread: str | None,
    since: Any,
    until: Any,
    as_json: bool,
) -> None:
    """List a namespace's memories (current revisions), one page at a time, oldest first.

    With --where JSON, --thread, --since or --until, only the live memories that pass the
    filter (docs/filters.md)."""
    with open_store(db, config_file, create=False) as memory:
        ns = memory.config.namespace if namespace is None else namespace
        stream = memory.list(
            ns,
            include_deleted=include_deleted,
            where=where,
            thread=thread,
            since=since,
            until=until,
        )
        stop = min(offset + limit + 1, sys.maxsize)  # islice's bound
        page = [m.to_dict() for m in islice(stream, offset, stop)]
    more = len(page) > limit
    page = page[:limit]
    next_offset = offset + limit if more else None
    out = {
        "namespace": ns,
        "offset": offset,
        "limit": limit,
        "memories": page,
        "next_offset": next_offset,
    }
    lines = [
        f"{m['memory_id']}  r{m['revision']}{' (deleted)' if m.get('deleted') else ''}  "
        f"{_preview(m['text'])}{_place(m)}"
        for m in page
    ]
    if not page:
        lines.append(f"no memories in namespace {ns!r} at offset {offset}")
    if next_offset is not None:
        lines.append(f"more: rankseam list --offset {next_offset} --limit {limit}")
    echo_report(out, as_json, lines)


@click.command()
@click.argument("memory_id")
@click.argument("text")
@store_options
@namespace_option
@click.option(
    "--importance", type=click.FloatRange(0, 1), default=None,
    help="New importance (default: the previous revision's).",
)  # fmt: skip
@click.option("--metadata", default=None, help="New metadata as a JSON object (default: kept).")
@structure_options(keep=True)
@json_option
def update(
    memory_id: str,
    text: str,
    db: str | None,
    config_file: str | None,
    namespace: str | None,
    importance: float | None,
    metadata: str | None,
    thread: str | None,
    position: Any,
    derived_from: str | None,
    as_json: bool,
) -> None:
    """Write a new revision of a memory; the previous revision stays readable."""
    meta = _metadata(metadata)
    with open_store(db, config_file, create=False) as memory:
        ref = memory.update(
            memory_id,
            text,
            namespace=namespace,
            importance=importance,
            metadata=meta,
            thread=thread,
            position=position,
            derived_from=derived_from,
        )
    echo_report(
        {"updated": ref.to_dict()},
        as_json,
        [f"updated {ref.namespace}/{ref.memory_id}: revision {ref.revision}"],
    )


@click.command()
@click.argument("memory_id")
@store_options
@namespace_option
@json_option
def delete(
    memory_id: str, db: str | None, config_file: str | None, namespace: str | None, as_json: bool
) -> None:
    """Delete a memory from search; its revisions stay readable (get --revision N)."""
    with open_store(db, config_file, create=False) as memory:
        ref = memory.delete(memory_id, namespace=namespace)
    echo_report(
        {"deleted": ref.to_dict()},
        as_json,
        [f"deleted {ref.namespace}/{ref.memory_id} (revision {ref.revision} stays readable)"],
    )
