"""The ``rankseam`` command.

Sub-commands live in :mod:`rankseam.commands` and load lazily (so ``rankseam --help`` stays
fast); plugins add their own through the ``register_commands`` hook.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click

from rankseam.errors import RankseamError
from rankseam.version import __version__

#: name -> "module:attribute" of a click command, imported on first use.
LAZY_COMMANDS: dict[str, str] = {
    "add": "rankseam.commands.store:add",
    "ingest": "rankseam.commands.store:ingest",
    "search": "rankseam.commands.store:search",
    "stats": "rankseam.commands.store:stats",
    "reembed": "rankseam.commands.store:reembed",
    "demo": "rankseam.commands.store:demo",
    "bench": "rankseam.bench.cli:bench",
    "export": "rankseam.commands.snapshot:export",
    "verify": "rankseam.commands.snapshot:verify",
    "import": "rankseam.commands.snapshot:import_",
}


class CommandError(click.ClickException):
    """A command failed for a reason the user can fix: ``Error: <message>``, exit status 2."""

    exit_code = 2


class RankseamGroup(click.Group):
    """Built-in commands load lazily; plugin commands join on first listing or lookup."""

    _plugins_added = False

    def _add_plugin_commands(self) -> None:
        if self._plugins_added:
            return
        self._plugins_added = True
        from rankseam.plugins import load_plugins

        load_plugins().hook.register_commands(cli=self)

    def _lazy(self, name: str) -> click.Command | None:
        target = LAZY_COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                return None  # not built in this version
            raise
        command: click.Command = getattr(module, attr)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._add_plugin_commands()
        names = set(self.commands)
        names.update(n for n in LAZY_COMMANDS if self._lazy(n) is not None)
        return sorted(names)

    def invoke(self, ctx: click.Context) -> Any:
        """Every command's rankseam errors end it the same way: one line, exit status 2."""
        try:
            return super().invoke(ctx)
        except RankseamError as exc:
            raise CommandError(str(exc)) from None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        command = self._lazy(cmd_name)
        if command is not None:
            return command
        self._add_plugin_commands()
        return self.commands.get(cmd_name)


@click.group(cls=RankseamGroup)
@click.version_option(__version__, prog_name="rankseam")
def cli() -> None:
    """rankseam: memory search with a governed rerank seam."""


@cli.command()
@click.option("--all", "show_all", is_flag=True, help="Include the in-tree default plugins.")
@click.option(
    "--requirements",
    is_flag=True,
    help="Print installed plugin distributions as pip requirements instead of JSON.",
)
def plugins(show_all: bool, requirements: bool) -> None:
    """List installed plugins as JSON: name, version, hooks, components, status."""
    from rankseam.plugins import get_plugins

    infos = get_plugins(all=show_all)
    if requirements:
        seen = set()
        for info in infos:
            if info.default or not info.distribution or info.distribution in seen:
                continue
            seen.add(info.distribution)
            click.echo(f"{info.distribution}=={info.version}")
        return
    click.echo(json.dumps([info.to_dict() for info in infos], indent=2))


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: a failed command prints one line and exits with status 2."""
    try:
        return cli.main(args=argv, prog_name="rankseam", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
