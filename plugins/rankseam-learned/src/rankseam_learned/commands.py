"""``rankseam train``: fit the learned reranker on judgements, cross-validate it against the
default search, and write the model file only when it beats the default (docs/plugins/learned.md,
"Training")::

    rankseam train --judgements judged.jsonl --db my.sqlite3 --out my-model.json
    rankseam train --feedback --db my.sqlite3 --out my-model.json
    rankseam train --dataset locomo --out locomo.json

The command prints the cross-validated R@5 and nDCG@10 of the model beside the default's with
a paired significance test, shows progress on stderr, and refuses to write a model that loses
to the default on either (exit status 1) unless ``--force``.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from rankseam.plugin import hookimpl

__all__ = ["register_commands", "train_command"]

F = TypeVar("F", bound=Callable[..., Any])


class _Bars:
    """One click progress bar per stage, on stderr (drawn only on a terminal; elsewhere a
    line when each stage starts and ends)."""

    def __init__(self) -> None:
        self.stage: str | None = None
        self.bar: Any = None
        self.done = 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.close()
            self.stage = stage
            self.done = 0
            self.bar = click.progressbar(length=total, label=f"{stage:<17}", file=_stderr())
            self.bar.__enter__()
            if not _stderr().isatty():
                click.echo(f"{stage}: {total} to do", err=True)
        if done > self.done:
            self.bar.update(done - self.done)
            if not _stderr().isatty() and _tenth(self.done, total) != _tenth(done, total):
                click.echo(f"{stage}: {done} of {total}", err=True)
            self.done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            if not _stderr().isatty():
                click.echo(f"{self.stage}: done", err=True)
        self.bar = None


def _tenth(done: int, total: int) -> int:
    """Which tenth of ``total`` ``done`` is in (a line a tenth where no bar is drawn)."""
    return done * 10 // total if total else 0


def _stderr() -> Any:
    return sys.stderr


@contextlib.contextmanager
def _stores(
    judgements: str | None,
    feedback: bool,
    dataset: str | None,
    db: str | None,
    config_file: str | None,
    namespace: str | None,
    progress: _Bars,
) -> Iterator[tuple[list[Any], str]]:
    from rankseam_learned.judgements import (
        dataset_stores,
        feedback_judgements,
        read_judgements,
    )

    chosen = [
        name
        for name, on in (
            ("--judgements", judgements),
            ("--feedback", feedback),
            ("--dataset", dataset),
        )
        if on
    ]
    if len(chosen) != 1:
        raise click.UsageError(
            "say what to learn from, once: --judgements FILE (a JSON Lines file of queries and "
            "relevant memory ids), --feedback (what your application recorded with "
            "Memory.feedback) or --dataset locomo|scifact|SPEC"
            + (f"; got {' and '.join(chosen)}" if chosen else "")
        )
    if dataset is not None:
        if db is not None or namespace is not None:
            raise click.UsageError(
                "--dataset builds its own stores: leave out --db and --namespace"
            )
        with dataset_stores(dataset, progress=progress) as stores:
            yield stores, f"dataset {dataset}"
        return
    from rankseam import find_config, open_memory

    overrides: dict[str, Any] = {} if namespace is None else {"namespace": namespace}
    with open_memory(db, config_file=find_config(config_file), create=False, **overrides) as memory:
        if judgements is not None:
            yield read_judgements(judgements, memory, namespace=namespace), judgements
        else:
            yield feedback_judgements(memory, namespace=namespace), "recorded feedback"


def _bounded(name: str, default: int, low: int, high: int, text: str) -> Callable[[F], F]:
    """A whole-number option within ``low..high``."""
    return click.option(
        name, default=default, show_default=True, type=click.IntRange(low, high), help=text
    )


#: What each option says in ``rankseam train --help``.
_HELP = {
    "judgements": 'Learn from a JSON Lines file: {"query": "...", "relevant": ["memory id", '
    '...]} a line (optional "grades", "thread", "namespace", "id").',
    "feedback": "Learn from the feedback recorded on the store's search results (Memory.feedback).",
    "dataset": "Learn from a bench data set: locomo, scifact, or a 'rankseam bench quality "
    "--dataset' spec (locomo:PATH, beir:PATH@SPLIT).",
    "config": "A rankseam.toml configuration file (default: discovered as for every command).",
    "out": "Where to write the model file (JSON; written only if the model beats the default).",
}
_IN_FILE = click.Path(dir_okay=False, exists=True)
_OUT_FILE = click.Path(dir_okay=False, writable=True)


@click.command("train")
@click.option("--judgements", type=_IN_FILE, help=_HELP["judgements"])
@click.option("--feedback", is_flag=True, help=_HELP["feedback"])
@click.option("--dataset", metavar="NAME", help=_HELP["dataset"])
@click.option("--out", type=_OUT_FILE, required=True, help=_HELP["out"])
@click.option("--db", default=None, metavar="PATH|URL", help="The store the judgements are about.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help=_HELP["config"])
@click.option("--namespace", default=None, help="The namespace searched (default: the store's).")
@_bounded(
    "--folds", 5, 2, 50, "Cross-validation folds (fewer when there are fewer independent groups)."
)
@_bounded("--pool", 30, 1, 200, "The coarse pool each query's search hands the model.")
@_bounded(
    "--trees",
    200,
    1,
    2000,
    "Boosting rounds of the model (fewer: smaller and faster to train, coarser).",
)
@click.option("--force", is_flag=True, help="Write the model even if it loses to the default.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def train_command(
    judgements: str | None,
    feedback: bool,
    dataset: str | None,
    out: str,
    db: str | None,
    config_file: str | None,
    namespace: str | None,
    folds: int,
    pool: int,
    trees: int,
    force: bool,
    as_json: bool,
) -> None:
    """Train the learned reranker on judged queries, compare it with the default search by
    leak-proof cross-validation, and write the model file if it beats the default.

    Then search with it: rankseam search --rerank learned --learned-model OUT "question"."""
    from rankseam_learned.training import train

    bars = _Bars()
    try:
        with _stores(judgements, feedback, dataset, db, config_file, namespace, bars) as (
            stores,
            source,
        ):
            report = train(
                stores,
                source=source,
                folds=folds,
                pool=pool,
                params={"max_iter": trees},
                progress=bars,
            )
    finally:
        bars.close()
    target = Path(out)
    written = force or not (report.loses or report.adds_nothing)
    if written:
        target.write_bytes(report.model_bytes)
    if as_json:
        body = report.to_dict()
        body["model_file"] = str(target) if written else None
        click.echo(json.dumps(body, indent=2))
    else:
        for line in report.lines():
            click.echo(line)
        if written:
            size = len(report.model_bytes)
            click.echo(
                f"wrote {target} ({size:,} bytes)"
                + (" although it loses to the default (--force)" if report.loses else "")
                + (
                    " although it ranks as the default does (weight 0, --force)"
                    if report.adds_nothing and not report.loses
                    else ""
                )
            )
    if not written and not report.loses:
        raise click.ClickException(
            "the model adds nothing to the default search: cross-validation gave it weight 0 "
            f"against the coarse order (it would rank as the default does), so {target} was not "
            "written. Add judgements where the default's order is wrong, or pass --force"
        )
    if not written:
        losing = ", ".join(
            f"{c.metric} {c.model:.3f} < {c.default:.3f}"
            for c in report.comparisons
            if c.model < c.default
        )
        raise click.ClickException(
            f"the model loses to the default search ({losing}, cross-validated): {target} was "
            "not written. Add judgements, or pass --force to write it anyway"
        )


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(train_command)
