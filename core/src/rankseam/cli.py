"""The ``rankseam`` command.

Sub-commands live in :mod:`rankseam.commands` and load lazily (so ``rankseam --help`` stays
fast); plugins add their own through the ``register_commands`` hook. A plugin whose hook raises
is isolated: its commands are left out, a warning names the plugin, and ``rankseam --help`` and
every other plugin's commands keep working (``RANKSEAM_STRICT_PLUGINS=1`` re-raises instead).

Exit status: 0 on success, 1 when a command fails at run time (a rankseam error: a missing
store, a bad configuration, invalid data), 2 for a usage error (an unknown option, a missing
or malformed argument). With ``--json`` an error is one JSON object on stderr:
``{"error": {"type": ..., "message": ..., "exit_status": ...}}``.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

import click

from rankseam.errors import PluginError, RankseamError
from rankseam.version import __version__

#: name -> "module:attribute" of a click command, imported on first use.
LAZY_COMMANDS: dict[str, str] = {
    "add": "rankseam.commands.store:add",
    "ingest": "rankseam.commands.store:ingest",
    "search": "rankseam.commands.search:search",
    "get": "rankseam.commands.memories:get",
    "list": "rankseam.commands.memories:list_",
    "update": "rankseam.commands.memories:update",
    "delete": "rankseam.commands.memories:delete",
    "history": "rankseam.commands.lifecycle:history",
    "forget": "rankseam.commands.lifecycle:forget",
    "reset": "rankseam.commands.lifecycle:reset",
    "feedback": "rankseam.commands.feedback:feedback",
    "stats": "rankseam.commands.store:stats",
    "reembed": "rankseam.commands.store:reembed",
    "demo": "rankseam.commands.demo:demo",
    "bench": "rankseam.bench.cli:bench",
    "export": "rankseam.commands.snapshot:export",
    "verify": "rankseam.commands.snapshot:verify",
    "import": "rankseam.commands.snapshot:import_",
}

#: name -> the first paragraph of a built-in command's help: what ``rankseam --help`` shows
#: without importing the command (a test keeps it equal to the command's own help).
LAZY_HELP: dict[str, str] = {
    "add": "Add one memory.",
    "ingest": (
        "Bulk-add memories from a JSONL file (one JSON object per line: text, id, importance, "
        "metadata, namespace, created_at)."
    ),
    "search": "Search memories; optionally rerank (--rerank NAME --NAME-OPTION VALUE ...).",
    "get": "Show a memory: its current revision, or exactly --revision N.",
    "list": ("List a namespace's memories (current revisions), one page at a time, oldest first."),
    "update": "Write a new revision of a memory; the previous revision stays readable.",
    "delete": "Delete a memory from search; its revisions stay readable (get --revision N).",
    "history": "Show every revision of a memory, oldest first (and whether it is deleted).",
    "forget": "Hard-delete a memory: every revision's text, metadata and vectors, for good.",
    "reset": "Forget every memory of a namespace, for good (asks first; --yes does not).",
    "feedback": "List, export or delete the feedback applications recorded on search results.",
    "stats": "Print store statistics as JSON.",
    "reembed": "Embed every live memory that lacks a vector in an embedder's space.",
    "demo": (
        "Build a store from the demo corpus and search it: questions with the default policy, "
        "each installed reranker where its effect shows, and the semantic path."
    ),
    "bench": "Benchmarks: retrieval quality per policy and latency of the search path.",
    "export": "Write a portable snapshot of the store into the new folder OUT.",
    "verify": "Check a snapshot: manifest, checksums and every record.",
    "import": "Hydrate the store --db from SNAPSHOT in one transaction.",
}


log = logging.getLogger("rankseam.cli")

#: Exit status of a command that failed at run time, and of a usage error.
RUNTIME_ERROR, USAGE_ERROR = 1, 2


class CommandError(click.ClickException):
    """A command failed at run time for a reason the user can fix: ``Error: <message>``, exit
    status 1. ``kind`` names the rankseam error behind it (shown with ``--json``)."""

    exit_code = RUNTIME_ERROR

    def __init__(self, message: str, *, kind: str = "CommandError") -> None:
        super().__init__(message)
        self.kind = kind


def wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for JSON output (``--json`` before any ``--``)."""
    args = list(args)
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def _error_kind(exc: click.ClickException) -> str:
    if isinstance(exc, CommandError):
        return exc.kind
    if isinstance(exc, click.UsageError):
        return "UsageError"
    return type(exc).__name__


class RankseamGroup(click.Group):
    """Built-in commands load lazily; plugin commands join on first listing or lookup."""

    #: The plugin manager whose commands were added, and the commands before any plugin's.
    _plugin_pm: object | None = None
    _own_commands: dict[str, click.Command] | None = None

    def _add_plugin_commands(self) -> None:
        """Add every plugin's commands (again, when plugins were reloaded since)."""
        from rankseam.plugins import load_plugins, strict_plugins

        pm = load_plugins()
        if pm is self._plugin_pm:
            return
        if self._own_commands is None:
            self._own_commands = dict(self.commands)
        self.commands = dict(self._own_commands)
        self._plugin_pm = pm
        for impl in reversed(pm.hook.register_commands.get_hookimpls()):  # pluggy's order
            name = pm.get_name(impl.plugin) or repr(impl.plugin)
            before = dict(self.commands)
            try:
                impl.function(**({"cli": self} if "cli" in impl.argnames else {}))
            except Exception as exc:  # one plugin's hook must not break the command for all
                self.commands = before  # what it added before failing goes too
                message = f"{type(exc).__name__}: {exc}"
                if strict_plugins():
                    raise PluginError(
                        f"plugin {name!r} failed to register its commands: {message}"
                    ) from exc
                log.warning(
                    "plugin %r failed to register its commands, which are left out: %s",
                    name,
                    message,
                    extra={"plugin": name},
                )

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
        return sorted({*self.commands, *LAZY_COMMANDS})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of ``--help``: a built-in command's line comes from
        :data:`LAZY_HELP`, so listing the commands imports none of them."""
        commands: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None and name in LAZY_HELP:
                command = click.Command(name, help=LAZY_HELP[name])  # its help line only
            elif command is None:
                command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                commands.append((name, command))
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            with formatter.section("Commands"):
                formatter.write_dl([(n, c.get_short_help_str(limit)) for n, c in commands])

    def invoke(self, ctx: click.Context) -> Any:
        """Every command's rankseam errors end it the same way: one line, exit status 1."""
        try:
            return super().invoke(ctx)
        except RankseamError as exc:
            raise CommandError(str(exc), kind=type(exc).__name__) from None

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command; in standalone mode, end with the documented exit status and print
        an error as one line (or, with ``--json``, one JSON object) on stderr."""
        argv = sys.argv[1:] if args is None else list(args)
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(RUNTIME_ERROR)
        except click.ClickException as exc:
            if wants_json(argv):
                error = {
                    "type": _error_kind(exc),
                    "message": exc.format_message(),
                    "exit_status": exc.exit_code,
                }
                click.echo(json.dumps({"error": error}, ensure_ascii=False), err=True)
            else:
                exc.show()
            sys.exit(exc.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        own = self.commands if self._own_commands is None else self._own_commands
        if cmd_name in own:
            return own[cmd_name]
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
@click.option(
    "--options",
    "show_options",
    is_flag=True,
    help="List every installed component (built-in ones too) with the options it takes.",
)
def plugins(show_all: bool, requirements: bool, show_options: bool) -> None:
    """List installed plugins as JSON: name, version, hooks, components, status.

    With --options: every component as JSON — kind, name, plugin, summary, its configuration
    table, the option names it takes (``null`` when its plugin did not declare them) and, under
    ``option_details``, each option's type, default, whether it is required, and a one-line
    help; a store also lists the URL schemes it opens, a store's own candidate source the store
    it runs on. Options are set in rankseam.toml (``[rerankers.mmr] lambda = 0.7``) or, for
    `search`, as ``--mmr-lambda 0.7``.
    """
    from rankseam.plugins import get_plugins, get_registry

    if show_options:
        components = [
            {
                "kind": spec.kind,
                "name": spec.name,
                "plugin": spec.plugin,
                "summary": spec.summary,
                "table": spec.section,
                "options": None if spec.options is None else list(spec.options),
                "option_details": None if info is None else [o.to_dict() for o in info],
                **({"schemes": list(spec.schemes)} if spec.kind == "store" else {}),
                **({"store": spec.store} if spec.store is not None else {}),
            }
            for spec in sorted(
                get_registry(), key=lambda spec: (spec.kind, spec.name, spec.store or "")
            )
            for info in [spec.option_info()]
        ]
        click.echo(json.dumps(components, indent=2, ensure_ascii=False))
        return

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
    """Console entry point (see the module docstring for exit statuses and ``--json`` errors)."""
    return cli.main(args=argv, prog_name="rankseam")
