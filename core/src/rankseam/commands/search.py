"""The ``search`` command, and how a command takes a component's options
(``--<component>-<option> VALUE``, e.g. ``--rerank mmr --mmr-lambda 0.7``; VALUE is a TOML
literal: number, bool or string; a bare word is a string) before or after its arguments.
"""

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
from rankseam.seam import reranker_choice
from rankseam.types import SearchResult

__all__ = [
    "COMPONENT_ARGS",
    "ComponentOptionsCommand",
    "parse_component_options",
    "parse_stage_options",
    "print_hits",
    "search",
]


def _toml_value(raw: str) -> Any:
    import tomllib  # on first use: a search without component options never imports it

    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def parse_component_options(args: list[str], reranker: str | None) -> dict[str, Any]:
    """Parse ``--<component>-<option> VALUE`` pairs for the chosen reranker."""
    return parse_stage_options(args, [] if reranker is None else [reranker]).get(reranker or "", {})


def parse_stage_options(args: list[str], rerankers: list[str]) -> dict[str, dict[str, Any]]:
    """Parse ``--<component>-<option> VALUE`` pairs for the chosen rerankers (the stages of a
    chain, or one): each pair goes to the stage its prefix names, ``{name: {option: value}}``."""
    options: dict[str, dict[str, Any]] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or len(arg) < 3:
            raise click.UsageError(f"unexpected argument {arg!r}")
        name, eq, value = arg[2:].partition("=")
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                raise click.UsageError(f"option --{name} needs a value (--{name} VALUE)")
            value = args[i + 1]
            i += 1
        i += 1
        if not rerankers:
            raise click.UsageError(
                f"--{name} sets a component option, but no reranker is chosen; add --rerank NAME"
            )
        # the longest name that prefixes it: "--a-b-x" goes to "a-b" before "a"
        owners = sorted(
            (r for r in rerankers if name.startswith(r + "-") and len(name) > len(r) + 1),
            key=len,
            reverse=True,
        )
        if not owners:
            chosen = " ".join(f"--{r}-<option> VALUE" for r in rerankers)
            which = (
                f"the chosen reranker {rerankers[0]!r}"
                if len(rerankers) == 1
                else f"any stage of the chosen chain {rerankers!r}"
            )
            raise click.UsageError(
                f"--{name} is not an option of {which}; its options are given as {chosen} "
                "(choose the other reranker with --rerank)"
            )
        owner = owners[0]
        options.setdefault(owner, {})[name[len(owner) + 1 :].replace("-", "_")] = _toml_value(value)
    return options


class ComponentOptionsCommand(click.Command):
    """A command that also takes ``--<component>-<option> VALUE`` pairs it does not declare.

    The pairs are taken out before click parses the rest, so they may stand anywhere on the
    command line, before or after the positional arguments, like every declared option
    (``search --rerank mmr --mmr-lambda 0.3 "q"`` and ``search "q" --mmr-lambda=0.3 --rerank
    mmr`` are the same). They land in ``ctx.meta[COMPONENT_ARGS]`` for
    :func:`parse_component_options`. After ``--`` everything is an argument.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        options = [p for p in self.get_params(ctx) if isinstance(p, click.Option)]
        known = {name for p in options for name in (*p.opts, *p.secondary_opts)}
        takes_value = {name for p in options if not (p.is_flag or p.count) for name in p.opts}
        rest: list[str] = []
        extra: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                rest.extend(args[i:])
                break
            name, eq, _ = arg.partition("=")
            target = rest
            if arg.startswith("--") and len(arg) > 2 and name not in known:
                target = extra
                # its VALUE is the next word, unless it is written --name=VALUE or the next
                # word is another option (parse_component_options then says a value is missing)
                wants_value = not eq and i + 1 < len(args) and not args[i + 1].startswith("--")
            else:
                wants_value = name in takes_value and not eq and i + 1 < len(args)
            target.append(arg)
            if wants_value:
                target.append(args[i + 1])
                i += 1
            i += 1
        ctx.meta[COMPONENT_ARGS] = extra
        return super().parse_args(ctx, rest)


#: Where :class:`ComponentOptionsCommand` leaves the ``--<component>-<option>`` words.
COMPONENT_ARGS = "rankseam.component_args"


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
@click.option("--limit", "-k", type=click.IntRange(min=1), default=10, show_default=True)
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
    where: dict[str, Any] | None,
    thread: str | None,
    since: Any,
    until: Any,
    min_score: float | None,
    trace: bool,
    as_json: bool,
) -> None:
    """Search memories; optionally rerank (--rerank NAME --NAME-OPTION VALUE ...).

    A reranker's options are listed by `rankseam plugins --options` (e.g. --rerank mmr
    --mmr-lambda 0.7); VALUE is a TOML literal (number, bool or string). A chain: --rerank
    decision --rerank mmr (or --rerank decision,mmr), each stage's options by its name.
    Filter with --where JSON, --thread, --since, --until and --min-score, applied inside
    each channel, before the pool is cut: --where '{"user": "dana"}' --since 2026-12-01
    (docs/filters.md)."""
    with open_store(db, config_file, create=False) as memory:
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
