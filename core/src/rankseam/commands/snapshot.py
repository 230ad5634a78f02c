"""Snapshot commands: ``export``, ``verify``, ``import``. See docs/snapshots.md.

``rankseam export --db PATH OUT [--gzip] [--include-feedback]`` writes the snapshot folder
``OUT`` (with the store's feedback records only when asked);
``rankseam verify OUT`` checks it completely; ``rankseam import OUT --db NEW [--merge]``
hydrates a store in one transaction. A refused snapshot exits with status 1 and one line
saying what is wrong and what to do; an import that fails leaves no new store file behind.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from rankseam.commands.common import echo_report, json_option, open_store, store_options
from rankseam.errors import ConfigurationError
from rankseam.resolve import find_config, resolve_config
from rankseam.snapshot import verify_snapshot
from rankseam.sqlite.factory import sqlite_path
from rankseam.store.target import PLAIN_PATH_SCHEME, parse_target

__all__ = ["export", "import_", "verify"]


def _new_sqlite_file(db: str) -> Path | None:
    """The file an import into ``db`` is about to create: an embedded store's path that does
    not exist yet (``None`` for an existing file, ``:memory:`` or another kind of store)."""
    target = parse_target(db)
    if target.scheme != PLAIN_PATH_SCHEME or db == ":memory:":
        return None
    try:
        path = Path(sqlite_path(target))
    except ConfigurationError:
        return None  # opening it reports the mistake
    return None if path.exists() else path


def _remove_store(path: Path) -> None:
    """Remove a store this command created: its file, SQLite's side files and its ANN index."""
    for side in ("", "-wal", "-shm", "-journal"):
        path.with_name(path.name + side).unlink(missing_ok=True)
    shutil.rmtree(path.with_name(path.name + ".ann"), ignore_errors=True)


@click.command()
@click.argument("out", type=click.Path(file_okay=False))
@store_options
@click.option("--gzip", "use_gzip", is_flag=True, help="Compress the data file (gzip).")
@click.option(
    "--include-feedback",
    is_flag=True,
    help="Also write the feedback recorded on search results (left out otherwise).",
)
@json_option
def export(
    out: str,
    db: str | None,
    config_file: str | None,
    use_gzip: bool,
    include_feedback: bool,
    as_json: bool,
) -> None:
    """Write a portable snapshot of the store into the new folder OUT."""
    with open_store(db, config_file, create=False) as memory:
        report = memory.export_snapshot(out, gzip=use_gzip, include_feedback=include_feedback)
    echo_report(
        report.to_dict(),
        as_json,
        [
            f"exported {report.memories} memories ({report.revisions} revisions, "
            f"{report.vectors} vectors) to {report.path}",
            f"snapshot id {report.snapshot_id}",
            *([f"with {report.feedback} feedback record(s)"] if include_feedback else []),
        ],
    )


@click.command()
@click.argument("snapshot", type=click.Path(file_okay=False))
@json_option
def verify(snapshot: str, as_json: bool) -> None:
    """Check a snapshot: manifest, checksums and every record."""
    report = verify_snapshot(snapshot)
    echo_report(
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
@store_options
@click.option(
    "--merge",
    is_flag=True,
    help="Import into a store that already holds memories (never overwrites a newer revision).",
)
@json_option
def import_(
    snapshot: str, db: str | None, config_file: str | None, merge: bool, as_json: bool
) -> None:
    """Hydrate the store --db from SNAPSHOT in one transaction."""
    verify_snapshot(snapshot)  # refuse a bad snapshot before creating or opening a store
    new_file = _new_sqlite_file(str(resolve_config(db, None, find_config(config_file), {}).db))
    try:
        with open_store(db, config_file) as memory:
            report = memory.import_snapshot(snapshot, merge=merge)
    except BaseException:
        if new_file is not None:  # a failed import leaves no new store file behind
            _remove_store(new_file)
        raise
    lines = [
        f"imported {report.memories} memories from snapshot {report.snapshot_id} into {memory.path}"
    ]
    if merge:
        lines.append(
            f"added {report.added}, updated {report.updated}, unchanged {report.unchanged}, "
            f"kept newer {report.kept_newer}, conflicts kept {report.conflicts}"
        )
    lines += [f"note: {note}" for note in report.notes]
    echo_report(report.to_dict(), as_json, lines)
