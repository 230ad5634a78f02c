"""What every command shares: the ``--db``/``--config``/``--json`` options, opening the store,
printing reports, and how a failure ends a command (:class:`~rankseam.cli.CommandError`: one
line, exit status 2; the ``rankseam`` group turns every rankseam error into one)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from rankseam.cli import CommandError

if TYPE_CHECKING:
    from rankseam.memory import Memory

__all__ = [
    "CommandError",
    "echo_json",
    "echo_report",
    "json_option",
    "open_store",
    "place_of",
    "store_options",
    "structure_options",
]

F = TypeVar("F", bound=Callable[..., Any])


def _position(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    """``--position``: a number (a sequence number or epoch seconds), else the text as given
    (an ISO 8601 date, which the host reads; anything else is refused by it, naming the
    field)."""
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
            callback=_position,
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
    db: str | None, config_file: str | None, *, create: bool = True, **overrides: Any
) -> Memory:
    """The store of ``--db``/``--config``; ``create=False`` for read-only commands. Without
    ``--config`` the configuration file is discovered (:func:`rankseam.resolve.find_config`)."""
    from rankseam.memory import open_memory  # on first use: a command's --help stays light
    from rankseam.resolve import find_config

    return open_memory(db, config_file=find_config(config_file), create=create, **overrides)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def echo_report(value: Any, as_json: bool, lines: Iterable[str]) -> None:
    """``value`` as JSON with ``--json``, else the human-readable ``lines``."""
    if as_json:
        echo_json(value)
    else:
        for line in lines:
            click.echo(line)
