"""``rankseam bench reembed``: search quality and safety while a store is re-embedded."""

from __future__ import annotations

from pathlib import Path

import click

from rankseam.bench.cli_common import command_record, default_out
from rankseam.errors import ConfigurationError

__all__ = ["reembed_bench"]


@click.command("reembed")
@click.option(
    "--dataset",
    "datasets",
    multiple=True,
    metavar="SPEC",
    help="Dev set for the quality part (repeatable), as in `bench quality --dataset`, e.g. "
    "locomo or beir:../shared/data/scifact-train@train [default: none].",
)
@click.option(
    "--from",
    "source",
    default="hashed",
    show_default=True,
    metavar="NAME[:KEY=VALUE...]",
    help="Embedder the stores are written with.",
)
@click.option(
    "--to",
    "target",
    default="sentence-transformers",
    show_default=True,
    metavar="NAME[:KEY=VALUE...]",
    help="Embedder whose space the stores are re-embedded into, e.g. hashed:dimensions=512.",
)
@click.option(
    "--checkpoints",
    default="0,25,50,75,100",
    show_default=True,
    metavar="P,P,...",
    help="Shares (percent) of the live memories re-embedded at which the queries are run.",
)
@click.option(
    "--batch-size", type=click.IntRange(1), default=500, show_default=True, help="Re-embed batch."
)
@click.option(
    "--live-size",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Memories of the live part (re-embedding beside a search loop and a writer); 0 skips it.",
)
@click.option(
    "--live-to",
    "live_target",
    default=None,
    metavar="NAME[:KEY=VALUE...]",
    help="Embedder of the live part [default: --to].",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Report folder [default: bench-out/reembed-<time>].",
)
def reembed_bench(
    datasets: tuple[str, ...],
    source: str,
    target: str,
    checkpoints: str,
    batch_size: int,
    live_size: int,
    live_target: str | None,
    out: Path | None,
) -> None:
    """Search quality while a store is re-embedded into another space (old space answering,
    new space if switched early, final store against one embedded at ingest), and a live
    re-embed beside a search loop and a writer (failed searches, lost writes, throughput)."""
    from rankseam.bench.datasets import load_dataset
    from rankseam.bench.reembed import parse_embedder, reembed_markdown, run_reembed, write_reembed
    from rankseam.bench.reports import finish_report

    try:
        points = [int(p) for p in checkpoints.split(",") if p.strip()]
    except ValueError:
        raise ConfigurationError(
            f"--checkpoints must be comma-separated percentages, e.g. 0,50,100, got {checkpoints!r}"
        ) from None
    if not datasets and not live_size:
        raise ConfigurationError("nothing to run: give --dataset and/or --live-size")
    body = run_reembed(
        [load_dataset(d) for d in datasets],
        source=parse_embedder(source),
        target=parse_embedder(target),
        checkpoints=points,
        batch_size=batch_size,
        live_size=live_size,
        live_target=parse_embedder(live_target) if live_target else None,
        echo=lambda msg: click.echo(msg, err=True),
    )
    report = finish_report(body, command=command_record())
    paths = write_reembed(report, out or default_out("reembed"))
    click.echo(reembed_markdown(report))
    click.echo(f"wrote {', '.join(str(p) for p in paths)}", err=True)
