"""Plugin commands are isolated (a raising ``register_commands`` hook breaks nothing else), and
options may stand before or after the positional arguments of every command.

Plugins here are real distributions (a module and a dist-info with an entry point, made by the
``install`` fixture); the command runs in-process through click's runner.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from cli_plugins import ids, invoke, keeper_store

from rankseam.cli import cli
from rankseam.errors import PluginError

Install = Callable[..., None]

HELLO = """
import click
import rankseam

@rankseam.hookimpl
def register_commands(cli):
    @cli.command(name="{command}")
    @click.argument("who")
    @click.option("--shout", is_flag=True)
    def hello(who, shout):
        \"\"\"Say hello.\"\"\"
        click.echo(("HELLO " + who).upper() if shout else "hello " + who)
"""

RAISING = """
import click
import rankseam

@rankseam.hookimpl
def register_commands(cli):
    @cli.command(name="half-added")
    def half_added():
        \"\"\"Added before the hook fails.\"\"\"
    raise RuntimeError("the command module needs a newer click")
"""


def test_a_raising_register_commands_hook_leaves_help_and_other_plugins_working(
    install: Install, caplog: pytest.LogCaptureFixture
) -> None:
    install("greeter", HELLO.format(command="hello"))
    install("brokencmds", RAISING)
    with caplog.at_level(logging.WARNING, logger="rankseam.cli"):
        helped = invoke("--help")
    assert helped.exit_code == 0, helped.output
    assert "hello" in helped.output and "search" in helped.output
    assert "half-added" not in helped.output  # what the failing hook added is gone too
    (warning,) = [r for r in caplog.records if r.name == "rankseam.cli"]
    assert warning.levelno == logging.WARNING and warning.plugin == "brokencmds"
    assert "'brokencmds'" in warning.getMessage()
    assert "RuntimeError: the command module needs a newer click" in warning.getMessage()
    # the other plugin's command runs, options before or after its argument
    assert invoke("hello", "ana", "--shout").output == "HELLO ANA\n"
    assert invoke("hello", "--shout", "ana").output == "HELLO ANA\n"
    # and the failing plugin's components are unaffected: it registered none, it is "ok"
    listed = {p["name"]: p for p in json.loads(invoke("plugins").output)}
    assert listed["brokencmds"]["status"] == "ok"


def test_strict_mode_reraises_a_register_commands_failure(
    install: Install, monkeypatch: pytest.MonkeyPatch
) -> None:
    install("brokencmds", RAISING)
    monkeypatch.setenv("RANKSEAM_STRICT_PLUGINS", "1")
    result = invoke("--help")
    assert isinstance(result.exception, PluginError)
    assert "plugin 'brokencmds' failed to register its commands" in str(result.exception)


def test_plugin_commands_follow_a_reload_of_the_plugins(install: Install) -> None:
    install("greeter", HELLO.format(command="hello"))
    assert "hello" in invoke("--help").output
    from rankseam.plugins import reset_plugins

    install("other", HELLO.format(command="bonjour"))
    reset_plugins()
    listed = invoke("--help").output
    assert "hello" in listed and "bonjour" in listed


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, install: Install) -> Path:
    return keeper_store(
        tmp_path, monkeypatch, install, ["the cat sat", "the cat ran", "a cat slept", "cat food"]
    )


@pytest.mark.parametrize(
    "args",
    [
        ("--rerank", "keeper", "--keeper-keep", "2", "cat"),  # every option before the query
        ("cat", "--rerank", "keeper", "--keeper-keep", "2"),  # every option after it
        ("--keeper-keep", "2", "cat", "--rerank", "keeper"),  # mixed
        ("--keeper-keep=2", "--rerank=keeper", "cat"),
        ("--rerank", "keeper", "cat", "--keeper-keep", "2", "--limit", "3"),
    ],
)
def test_search_takes_component_options_before_or_after_the_query(
    db: Path, args: tuple[str, ...]
) -> None:
    baseline = ids(invoke("search", "cat", "--db", str(db), "--json"))
    assert len(baseline) == 4
    reranked = ids(invoke("search", "--db", str(db), "--json", *args))
    assert reranked == [baseline[1], baseline[0]]  # keep=2 reached the reranker


def test_search_the_documented_order_with_a_query_that_looks_like_a_value(db: Path) -> None:
    # `--keeper-keep 2` takes "2"; "cat" stays the query, wherever it stands
    result = invoke("search", "--db", str(db), "--rerank", "keeper", "--keeper-keep", "2", "cat")
    assert result.exit_code == 0, result.output
    assert "unexpected argument" not in result.output
    assert result.output.count(" score=") == 2


def test_after_a_double_dash_everything_is_the_query(db: Path) -> None:
    result = invoke("search", "--db", str(db), "--json", "--trace", "--", "--keeper-keep")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["trace"]["query"] == "--keeper-keep"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--keeper-keep", "2", "cat"), "no reranker is chosen"),
        (("--rerank", "keeper", "cat", "--keeper-keep"), "needs a value"),
        (("--rerank", "identity", "--keeper-keep", "1", "cat"), "not an option of the chosen"),
        (("--rerank", "keeper", "--other-x", "1", "cat"), "No such option '--other-x'"),
    ],
)
def test_search_component_option_mistakes_are_usage_errors(
    db: Path, args: tuple[str, ...], message: str
) -> None:
    result = invoke("search", "--db", str(db), *args)
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (("get", "--json", "c1"), ("get", "c1", "--json")),
        (("list", "--json", "--limit", "2"), ("list", "--limit", "2", "--json")),
        (("search", "--json", "--limit", "2", "cat"), ("search", "cat", "--limit", "2", "--json")),
    ],
)
def test_every_command_takes_options_before_or_after_its_arguments(
    db: Path, before: tuple[str, ...], after: tuple[str, ...]
) -> None:
    first = invoke(*before, "--db", str(db))
    second = invoke(after[0], "--db", str(db), *after[1:])
    assert first.exit_code == 0, first.output
    assert first.output == second.output


def test_add_takes_options_before_or_after_the_text(db: Path) -> None:
    assert invoke("add", "--db", str(db), "-n", "x", "--id", "a", "first").exit_code == 0
    assert invoke("add", "second", "--db", str(db), "--id", "b", "-n", "x").exit_code == 0
    listed = json.loads(invoke("list", "--db", str(db), "-n", "x", "--json").output)
    assert sorted((m["memory_id"], m["text"]) for m in listed["memories"]) == [
        ("a", "first"),
        ("b", "second"),
    ]


def test_every_built_in_command_allows_interspersed_options() -> None:
    """click allows options between arguments unless a command turns it off; none does (a
    group's own options come before its sub-command's name, so groups are looked into)."""

    def commands(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
        ctx = click.Context(group, info_name=prefix)
        found = []
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None, name
            if isinstance(command, click.Group):
                found += commands(command, f"{prefix} {name}")
            else:
                found.append((f"{prefix} {name}", command))
        return found

    checked = commands(cli, "rankseam")
    assert len(checked) >= 14
    for name, command in checked:
        assert command.allow_interspersed_args, f"`{name}` forbids options after arguments"
        assert not command.context_settings.get("ignore_unknown_options"), (
            f"`{name}` ignores unknown options: an option's value would become an argument"
        )
