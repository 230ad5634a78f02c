"""How a command takes a component's options: ``--<component>-<option> VALUE`` (e.g.
``--rerank mmr --mmr-lambda 0.7``; VALUE is a TOML literal: number, bool or string; a bare
word is a string) before or after its arguments, and ``-o/--option [TABLE.]NAME.KEY=VALUE``
(the form ``rankseam bench`` takes, parsed by the same code: :mod:`rankseam.bench.policies`).

An undeclared ``--flag`` is a component option only when its prefix names an installed
reranker (``--mmr-…``); any other is refused as click refuses an unknown option, with its
"did you mean" among the command's own options and the installed rerankers' flags. The
installed rerankers' flags are listed by ``--help`` (which loads the plugins; running the
command without an undeclared flag does not).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rankseam.config import Config
    from rankseam.registry import ComponentSpec

__all__ = [
    "COMPONENT_ARGS",
    "OPTION_HELP",
    "ComponentOptionsCommand",
    "config_with_options",
    "option_tables",
    "parse_component_options",
    "parse_stage_options",
]

#: Where :class:`ComponentOptionsCommand` leaves the ``--<component>-<option>`` words.
COMPONENT_ARGS = "rankseam.component_args"

#: The help of ``-o/--option`` (as ``rankseam bench`` takes it).
OPTION_HELP = (
    "NAME.KEY=VALUE: an option of reranker NAME, e.g. -o mmr.lambda=0.7 (as --mmr-lambda 0.7, "
    "which wins when both are given). TABLE.NAME.KEY=VALUE: an option of any component, TABLE "
    "as in rankseam.toml (rerankers, decision_backends, generation_backends, embedders, "
    "sources, stores), e.g. -o embedders.hashed.dimensions=128. Repeatable."
)


def _toml_value(raw: str) -> Any:
    from rankseam.bench.policies import parse_value  # on first use: tomllib stays unimported

    return parse_value(raw)


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
        owner = _owner(name, rerankers)
        if owner is None:
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
        options.setdefault(owner, {})[name[len(owner) + 1 :].replace("-", "_")] = _toml_value(value)
    return options


def _owner(name: str, rerankers: Iterable[str]) -> str | None:
    """The reranker a flag name (without ``--``) belongs to: the longest name that prefixes
    it, so ``a-b-x`` goes to ``a-b`` before ``a``; None when none does."""
    owners = [r for r in rerankers if name.startswith(r + "-") and len(name) > len(r) + 1]
    return max(owners, key=len) if owners else None


def _rerankers() -> list[ComponentSpec[Any]]:
    """The installed rerankers (loads the plugins)."""
    from rankseam.plugins import get_registry

    return sorted((s for s in get_registry() if s.kind == "reranker"), key=lambda s: s.name)


def _flags(spec: ComponentSpec[Any]) -> list[tuple[str, str]]:
    """``(--NAME-OPTION VALUE, help)`` for each declared option of a reranker."""
    out = []
    for info in spec.option_info() or ():
        value = info.default
        if isinstance(value, bool):
            value = "true" if value else "false"
        default = "" if value is None else f" [default: {value}]"
        out.append(
            (
                f"--{spec.name}-{info.key.replace('_', '-')} VALUE",
                f"{info.help} ({info.type}){default}" if info.help else f"{info.type}{default}",
            )
        )
    return out


class ComponentOptionsCommand(click.Command):
    """A command that also takes ``--<component>-<option> VALUE`` pairs it does not declare.

    The pairs are taken out before click parses the rest, so they may stand anywhere on the
    command line, before or after the positional arguments, like every declared option
    (``search --rerank mmr --mmr-lambda 0.3 "q"`` and ``search "q" --mmr-lambda=0.3 --rerank
    mmr`` are the same). They land in ``ctx.meta[COMPONENT_ARGS]`` for
    :func:`parse_stage_options`. After ``--`` everything is an argument. An undeclared flag
    whose prefix names no installed reranker is refused (:class:`click.NoSuchOption`, with
    click's "did you mean").
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
                self._check_component_flag(ctx, name, known)
                target = extra
                # its VALUE is the next word, unless it is written --name=VALUE or the next
                # word is another option (parse_stage_options then says a value is missing)
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

    def _check_component_flag(self, ctx: click.Context, flag: str, known: set[str]) -> None:
        """Refuse ``flag`` unless its prefix names an installed reranker."""
        rerankers = _rerankers()
        if _owner(flag[2:], (s.name for s in rerankers)) is not None:
            return
        real = sorted(f for f in known if f.startswith("--"))
        component = [flag.split()[0] for spec in rerankers for flag, _ in _flags(spec)]
        possibilities = [*real, *component]
        if difflib.get_close_matches(flag, possibilities):  # click's own test of "close"
            raise click.NoSuchOption(flag, possibilities=possibilities, ctx=ctx)
        names = ", ".join(s.name for s in rerankers) or "none is installed"
        error = click.NoSuchOption(
            flag,
            message=(
                f"No such option: {flag}. A reranker's option is --NAME-OPTION VALUE for an "
                f"installed reranker NAME ({names}); `rankseam {ctx.info_name} --help` lists them."
            ),
            ctx=ctx,
        )
        raise error

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The declared options, then each installed reranker's (loads the plugins)."""
        super().format_options(ctx, formatter)
        try:
            rerankers = _rerankers()
        except Exception as exc:  # --help must work even when a plugin does not load
            with formatter.section("Reranker options"):
                formatter.write_text(f"(the installed rerankers could not be listed: {exc})")
            return
        for spec in rerankers:
            flags = _flags(spec)
            if flags:
                with formatter.section(
                    f"Options of reranker {spec.name} (with --rerank {spec.name})"
                ):
                    formatter.write_dl(flags)


def option_tables(values: Iterable[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """``-o/--option`` values as configuration tables ``{table: {name: {key: value}}}``, with
    ``rankseam bench``'s parser; a malformed one is a usage error of ``--option``."""
    if not values:
        return {}
    from rankseam.bench.policies import component_options
    from rankseam.errors import ConfigurationError

    try:
        return component_options(values)
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), param_hint="'-o' / '--option'") from None


def config_with_options(
    config: Config, tables: Mapping[str, Mapping[str, Mapping[str, Any]]]
) -> Config:
    """``config`` with the options of ``tables`` (``{table: {name: {key: value}}}``) set over
    those its file gave."""
    from rankseam.registry import TABLE_FOR_KIND

    kind_of = {table: kind for kind, table in TABLE_FOR_KIND.items()}
    for table, components in tables.items():
        for name, options in components.items():
            config = config.with_options(kind_of[table], name, options)
    return config
