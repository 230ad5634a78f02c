"""Snapshot commands: ``export``, ``verify``, ``import``. See docs/snapshots.md.

``rankseam export --db PATH OUT [--gzip]`` writes the snapshot folder ``OUT``;
``rankseam verify OUT`` checks it completely; ``rankseam import OUT --db NEW [--merge]``
hydrates a store in one transaction. A refused snapshot exits with status 2 and one line
saying what is wrong and what to do.
"""

from __future__ import annotations

import json
from typing import Any

import click

from rankseam.errors import RankseamError
from rankseam.memory import Memory, open_memory
from rankseam.store.snapshot import verify_snapshot

__all__ = ["export", "import_", "verify"]


class _Refused(click.ClickException):
    exit_code = 2


def _open(db: str | None, config_file: str | None, *, create: bool = True) -> Memory:
    try:
        return open_memory(db, config_file=config_file, create=create)
    except RankseamError as exc:
        raise _Refused(str(exc)) from None


def _echo(value: dict[str, Any], as_json: bool, lines: list[str]) -> None:
    if as_json:
        click.echo(json.dumps(value, indent=2, ensure_ascii=False))
    else:
        for line in lines:
            click.echo(line)


_db = click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="The store file (default: RANKSEAM_DB, else the platform data directory).",
)
_config = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A rankseam.toml configuration file.",
)
_json = click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")


@click.command()
@click.argument("out", type=click.Path(file_okay=False))
@_db
@_config
@click.option("--gzip", "use_gzip", is_flag=True, help="Compress the data file (gzip).")
@_json
def export(
    out: str, db: str | None, config_file: str | None, use_gzip: bool, as_json: bool
) -> None:
    """Write a portable snapshot of the store into the new folder OUT."""
    with _open(db, config_file, create=False) as memory:
        try:
            report = memory.export_snapshot(out, gzip=use_gzip)
        except RankseamError as exc:
            raise _Refused(str(exc)) from None
    _echo(
        report.to_dict(),
        as_json,
        [
            f"exported {report.memories} memories ({report.revisions} revisions, "
            f"{report.vectors} vectors) to {report.path}",
            f"snapshot id {report.snapshot_id}",
        ],
    )


@click.command()
@click.argument("snapshot", type=click.Path(file_okay=False))
@_json
def verify(snapshot: str, as_json: bool) -> None:
    """Check a snapshot: manifest, checksums and every record."""
    try:
        report = verify_snapshot(snapshot)
    except RankseamError as exc:
        raise _Refused(str(exc)) from None
    _echo(
        report.to_dict(),
        as_json,
        [
            f"ok: {report.memories} memories ({report.deleted} deleted, {report.revisions} "
            f"revisions, {report.vectors} vectors) in {len(report.namespaces)} namespace(s)",
            f"snapshot id {report.snapshot_id}",
        ],
    )


@click.command(name="import")
@click.argument("snapshot", type=click.Path(file_okay=False))
@_db
@_config
@click.option(
    "--merge",
    is_flag=True,
    help="Import into a store that already holds memories (never overwrites a newer revision).",
)
@_json
def import_(
    snapshot: str, db: str | None, config_file: str | None, merge: bool, as_json: bool
) -> None:
    """Hydrate the store --db from SNAPSHOT in one transaction."""
    try:
        verify_snapshot(snapshot)  # refuse a bad snapshot before creating or opening a store
    except RankseamError as exc:
        raise _Refused(str(exc)) from None
    with _open(db, config_file) as memory:
        try:
            report = memory.import_snapshot(snapshot, merge=merge)
        except RankseamError as exc:
            raise _Refused(str(exc)) from None
    lines = [
        f"imported {report.memories} memories from snapshot {report.snapshot_id} into {memory.path}"
    ]
    if merge:
        lines.append(
            f"added {report.added}, updated {report.updated}, unchanged {report.unchanged}, "
            f"kept newer {report.kept_newer}, conflicts kept {report.conflicts}"
        )
    lines += [f"note: {note}" for note in report.notes]
    _echo(report.to_dict(), as_json, lines)
