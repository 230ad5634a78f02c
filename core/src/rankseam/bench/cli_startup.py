"""``rankseam bench cli``: the start-up cost of the ``rankseam`` command."""

from __future__ import annotations

from pathlib import Path

import click

from rankseam.bench.cli_common import command_record, default_out
from rankseam.errors import ConfigurationError

__all__ = ["cli_startup"]


@click.command(name="cli")
@click.option(
    "--runs", type=click.IntRange(1), default=7, show_default=True, help="Timed runs per command."
)
@click.option(
    "--memories",
    type=click.IntRange(1),
    default=1000,
    show_default=True,
    help="Synthetic memories in the store that `rankseam search` searches.",
)
@click.option(
    "--db",
    default=None,
    metavar="PATH|URL",
    help="Search this existing store instead of building one.",
)
@click.option(
    "--rerank",
    default="mmr",
    show_default=True,
    help="The reranker of the reranked search ('none' times no reranked search).",
)
@click.option(
    "--only",
    multiple=True,
    metavar="LABEL",
    help="Time only this command (repeatable; the numpy floor is always timed), e.g. "
    "--only 'rankseam --version'.",
)
@click.option(
    "--baseline",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Another checkout of this repository (e.g. a git worktree of an older commit): each "
    "rankseam command also runs with its code, interleaved, labelled [baseline].",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Report folder [default: bench-out/cli-<time>].",
)
def cli_startup(
    runs: int,
    memories: int,
    db: str | None,
    rerank: str,
    only: tuple[str, ...],
    baseline: Path | None,
    out: Path | None,
) -> None:
    """Start-up cost of the rankseam command: CPU and wall time of whole processes
    (--version, --help, plugins, search on a store of --memories memories), interleaved with
    `python -c "import numpy"` as the floor. Writes report.json and report.md."""
    import json

    from rankseam.bench.reports import finish_report
    from rankseam.bench.startup import run_startup, startup_markdown

    try:
        import resource  # noqa: F401  (the children's CPU time comes from it)
    except ImportError:
        raise ConfigurationError(
            "rankseam bench cli reads child processes' CPU time through the resource module, "
            "which this platform lacks (it needs Linux, macOS or another POSIX system)"
        ) from None
    try:
        body = run_startup(
            runs=runs,
            memories=memories,
            db=db,
            only=list(only) or None,
            rerank=None if rerank == "none" else rerank,
            baseline=baseline,
            echo=lambda msg: click.echo(msg, err=True),
        )
    except (RuntimeError, ValueError) as exc:
        raise ConfigurationError(str(exc)) from None
    report = finish_report(body, command=command_record())
    folder = out or default_out("cli")
    folder.mkdir(parents=True, exist_ok=True)
    markdown = startup_markdown(report)
    (folder / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(markdown, encoding="utf-8")
    click.echo(markdown)
    click.echo(f"wrote {folder / 'report.json'}, {folder / 'report.md'}", err=True)
