"""Feedback on search results: ``rankseam feedback list|export|delete`` (docs/store.md,
"Feedback"). Applications record feedback with ``Memory.feedback``; these commands read it
and remove it. Deleting a namespace's feedback, or everyone's, asks first (``--yes`` answers
for scripts), as ``reset`` does.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import click

from rankseam.commands.common import (
    CommandError,
    confirm_or_refuse,
    echo_report,
    json_option,
    open_store,
    store_options,
)
from rankseam.types import FeedbackRecord

__all__ = ["feedback"]

namespace_option = click.option(
    "--namespace", "-n", default=None, help="Namespace (default: the configured one)."
)
all_option = click.option(
    "--all-namespaces", "all_namespaces", is_flag=True, help="Every namespace's feedback."
)
since_option = click.option(
    "--since",
    default=None,
    help="Only feedback recorded at or after this time (ISO 8601, e.g. 2026-12-07T18:00).",
)


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="seconds")


def _line(record: FeedbackRecord) -> str:
    used = ",".join(
        f"{mid}@{rank}" for mid, rank in zip(record.used, record.used_ranks, strict=True)
    )
    return (
        f"{record.feedback_id}  {_when(record.created_at)}  {record.namespace}  "
        f"{len(record.shown)} shown, used [{used}]  {record.query!r}"
    )


@click.group()
def feedback() -> None:
    """List, export or delete the feedback applications recorded on search results."""


@feedback.command("list")
@store_options
@namespace_option
@all_option
@since_option
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N records.")
@json_option
def list_(
    db: str | None,
    config_file: str | None,
    namespace: str | None,
    all_namespaces: bool,
    since: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """List recorded feedback, oldest first."""
    with open_store(db, config_file, create=False) as memory:
        records = memory.feedback_records(
            namespace, since=since, limit=limit, all_namespaces=all_namespaces
        )
    echo_report(
        {"feedback": [record.to_dict() for record in records]},
        as_json,
        [_line(record) for record in records] or ["no feedback recorded"],
    )


@feedback.command("export")
@click.argument("out", type=click.Path(dir_okay=False, allow_dash=True))
@store_options
@namespace_option
@all_option
@since_option
@json_option
def export(
    out: str,
    db: str | None,
    config_file: str | None,
    namespace: str | None,
    all_namespaces: bool,
    since: str | None,
    as_json: bool,
) -> None:
    """Write recorded feedback to OUT as JSON lines (one record per line; - for stdout)."""
    with open_store(db, config_file, create=False) as memory:
        target = sys.stdout if out == "-" else out
        count = memory.export_feedback(
            target, namespace, since=since, all_namespaces=all_namespaces
        )
    if out != "-":
        echo_report(
            {"exported": count, "path": out}, as_json, [f"exported {count} record(s) to {out}"]
        )


@feedback.command("delete")
@click.argument("feedback_ids", nargs=-1)
@store_options
@click.option(
    "--namespace", "-n", default=None,
    help="Delete every record of this namespace (named explicitly: there is no default).",
)  # fmt: skip
@all_option
@click.option("--yes", is_flag=True, help="Do not ask: delete a namespace's or all feedback.")
@json_option
def delete(
    feedback_ids: tuple[str, ...],
    db: str | None,
    config_file: str | None,
    namespace: str | None,
    all_namespaces: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Delete feedback records by id, or a namespace's (--namespace) or all (--all-namespaces);
    memories are never touched."""
    with open_store(db, config_file, create=False) as memory:
        if feedback_ids:
            if namespace is not None or all_namespaces:
                raise CommandError(
                    "give feedback ids, or --namespace, or --all-namespaces: one of them",
                    kind="ValidationError",
                )
            count = memory.delete_feedback(list(feedback_ids))
        else:
            what = "every namespace" if all_namespaces else f"namespace {namespace!r}"
            if namespace is None and not all_namespaces:
                raise CommandError(
                    "name the feedback ids to delete, or --namespace NAME, or --all-namespaces",
                    kind="ValidationError",
                )
            confirm_or_refuse(
                yes,
                f"this deletes the feedback of {what} for good",
                f"Delete the feedback of {what} in {memory.path} for good?",
            )
            count = memory.delete_feedback(
                namespace=namespace, all_namespaces=all_namespaces, confirm=True
            )
    echo_report({"deleted": count}, as_json, [f"deleted {count} feedback record(s)"])
