"""A memory's history and the hard deletes: ``history``, ``forget`` and ``reset``
(docs/store.md, "History" and "Forgetting").

``delete`` (:mod:`rankseam.commands.memories`) tombstones a memory and keeps every revision
readable; ``forget`` removes every revision for good; ``reset`` forgets a whole namespace and
asks first (``--yes`` answers for scripts).
"""

from __future__ import annotations

from datetime import UTC, datetime

import click

from rankseam.commands.common import (
    confirm_or_refuse,
    echo_report,
    json_option,
    open_store,
    store_options,
)

__all__ = ["forget", "history", "reset"]

namespace_option = click.option(
    "--namespace", "-n", default=None, help="Namespace (default: the configured one)."
)


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="seconds")


def _preview(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@click.command()
@click.argument("memory_id")
@store_options
@namespace_option
@json_option
def history(
    memory_id: str, db: str | None, config_file: str | None, namespace: str | None, as_json: bool
) -> None:
    """Show every revision of a memory, oldest first (and whether it is deleted)."""
    with open_store(db, config_file, create=False) as memory:
        revisions = memory.history(memory_id, namespace=namespace)
    first = revisions[0].ref
    out = {
        "namespace": first.namespace,
        "memory_id": first.memory_id,
        "deleted": revisions[-1].deleted,
        "revisions": [r.to_dict() for r in revisions],
    }
    state = " (deleted)" if out["deleted"] else ""
    lines = [f"{first.namespace}/{first.memory_id}: {len(revisions)} revision(s){state}"]
    lines += [
        f"  r{r.ref.revision}  {_when(r.created_at)}  importance={r.importance}  {_preview(r.text)}"
        for r in revisions
    ]
    echo_report(out, as_json, lines)


@click.command()
@click.argument("memory_id")
@store_options
@namespace_option
@json_option
def forget(
    memory_id: str, db: str | None, config_file: str | None, namespace: str | None, as_json: bool
) -> None:
    """Hard-delete a memory: every revision's text, metadata and vectors, for good."""
    with open_store(db, config_file, create=False) as memory:
        done = memory.forget(memory_id, namespace=namespace)
    echo_report(
        {"forgotten": {**done.to_dict(), "memory_id": memory_id}},
        as_json,
        [
            f"forgot {done.namespace}/{memory_id}: {done.revisions} revision(s) removed; only "
            f"the id and the time ({_when(done.forgotten_at)}) stay"
        ],
    )


@click.command()
@store_options
@click.option(
    "--namespace", "-n", required=True,
    help="The namespace to forget entirely (required: there is no default).",
)  # fmt: skip
@click.option("--yes", is_flag=True, help="Do not ask: forget every memory of the namespace.")
@json_option
def reset(
    db: str | None, config_file: str | None, namespace: str, yes: bool, as_json: bool
) -> None:
    """Forget every memory of a namespace, for good (asks first; --yes does not)."""
    with open_store(db, config_file, create=False) as memory:
        if not yes:
            counts = memory.stats()["namespaces"].get(namespace, {})
            held = counts.get("memories", 0) + counts.get("deleted", 0)
            confirm_or_refuse(
                yes,
                f"reset forgets every memory of namespace {namespace!r} for good and cannot "
                "be undone",
                f"Forget all {held} memories of namespace {namespace!r} in {memory.path} "
                "for good (text, metadata, vectors and history)?",
            )
        done = memory.reset(namespace, confirm=True)
    echo_report(
        {"reset": done.to_dict()},
        as_json,
        [
            f"forgot {done.memories} memories ({done.revisions} revisions) of namespace "
            f"{done.namespace!r}"
        ],
    )
