"""What a ``rankseam`` process imports to start: ``--version`` and ``import rankseam`` nothing
heavy, ``--help`` none of the built-in commands, a coarse search no asyncio.

Each check runs a fresh interpreter and reads its ``sys.modules``: what was imported, never
how long it took (docs/benchmarks.md, "CLI start-up", has the timings and their command).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

import rankseam
from rankseam.cli import LAZY_COMMANDS, LAZY_HELP, cli

#: What ``rankseam --version`` must not import (each costs tens of milliseconds of CPU).
HEAVY = ("numpy", "attrs", "pluggy", "asyncio", "importlib.metadata", "sqlite3")

#: Runs the console entry point with the given arguments, then prints what it imported.
RUN_CLI = """
import contextlib, io, json, sys
sys.argv = ["rankseam", *json.loads(sys.argv[1])]
from rankseam.cli import main
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        main()
except SystemExit as exc:
    status = exc.code
print(json.dumps({"status": status, "stdout": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[str, set[str]]:
    """Run ``rankseam ARGS`` in a fresh interpreter: its standard output and every module it
    imported (the run must succeed)."""
    proc = subprocess.run(
        [sys.executable, "-c", RUN_CLI, json.dumps(list(args))],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        check=True,
    )
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["status"] == 0, proc.stderr
    return report["stdout"], set(report["modules"])


def test_version_imports_nothing_heavy() -> None:
    out, modules = run_cli("--version")
    assert out.strip() == f"rankseam, version {rankseam.__version__}"
    assert sorted(m for m in HEAVY if m in modules) == []
    assert not any(m.startswith(("rankseam.types", "rankseam.memory")) for m in modules)


def test_importing_rankseam_imports_nothing_heavy_and_every_public_name_resolves() -> None:
    code = (
        "import sys, json, rankseam\n"
        "before = sorted(m for m in " + repr(HEAVY) + " if m in sys.modules)\n"
        "names = {n: type(getattr(rankseam, n)).__name__ for n in rankseam.__all__}\n"
        "print(json.dumps([before, names]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, names = json.loads(proc.stdout)
    assert before == []
    assert sorted(names) == sorted(rankseam.__all__)
    # each lazy name is the object of the module that defines it
    from rankseam import errors, hookspecs, memory, resolve, text_reranker, types

    homes = (errors, hookspecs, memory, resolve, text_reranker, types)
    for name in rankseam.__all__:
        if name != "__version__":
            assert any(getattr(home, name, None) is getattr(rankseam, name) for home in homes)
    assert set(rankseam.__all__) <= set(dir(rankseam))
    # a submodule is an attribute of the package, as when the package imported it eagerly
    assert rankseam.compose.Config is rankseam.config.Config
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = rankseam.no_such_name


def test_help_lists_the_built_in_commands_without_importing_them() -> None:
    out, modules = run_cli("--help", env={"RANKSEAM_LOAD_PLUGINS": ""})
    listed = {line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.strip()}
    assert set(LAZY_COMMANDS) | {"plugins"} <= listed
    imported = sorted(m for m in modules if m.startswith(("rankseam.commands.", "rankseam.bench")))
    assert imported == []
    assert "rankseam.memory" not in modules


def test_the_help_line_of_each_built_in_command_is_its_own() -> None:
    assert set(LAZY_HELP) == set(LAZY_COMMANDS)
    ctx = click.Context(cli)
    for name in LAZY_COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        shown = click.Command(name, help=LAZY_HELP[name]).get_short_help_str(1000)
        assert shown == command.get_short_help_str(1000), name


def test_a_coarse_search_imports_no_asyncio_and_no_entry_point_plugin(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with rankseam.open_memory(db) as memory:
        memory.add("the ferry to the island leaves at nine")
    out, modules = run_cli(
        "search",
        "ferry",
        "--db",
        str(db),
        "--json",
        env={"RANKSEAM_LOAD_PLUGINS": ""},
        cwd=tmp_path,
    )
    assert "ferry to the island" in json.loads(out)["hits"][0]["text"]
    assert "asyncio" not in modules
    assert "tomllib" not in modules  # no configuration file, no component options
    assert not any(m.startswith("rankseam_") for m in modules)
