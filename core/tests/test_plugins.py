"""Plugin discovery through real entry points (dist-info folders on sys.path)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest
from click.testing import CliRunner

from rankseam.cli import cli
from rankseam.compose import ComponentContext, Config
from rankseam.errors import ConfigurationError, PluginError
from rankseam.plugins import get_plugins, get_registry, load_plugins, reset_plugins

#: The ``install`` fixture (conftest.py) takes ``(entry_point_name, module_source)``.
Install = Callable[..., None]

GOOD = """
import rankseam
from rankseam.types import RerankDecision

class Reverse:
    policy_id = "test.reverse.v1"
    async def rerank(self, query, candidates, limit, /):
        return RerankDecision(tuple(c.rank for c in reversed(candidates))[:limit])

@rankseam.hookimpl
def register_rerankers(register):
    register("{name}", lambda options, context: Reverse(), summary="reverse")
"""


def by_name(all: bool = False) -> dict[str, dict]:
    return {p.name: p.to_dict() for p in get_plugins(all=all)}


def test_a_plugin_is_found_through_its_entry_point(install: Install) -> None:
    install("rev", GOOD.format(name="reverse"))
    info = by_name()["rev"]
    assert info["status"] == "ok" and info["version"] == "0.3.1"
    assert info["hooks"] == ["register_rerankers"]
    assert info["components"] == {"reranker": ["reverse"]}
    assert get_registry().get("reranker", "reverse").plugin == "rev"


def test_loading_is_lazy_and_happens_once(install: Install) -> None:
    install("rev", GOOD.format(name="reverse"))
    assert load_plugins() is load_plugins()


def test_empty_allow_list_loads_no_plugin(
    install: Install, monkeypatch: pytest.MonkeyPatch
) -> None:
    install("rev", GOOD.format(name="reverse"))
    monkeypatch.setenv("RANKSEAM_LOAD_PLUGINS", "")
    assert get_plugins() == []
    assert get_registry().get("reranker", "reverse") is None
    assert get_registry().get("reranker", "identity") is not None  # defaults stay
    assert by_name(all=True)["rev"]["status"] == "disabled"


def test_allow_and_block_lists(install: Install, monkeypatch: pytest.MonkeyPatch) -> None:
    install("one", GOOD.format(name="r1"))
    install("two", GOOD.format(name="r2"))
    monkeypatch.setenv("RANKSEAM_LOAD_PLUGINS", "two")
    assert {"one", "two"} & set(by_name()) == {"two"}
    reset_plugins()
    monkeypatch.delenv("RANKSEAM_LOAD_PLUGINS")
    monkeypatch.setenv("RANKSEAM_DISABLE_PLUGINS", "two")
    assert {"one", "two"} & set(by_name()) == {"one"}


def test_a_plugin_that_fails_to_import_is_isolated(install: Install) -> None:
    install("good", GOOD.format(name="reverse"))
    install("broken", "raise RuntimeError('missing native library')\n")
    plugins = by_name()
    assert plugins["broken"]["status"] == "error"
    assert "RuntimeError: missing native library" in plugins["broken"]["error"]
    assert plugins["good"]["status"] == "ok"
    ctx = ComponentContext(Config())
    assert ctx.reranker("reverse").policy_id == "test.reverse.v1"


def test_strict_mode_reraises(install: Install, monkeypatch: pytest.MonkeyPatch) -> None:
    install("broken", "raise RuntimeError('missing native library')\n")
    monkeypatch.setenv("RANKSEAM_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="broken.*missing native library"):
        load_plugins()
    reset_plugins()
    with pytest.raises(PluginError):
        load_plugins(strict=True)


def test_a_failure_half_way_through_registration_leaves_nothing(install: Install) -> None:
    install(
        "half",
        """
        import rankseam
        @rankseam.hookimpl
        def register_rerankers(register):
            register("first", lambda o, c: None)
            raise ValueError("second one is broken")
        """,
    )
    assert by_name()["half"]["status"] == "error"
    assert get_registry().get("reranker", "first") is None


def test_duplicate_component_names_name_both_plugins(install: Install) -> None:
    install("aaa", GOOD.format(name="same"))
    install("bbb", GOOD.format(name="same"))
    error = by_name()["bbb"]["error"]
    assert "duplicate reranker name 'same'" in error and "'aaa'" in error and "'bbb'" in error
    assert get_registry().get("reranker", "same").plugin == "aaa"


def test_a_plugin_refused_for_a_taken_name_keeps_none_of_its_names(install: Install) -> None:
    install("aaa", GOOD.format(name="same"))
    install(
        "bbb",
        """
        import rankseam
        @rankseam.hookimpl
        def register_rerankers(register):
            register("extra", lambda o, c: None)
            register("same", lambda o, c: None)
        """,
    )
    plugins = by_name()
    assert plugins["bbb"]["status"] == "error"
    assert "duplicate reranker name 'same'" in plugins["bbb"]["error"]
    assert get_registry().get("reranker", "extra") is None
    assert get_registry().get("reranker", "same").plugin == "aaa"


def test_a_hook_implementation_receives_only_the_arguments_it_names(install: Install) -> None:
    install(
        "fewer",
        """
        import rankseam
        calls = []
        @rankseam.hookimpl
        def register_embedders():
            calls.append("register_embedders")
        @rankseam.hookimpl
        def register_rerankers(register):
            register("fewer", lambda o, c: None)
        """,
    )
    info = by_name()["fewer"]
    assert info["status"] == "ok", info.get("error")
    assert info["components"] == {"reranker": ["fewer"]}
    assert sys.modules["rs_test_fewer"].calls == ["register_embedders"]


def test_a_misspelt_hook_is_refused(install: Install) -> None:
    install(
        "typo",
        """
        import rankseam
        @rankseam.hookimpl
        def register_rerankerz(register):
            pass
        """,
    )
    assert "unknown hook(s) register_rerankerz" in by_name()["typo"]["error"]


def test_unknown_component_is_a_configuration_error_saying_how_to_fix() -> None:
    reset_plugins()
    with pytest.raises(
        ConfigurationError, match=r"no reranker named 'nope'.*available: .*identity"
    ):
        ComponentContext(Config()).reranker("nope")


def test_cli_plugins_json(install: Install, monkeypatch: pytest.MonkeyPatch) -> None:
    install("rev", GOOD.format(name="reverse"))
    install("broken", "import no_such_module_anywhere\n")
    out = CliRunner().invoke(cli, ["plugins"])
    assert out.exit_code == 0, out.output
    listed = {p["name"]: p for p in json.loads(out.output)}
    assert listed["rev"]["components"] == {"reranker": ["reverse"]}
    assert listed["broken"]["status"] == "error"
    assert "ModuleNotFoundError" in listed["broken"]["error"]

    reqs = CliRunner().invoke(cli, ["plugins", "--requirements"])
    assert "rs_test_rev==0.3.1" in reqs.output.splitlines()

    reset_plugins()
    monkeypatch.setenv("RANKSEAM_LOAD_PLUGINS", "")
    out = CliRunner().invoke(cli, ["plugins"])
    assert json.loads(out.output) == []
    everything = json.loads(CliRunner().invoke(cli, ["plugins", "--all"]).output)
    assert any(p["default"] and p["components"] == {"reranker": ["identity"]} for p in everything)


def test_importing_rankseam_loads_no_plugin() -> None:
    code = (
        "import sys, rankseam, rankseam.types, rankseam.seam, rankseam.compose\n"
        "from rankseam import plugins\n"
        "assert plugins._state.pm is None, 'plugins loaded at import'\n"
        "assert not any(m.startswith('rankseam.default_plugins.') for m in sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
