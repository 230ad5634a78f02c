"""The ``search`` command. How it takes a component's options (``--mmr-lambda 0.7``,
``-o mmr.lambda=0.7``) is :mod:`rankseam.commands.component_options`."""

from __future__ import annotations

import json
from typing import Any

import click

from rankseam.commands.common import (
    echo_json,
    filter_options,
    json_option,
    open_store,
    place_of,
    store_options,
)
from rankseam.commands.component_options import (
    COMPONENT_ARGS,
    OPTION_HELP,
    ComponentOptionsCommand,
    option_tables,
    parse_component_options,
    parse_stage_options,
)
from rankseam.seam import reranker_choice
from rankseam.types import MAX_INT64, SearchResult

__all__ = [
    "COMPONENT_ARGS",
    "ComponentOptionsCommand",
    "parse_component_options",
    "parse_stage_options",
    "print_hits",
    "search",
]


def print_hits(result: SearchResult, *, indent: str = "") -> None:
    if not result.hits:
        click.echo(f"{indent}(no hits)")
    for i, hit in enumerate(result.hits, start=1):
        r = hit.ref
        channels = ",".join(hit.matched_by) or "-"
        rerank = "" if hit.rerank_score is None else f"  rerank_score={hit.rerank_score:.4f}"
        click.echo(
            f"{indent}{i:>2}. {r.namespace}/{r.memory_id} r{r.revision}  "
            f"score={hit.score:.4f}{rerank}  via {channels}{place_of(hit)}"
        )
        text = hit.text if len(hit.text) <= 160 else hit.text[:157] + "..."
        click.echo(f"{indent}    {text}")


@click.command(cls=ComponentOptionsCommand)
@click.argument("query")
@store_options
@click.option(
    "--limit",
    "-k",
    type=click.IntRange(1, MAX_INT64),
    default=10,
    show_default=True,
    help="Hits to return.",
)
@click.option("--namespace", "-n", default=None)
@click.option(
    "--rerank",
    multiple=True,
    help="Reranker name ('none' for the coarse order). Repeat it, or give a comma list, for a "
    "chain: --rerank decision --rerank mmr (each stage reranks the previous one's selection).",
)
@click.option("--pool", type=click.IntRange(1, 200), default=None, help="Coarse pool size.")
@click.option(
    "--on-error",
    type=click.Choice(["fail_closed", "fail_open", "raise", "coarse"]),
    default=None,
    help="fail_closed (raise, the default) or fail_open (the coarse order marked degraded); "
    "'raise' and 'coarse' are the earlier spellings.",
)
@click.option(
    "--option", "-o", "option", multiple=True, metavar="[TABLE.]NAME.KEY=VALUE", help=OPTION_HELP
)
@filter_options(min_score=True)
@click.option("--trace", is_flag=True, help="Also print the search trace.")
@json_option
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    db: str | None,
    config_file: str | None,
    limit: int,
    namespace: str | None,
    rerank: tuple[str, ...],
    pool: int | None,
    on_error: str | None,
    option: tuple[str, ...],
    where: dict[str, Any] | None,
    thread: str | None,
    since: Any,
    until: Any,
    min_score: float | None,
    trace: bool,
    as_json: bool,
) -> None:
    """Search memories; optionally rerank (--rerank NAME --NAME-OPTION VALUE ...).

    A reranker's options are listed below and by `rankseam plugins --options` (e.g. --rerank
    mmr --mmr-lambda 0.7, or -o mmr.lambda=0.7 as `rankseam bench` takes it); VALUE is a TOML
    literal (number, bool or string). A chain: --rerank decision --rerank mmr (or --rerank
    decision,mmr), each stage's options by its name.
    Filter with --where JSON, --thread, --since, --until and --min-score, applied inside
    each channel, before the pool is cut: --where '{"user": "dana"}' --since 2026-12-01
    (docs/filters.md)."""
    tables = option_tables(option)
    with open_store(db, config_file, create=False, tables=tables) as memory:
        names = [n.strip() for given in rerank for n in given.split(",") if n.strip()]
        chosen: Any = reranker_choice(memory.config.search.reranker) if not rerank else None
        if names and not (len(names) == 1 and reranker_choice(names[0]) is None):
            chosen = names[0] if len(names) == 1 else names
        if isinstance(chosen, str) and "," in chosen:  # a configured "a,b"
            chosen = [n.strip() for n in chosen.split(",") if n.strip()]
        if chosen is None:
            stages: list[str] = []
        elif isinstance(chosen, str):
            stages = [chosen]
        elif isinstance(chosen, list):
            stages = chosen
        else:  # a configured chain: its stages given by name
            stages = [s.reranker for s in chosen if isinstance(s.reranker, str)]
        options = parse_stage_options(list(ctx.meta.get(COMPONENT_ARGS, ())), stages)
        single: dict[str, Any] | None = None
        if isinstance(chosen, str):
            single = options.get(chosen) or None
        elif options:  # each stage of a chain with its own options
            chosen = [
                {"name": name, "options": options[name]} if name in options else name
                for name in stages
            ]
        result = memory.search(
            query,
            limit,
            namespace=namespace,
            reranker=chosen,
            reranker_options=single,
            pool=pool,
            on_error=on_error,
            where=where,
            thread=thread,
            since=since,
            until=until,
            min_score=min_score,
        )
    if as_json:
        out = result.to_dict()
        if not trace:
            out.pop("trace")
        echo_json(out)
        return
    print_hits(result)
    if trace:
        click.echo("trace:")
        click.echo(json.dumps(result.trace.to_dict(), indent=2, ensure_ascii=False))
