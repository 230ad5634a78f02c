"""What every command shares: the ``--db``/``--config``/``--json`` options, opening the store,
printing reports, and how a failure ends a command (:class:`~rankseam.cli.CommandError`: one
line, exit status 2; the ``rankseam`` group turns every rankseam error into one)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import click

from rankseam.cli import CommandError

if TYPE_CHECKING:
    from rankseam.memory import Memory

__all__ = [
    "CommandError",
    "confirm_or_refuse",
    "echo_json",
    "echo_report",
    "filter_options",
    "json_option",
    "open_store",
    "place_of",
    "store_options",
    "structure_options",
]

F = TypeVar("F", bound=Callable[..., Any])


def _number_or_date(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    """``--position``, ``--since``, ``--until``: a number (a sequence number or epoch
    seconds), else the text as given (an ISO 8601 date, which the host reads; anything else is
    refused by it, naming the field)."""
    if value is None:
        return None
    try:
        return int(value) if value.strip().lstrip("+-").isdecimal() else float(value)
    except ValueError:
        return value


def structure_options(*, keep: bool) -> Callable[[F], F]:
    """``--thread``, ``--position`` and ``--derived-from`` (docs/store.md, "Threads, positions
    and sources"); ``keep``: left out, they keep the previous revision's (update)."""
    kept = " (default: kept)" if keep else ""

    def decorate(fn: F) -> F:
        fn = click.option(
            "--derived-from",
            "derived_from",
            default=None,
            help=f"The id of the memory (same namespace) this one was derived from{kept}.",
        )(fn)
        fn = click.option(
            "--position",
            default=None,
            callback=_number_or_date,
            help=(
                "Its place in the thread: a sequence number, epoch seconds or an ISO 8601 date"
                + (kept or " (default: its created_at, in a thread)")
                + "."
            ),
        )(fn)
        return click.option(
            "--thread",
            default=None,
            help=f"The conversation, session or run the memory belongs to{kept}.",
        )(fn)

    return decorate


def _where(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    """``--where``: a JSON object (docs/filters.md); what it says is checked by the host,
    which names the place of a mistake in it."""
    if value is None:
        return None
    from rankseam.checks import parse_json  # on first use: --help stays light

    try:
        parsed = parse_json(os.fsencode(value))
    except ValueError as exc:
        raise click.BadParameter(
            f'{exc}; write the filter as a JSON object, e.g. --where \'{{"topic": "food"}}\'',
            param_hint="--where",
        ) from None
    if not isinstance(parsed, dict):
        raise click.BadParameter(
            f'must be a JSON object such as \'{{"topic": "food"}}\' or '
            f'\'{{"year": {{"$gte": 2020}}}}\', got {type(parsed).__name__}',
            param_hint="--where",
        )
    return parsed


def filter_options(*, min_score: bool) -> Callable[[F], F]:
    """``--where JSON``, ``--thread T``, ``--since DATE``, ``--until DATE`` and, with
    ``min_score``, ``--min-score X``: which memories a search or a listing may return
    (docs/filters.md), passed to ``Memory.search`` / ``Memory.list`` under the same names."""

    def decorate(fn: F) -> F:
        if min_score:
            fn = click.option(
                "--min-score",
                "min_score",
                type=float,
                default=None,
                metavar="X",
                help="No hit whose fused score (0..1 with the default fusion) is below X.",
            )(fn)
        fn = click.option(
            "--until",
            default=None,
            metavar="DATE",
            callback=_number_or_date,
            help="Only memories created before DATE (ISO 8601 or epoch seconds).",
        )(fn)
        fn = click.option(
            "--since",
            default=None,
            metavar="DATE",
            callback=_number_or_date,
            help="Only memories created at or after DATE (ISO 8601 or epoch seconds).",
        )(fn)
        fn = click.option(
            "--thread",
            default=None,
            metavar="T",
            help="Only the memories of thread T (a conversation, session or run).",
        )(fn)
        return click.option(
            "--where",
            default=None,
            metavar="JSON",
            callback=_where,
            help=(
                "A filter as a JSON object over metadata keys and the fields thread, position, "
                "derived_from, created_at, importance, memory_id: "
                '\'{"user": "dana", "year": {"$gte": 2025}}\'; operators $eq $ne $in $nin $gt '
                "$gte $lt $lte $exists, combined with $and / $or (docs/filters.md)."
            ),
        )(fn)

    return decorate


def place_of(item: Any) -> str:
    """``  thread=T position=P derived_from=D`` for the fields a memory or hit has (text
    output)."""
    parts = [
        f"{name}={getattr(item, name, None)!s}"
        for name in ("thread", "position", "derived_from")
        if getattr(item, name, None) is not None
    ]
    return "  " + " ".join(parts) if parts else ""


def store_options(fn: F) -> F:
    """``--db TARGET`` and ``--config FILE``: which store (a path or a URL), and which
    rankseam.toml."""
    fn = click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False),
        default=None,
        help=(
            "A rankseam.toml configuration file (default: RANKSEAM_CONFIG, else ./rankseam.toml, "
            "else rankseam.toml in the user's config folder)."
        ),
    )(fn)
    return click.option(
        "--db",
        type=str,
        metavar="PATH|URL",
        default=None,
        help=(
            "The store: a file path, or a URL whose scheme picks a store plugin "
            "(sqlite:///ABS/PATH, postgresql://USER@HOST/DB); default: RANKSEAM_DB, else the "
            "platform data directory."
        ),
    )(fn)


#: ``--json``: print the command's report as JSON.
json_option = click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")


def open_store(
    db: str | None,
    config_file: str | None,
    *,
    create: bool = True,
    tables: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    **overrides: Any,
) -> Memory:
    """The store of ``--db``/``--config``; ``create=False`` for read-only commands. Without
    ``--config`` the configuration file is discovered (:func:`rankseam.resolve.find_config`).
    ``tables`` (``-o TABLE.NAME.KEY=VALUE``) set component options over the file's. A
    configuration error names the file in use (``--config``, ``RANKSEAM_CONFIG`` or the one
    found) when its message does not already."""
    from rankseam.errors import ConfigurationError
    from rankseam.memory import open_memory  # on first use: a command's --help stays light
    from rankseam.resolve import find_config, in_config_file

    path = find_config(config_file)
    try:
        if not tables:
            return open_memory(db, config_file=path, create=create, **overrides)
        from rankseam.commands.component_options import config_with_options
        from rankseam.config import Config

        config = Config.from_toml(path) if path is not None else Config(set_in_code=())
        config = config_with_options(config, tables)
        return open_memory(db, config=config, create=create, **overrides)
    except ConfigurationError as exc:
        raise in_config_file(exc, path) from None


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def echo_report(value: Any, as_json: bool, lines: Iterable[str]) -> None:
    """``value`` as JSON with ``--json``, else the human-readable ``lines``."""
    if as_json:
        echo_json(value)
    else:
        for line in lines:
            click.echo(line)


def confirm_or_refuse(yes: bool, refusal: str, question: str) -> None:
    """Ask ``question`` on the terminal before something that cannot be undone, unless
    ``--yes`` answered it; with no terminal to ask on, refuse with ``refusal`` and how to
    confirm (``reset``, ``feedback delete``)."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise CommandError(
            f"{refusal}; there is no terminal to ask on: pass --yes to confirm",
            kind="ValidationError",
        )
    click.confirm(question, abort=True, err=True)
