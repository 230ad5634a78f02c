"""The first hour with the ``rankseam`` command (issue 38, item 5), through the real command:
an unknown flag gets click's "did you mean" while real component flags keep working,
``-o/--option NAME.KEY=VALUE`` in ``search`` as in ``bench``, the installed rerankers' flags in
``search --help``, a configuration error that names the file in use, and integer arguments
bounded with a clear error (on the command line and in the Python API).

A plugin here is a real distribution (the ``install`` fixture): cli_plugins.KEEPER, whose option
is declared with a type, bounds and help;
the command runs in-process through click's runner, and one case of each kind also through
the real console script.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_plugins import ids, invoke, keeper_store

import rankseam
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.types import MAX_INT64, MemoryRef

Install = Callable[..., None]
RANKSEAM = str(Path(sys.executable).with_name("rankseam"))
TOO_BIG = str(MAX_INT64 + 1)  # 9223372036854775808: one past SQLite's INTEGER


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, install: Install) -> Path:
    return keeper_store(
        tmp_path,
        monkeypatch,
        install,
        ["the cat sat", "the cat ran", "a cat slept", "cat food", "we had pasta for dinner"],
    )


# -- unknown flags ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "suggested"),
    [
        (("dinner", "--limt", "5"), "'--limit'"),
        (("dinner", "--trce"), "'--trace'"),
        (("--trce", "dinner"), "'--trace'"),  # the query after it is not taken as its value
        (("dinner", "--namespce", "x"), "'--namespace'"),
        (("cat", "--rerank", "keeper", "--keper-keep", "2"), "'--keeper-keep'"),  # a plugin's
    ],
)
def test_an_unknown_flag_close_to_a_real_one_is_refused_with_did_you_mean(
    db: Path, args: tuple[str, ...], suggested: str
) -> None:
    result = invoke("search", "--db", str(db), *args)
    assert result.exit_code == 2, result.output
    flag = next(a for a in args if a.startswith("--") and a not in ("--rerank",))
    assert f"No such option '{flag}'" in result.output
    assert "Did you mean" in result.output and suggested in result.output
    assert "sets a component option" not in result.output and "needs a value" not in result.output


def test_an_unknown_flag_close_to_nothing_says_what_a_component_flag_is(db: Path) -> None:
    result = invoke("search", "--db", str(db), "cat", "--xyzzy-quux", "1")
    assert result.exit_code == 2, result.output
    assert "No such option: --xyzzy-quux" in result.output
    assert "--NAME-OPTION VALUE" in result.output and "keeper" in result.output


def test_real_component_flags_keep_working(db: Path) -> None:
    baseline = ids(invoke("search", "cat", "--db", str(db), "--json"))
    for flags in (["--keeper-keep", "2"], ["--keeper-keep=2"]):
        got = ids(invoke("search", "cat", "--db", str(db), "--json", "--rerank", "keeper", *flags))
        assert got == [baseline[1], baseline[0]]


def test_a_misspelt_option_of_a_chosen_reranker_is_named_with_its_options(db: Path) -> None:
    result = invoke("search", "cat", "--db", str(db), "--rerank", "keeper", "--keeper-kep", "2")
    assert result.exit_code == 1, result.output
    assert "kep is not an option" in result.output and "keep" in result.output


def test_the_real_console_script_suggests_the_flag(db: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")}
    env["XDG_CONFIG_HOME"] = str(db.parent / "no-user-config")
    done = subprocess.run(
        [RANKSEAM, "search", "dinner", "--limt", "5", "--db", str(db)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Did you mean '--limit'?" in done.stderr and "Traceback" not in done.stderr


# -- -o/--option -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option",
    [
        ["-o", "keeper.keep=2"],
        ["--option", "keeper.keep=2"],
        ["--option=rerankers.keeper.keep=2"],  # TABLE.NAME.KEY=VALUE, as bench takes it
        ["-o", "keeper.keep=9", "--keeper-keep", "2"],  # the flag wins
    ],
)
def test_option_sets_a_reranker_option_as_in_bench(db: Path, option: list[str]) -> None:
    baseline = ids(invoke("search", "cat", "--db", str(db), "--json"))
    got = ids(invoke("search", "cat", "--db", str(db), "--json", "--rerank", "keeper", *option))
    assert got == [baseline[1], baseline[0]]


def test_option_reaches_a_configured_reranker_over_its_file(db: Path) -> None:
    (db.parent / "rankseam.toml").write_text('[search]\nreranker = "keeper"\n')
    baseline = ids(invoke("search", "cat", "--db", str(db), "--json", "--rerank", "none"))
    got = ids(invoke("search", "cat", "--db", str(db), "--json", "-o", "keeper.keep=2"))
    assert got == [baseline[1], baseline[0]]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("keeper", "is neither NAME.KEY=VALUE"),  # bench's parser, bench's words
        ("keeper.keep", "is neither NAME.KEY=VALUE"),
        ("keeper.kep=2", "kep is not an option"),
        ("keeper.keep=0", "[rerankers.keeper] keep must be"),  # its bound, from its options class
    ],
)
def test_a_bad_option_is_refused_with_its_reason(db: Path, option: str, message: str) -> None:
    result = invoke("search", "cat", "--db", str(db), "--rerank", "keeper", "-o", option)
    assert result.exit_code in (1, 2), result.output
    assert message in result.output and "Traceback" not in result.output


# -- search --help ---------------------------------------------------------------------------


def test_search_help_lists_each_installed_rerankers_flags(db: Path) -> None:
    helped = invoke("search", "--help")
    assert helped.exit_code == 0, helped.output
    section = helped.output[helped.output.index("Options of reranker keeper") :]
    assert "--keeper-keep VALUE" in section
    assert "how many coarse candidates to keep" in section and "[default: 3]" in section
    assert "-o, --option [TABLE.]NAME.KEY=VALUE" in helped.output


# -- configuration errors name the file --------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[search]\nreranker = "keeper"\n[rerankers.keeper]\nkep = 2\n', "kep"),
        ('embedder = "hashd"\n', "hashd"),
        ('[search]\nreranker = "keper"\n', "keper"),
        ("[serach]\npool = 5\n", "serach"),
        ("[search]\npool = 500\n", "search.pool"),
    ],
)
def test_a_configuration_error_names_the_file_and_the_key(db: Path, toml: str, key: str) -> None:
    config = db.parent / "rankseam.toml"
    config.write_text(toml)
    for args in (["search", "cat"], ["list"], ["stats"]):
        result = invoke(*args, "--db", str(db))
        assert result.exit_code == 1, result.output
        assert str(config) in result.output and key in result.output
        assert result.output.count(str(config)) == 1  # named once, not again by the wrapper


def test_open_memory_names_the_configuration_file_it_was_given(db: Path) -> None:
    config = db.parent / "settings.toml"
    config.write_text('[search]\nreranker = "keeper"\n[rerankers.keeper]\nkep = 2\n')
    with pytest.raises(ConfigurationError) as raised:
        rankseam.open_memory(db, config_file=config)
    assert str(config) in str(raised.value) and "kep" in str(raised.value)
    with pytest.raises(ConfigurationError) as raised:  # the same in code names no file
        rankseam.open_memory(
            db, config={"search": {"reranker": "keeper"}, "rerankers": {"keeper": {"kep": 2}}}
        )
    assert "configuration file" not in str(raised.value) and "kep" in str(raised.value)


def test_an_error_with_no_configuration_file_names_none(db: Path) -> None:
    result = invoke("search", "cat", "--db", str(db), "--rerank", "keper")
    assert result.exit_code == 1, result.output
    assert "configuration file" not in result.output and "keper" in result.output


# -- integer arguments are bounded -------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("get", "c1", "--revision", TOO_BIG), "--revision"),
        (("list", "--offset", TOO_BIG), "--offset"),
        (("list", "--limit", TOO_BIG), "--limit"),
        (("search", "cat", "--limit", TOO_BIG), "--limit"),
        (("reembed", "--batch-size", TOO_BIG), "--batch-size"),
        (("reembed", "--max", TOO_BIG), "--max"),
    ],
)
def test_an_integer_argument_past_its_bound_is_a_usage_error(
    db: Path, args: tuple[str, ...], flag: str
) -> None:
    result = invoke(*args, "--db", str(db))
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{flag}'" in result.output and "range" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_the_largest_offset_and_revision_are_answered(db: Path) -> None:
    listed = invoke("list", "--db", str(db), "--offset", str(MAX_INT64), "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output)["memories"] == []
    got = invoke("get", "c1", "--db", str(db), "--revision", str(MAX_INT64))
    assert got.exit_code == 1 and "Traceback" not in got.output, got.output


def test_the_python_api_bounds_what_reaches_sqlite(db: Path) -> None:
    with pytest.raises(ValueError, match=r"revision is at most 9223372036854775807"):
        MemoryRef("default", "c1", MAX_INT64 + 1)
    with rankseam.open_memory(db, create=False) as memory:
        for call in (
            lambda: memory.reembed(batch_size=MAX_INT64 + 1),
            lambda: memory.ingest([{"text": "x"}], batch_size=MAX_INT64 + 1),
        ):
            with pytest.raises(ValidationError, match=r"batch_size must be an integer in 1\.\."):
                call()
        assert len(list(memory.list())) == 5  # nothing was written
