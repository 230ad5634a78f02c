"""Options declared once: a component registers an attrs options class; the host checks the
configuration table against it at build time (one wording, naming ``[table.name] key``),
hands the factory a typed instance, and `rankseam plugins --options` shows each option's type,
default and help."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
from click.testing import CliRunner

import rankseam
from rankseam.cli import cli
from rankseam.errors import ConfigurationError, PluginError
from rankseam.plugin import OptionError, option, parse_options
from rankseam.registry import Registry, RerankerRegister

#: A plugin whose reranker ``tuned`` declares one option of every kind and records what its
#: factory received.
TUNED = """
from typing import Literal

import attrs

from rankseam.plugin import OptionError, hookimpl, option

SEEN = []


def _below_window(inst, attr, value):
    if value >= inst.window:
        raise OptionError("stride", f"({value}) must be smaller than window ({inst.window})")


@attrs.frozen
class TunedOptions:
    backend: str = option(nonempty=True, help="the backend to ask")
    lam: float = option(0.5, key="lambda", ge=0, le=1, help="1 = relevance, 0 = diversity")
    window: int = option(10, ge=2, le=200, help="candidates per call")
    stride: int = option(
        attrs.Factory(lambda self: self.window // 2, takes_self=True),
        ge=1,
        validator=_below_window,
        default_doc="window // 2",
        help="how far each window moves",
    )
    fast: bool = option(False, help="skip the slow part")
    mode: Literal["coarse", "query"] = option("coarse", help="what relevant means")
    span: tuple[int, int] = option((1, 2), ge=1, le=8, help="[low, high]")
    key: str | None = option(None, env=True, secret=True, help="the API key")


class Identity:
    policy_id = "test.tuned.v1"
    descriptor = {"name": "tuned"}
    deterministic = True
    needs_embeddings = False
    needs_event_loop = False

    async def rerank(self, query, candidates, limit, /):
        from rankseam.types import RerankDecision

        return RerankDecision(tuple(range(1, min(limit, len(candidates)) + 1)))


def make(options, context):
    SEEN.append(options)
    return Identity()


def make_named(options, context):
    SEEN.append(options)
    return Identity()


@hookimpl
def register_rerankers(register):
    register("tuned", make, summary="options of every kind", options=TunedOptions)
    register("named", make_named, summary="option names only", options=("colour",))
"""


@pytest.fixture
def tuned(install: Any, tmp_path: Path) -> Any:
    install("tuned", TUNED)
    memory = rankseam.open_memory(tmp_path / "m.sqlite3")
    memory.add("a heron at the mirror pond")
    yield memory
    memory.close()


def seen() -> list[Any]:
    import rs_test_tuned  # the installed plugin module

    return rs_test_tuned.SEEN  # type: ignore[no-any-return]


def search(memory: Any, reranker: str = "tuned", **options: Any) -> Any:
    return memory.search("heron", reranker=reranker, reranker_options=options)


def test_the_factory_gets_a_typed_instance_with_defaults_and_conversions(tuned: Any) -> None:
    assert search(tuned, backend="  local ", **{"lambda": 1}, span=[2, 3]).hits
    got = seen()[-1]
    assert type(got).__name__ == "TunedOptions"
    assert got.backend == "local"  # nonempty strings lose surrounding spaces
    assert got.lam == 1.0 and isinstance(got.lam, float)  # an integer is a number
    assert got.span == (2, 3)  # a list becomes the declared tuple
    assert (got.window, got.stride, got.fast, got.mode, got.key) == (10, 5, False, "coarse", None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lambda": "x"}, "[rerankers.tuned] lambda must be a number in [0, 1], got 'x'"),
        ({"lambda": 1.5}, "[rerankers.tuned] lambda must be a number in [0, 1], got 1.5"),
        ({"window": 1}, "[rerankers.tuned] window must be an integer in 2..200, got 1"),
        ({"window": 10.0}, "[rerankers.tuned] window must be an integer in 2..200, got 10.0"),
        ({"stride": 0}, "[rerankers.tuned] stride must be an integer >= 1, got 0"),
        ({"mode": "other"}, "[rerankers.tuned] mode must be one of 'coarse', 'query', got"),
        ({"span": [1]}, "[rerankers.tuned] span must be a list of 2 integers in 1..8, got [1]"),
        ({"span": [1, 9]}, "[rerankers.tuned] span must be a list of 2 integers in 1..8"),
        ({"backend": "  "}, "[rerankers.tuned] backend must be a non-empty string, got '  '"),
        ({"stride": 12}, "[rerankers.tuned] stride (12) must be smaller than window (10)"),
    ],
)
def test_wrong_values_are_refused_at_build_time_in_one_wording(
    tuned: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        search(tuned, **{"backend": "local", **options})
    assert str(info.value).startswith(message)
    assert seen() == []  # the factory never ran


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"window": True}, "window must be an integer"),
        ({"lambda": False}, "lambda must be a number"),
        ({"fast": 1}, "fast must be true or false, got 1"),
        ({"fast": "yes"}, "fast must be true or false, got 'yes'"),
    ],
)
def test_a_bool_is_not_a_number_and_a_number_is_not_a_bool(
    tuned: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        search(tuned, backend="local", **options)


def test_unknown_and_missing_options_name_the_table_and_the_known_ones(tuned: Any) -> None:
    with pytest.raises(ConfigurationError) as info:
        search(tuned, backend="local", colour="blue", lamda=0.3)
    assert str(info.value).startswith(
        "[rerankers.tuned] colour, lamda are not options; its options are backend, lambda, "
        "window, stride, fast, mode, span, key"
    )
    with pytest.raises(ConfigurationError) as info:
        search(tuned)
    assert str(info.value).startswith(
        "[rerankers.tuned] backend is required: a non-empty string (the backend to ask)"
    )


def test_environment_references_and_secrets(tuned: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNED_KEY", "sk-live-123456")
    search(tuned, backend="local", key={"$env": "TUNED_KEY"})
    assert seen()[-1].key == "sk-live-123456"
    assert "sk-live" not in repr(seen()[-1])  # a secret option is left out of the repr
    monkeypatch.delenv("TUNED_KEY")
    search(tuned, backend="local", key={"$env": "TUNED_KEY"})
    assert seen()[-1].key is None  # unset: the option is unset
    with pytest.raises(ConfigurationError) as info:
        search(tuned, backend="local", key=12345678)
    assert "got a int" in str(info.value) and "12345678" not in str(info.value)


def test_the_configuration_file_goes_through_the_same_check(install: Any, tmp_path: Path) -> None:
    install("tuned", TUNED)
    config = {"search": {"reranker": "tuned"}, "rerankers": {"tuned": {"backend": 3}}}
    with pytest.raises(ConfigurationError, match=r"^\[rerankers.tuned\] backend must be"):
        rankseam.open_memory(tmp_path / "m.sqlite3", config=config).search("heron")


def test_names_only_registration_checks_names_and_passes_the_table(tuned: Any) -> None:
    search(tuned, "named", colour="blue")
    assert seen()[-1] == {"colour": "blue"}
    with pytest.raises(ConfigurationError, match=r"^\[rerankers.named\] size is not an option"):
        search(tuned, "named", size=3)


def test_store_and_source_options_are_checked_too(tmp_path: Path) -> None:
    config = {"stores": {"sqlite": {"wal": True}}}
    with pytest.raises(ConfigurationError, match=r"\[stores.sqlite\] wal is not an option; it "):
        rankseam.open_memory(tmp_path / "m.sqlite3", config=config)
    config = {"sources": {"lexical": {"max_df": 0}}}
    with pytest.raises(
        ConfigurationError, match=r"\[sources.lexical\] max_df must be a number in "
    ):
        rankseam.open_memory(tmp_path / "n.sqlite3", config=config).search("x")


def test_plugins_options_shows_type_default_and_help(tuned: Any) -> None:
    done = CliRunner().invoke(cli, ["plugins", "--options"])
    assert done.exit_code == 0, done.output
    listed = {(c["kind"], c["name"]): c for c in json.loads(done.output)}
    tuned_entry = listed[("reranker", "tuned")]
    assert tuned_entry["table"] == "rerankers.tuned"
    assert tuned_entry["options"][:2] == ["backend", "lambda"]
    details = {d["name"]: d for d in tuned_entry["option_details"]}
    assert details["lambda"] == {
        "name": "lambda",
        "type": "number in [0, 1]",
        "default": 0.5,
        "required": False,
        "help": "1 = relevance, 0 = diversity",
    }
    assert details["backend"]["required"] is True and details["backend"]["default"] is None
    assert details["stride"]["default"] == "window // 2"
    assert details["span"]["default"] == [1, 2]
    assert details["mode"]["type"] == "one of 'coarse', 'query'"
    assert details["key"]["type"] == "string"
    named = listed[("reranker", "named")]
    assert named["option_details"] == [
        {"name": "colour", "type": "any", "default": None, "required": False, "help": ""}
    ]
    hashed = {d["name"]: d for d in listed[("embedder", "hashed")]["option_details"]}
    assert hashed["dimensions"]["type"] == "integer in 16..65536"
    assert hashed["dimensions"]["default"] == 256 and hashed["dimensions"]["help"]
    assert listed[("reranker", "identity")]["option_details"] == []


# -- the machinery without a plugin ---------------------------------------------------------


@attrs.frozen
class Small:
    size: int = option(3, ge=1, help="how many")
    kind: Literal["a", "b"] = option("a", help="which")
    names: tuple[str, ...] = option((), help="some names")
    headers: Mapping[str, str] = option({}, env=True, help="name = value")


def test_parse_options_is_the_public_way_to_check_a_table() -> None:
    small = parse_options(Small, {"size": 5, "names": ["x", "y"]}, "rerankers.small")
    assert small == Small(size=5, kind="a", names=("x", "y"))
    with pytest.raises(ConfigurationError, match=r"^\[rerankers.small\] names must be a list of"):
        parse_options(Small, {"names": ["x", 1]}, "rerankers.small")
    with pytest.raises(ConfigurationError, match=r"headers must be a table whose values are str"):
        parse_options(Small, {"headers": {"x": 1}}, "rerankers.small")


def test_headers_values_may_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMALL_H", "v")
    small = parse_options(Small, {"headers": {"X-A": {"$env": "SMALL_H"}}}, "rerankers.small")
    assert small.headers == {"X-A": "v"}
    with pytest.raises(ConfigurationError, match="is the environment variable set"):
        parse_options(Small, {"headers": {"X-A": {"$env": "SMALL_UNSET"}}}, "rerankers.small")


def test_option_error_outside_the_host_names_the_key() -> None:
    assert str(OptionError("stride", "must be small")) == "stride must be small"


def factory(options, context):  # type: ignore[no-untyped-def]
    return None


def test_declared_options_are_recorded_and_undeclared_are_none() -> None:
    registry = Registry()
    register = RerankerRegister(registry, "plugin-a")
    register("typed", factory, options=Small)
    register("declared", factory, options=["lambda", "relevance"])
    register("none-taken", factory, options=())
    register("undeclared", factory)
    typed = registry.get("reranker", "typed")
    assert typed is not None and typed.options_class is Small
    assert typed.options == ("size", "kind", "names", "headers")
    assert registry.get("reranker", "declared").options == ("lambda", "relevance")
    assert registry.get("reranker", "none-taken").options == ()
    assert registry.get("reranker", "undeclared").options is None
    assert registry.get("reranker", "undeclared").parse({"any": 1}) == {"any": 1}


@pytest.mark.parametrize("bad", [[1], ["ok", ""], [None]])
def test_options_that_are_not_names_are_refused(bad: list[object]) -> None:
    register = RerankerRegister(Registry(), "plugin-a")
    with pytest.raises(PluginError, match="pass an options class"):
        register("x", factory, options=bad)  # type: ignore[arg-type]


def test_an_options_class_needs_option_fields() -> None:
    @attrs.frozen
    class Plain:
        size: int = 3

    register = RerankerRegister(Registry(), "plugin-a")
    with pytest.raises(PluginError, match=r"Plain.size is not declared with .*option\(\.\.\.\)"):
        register("x", factory, options=Plain)
    with pytest.raises(PluginError, match="not an attrs class"):
        register("y", factory, options=int)

    @attrs.frozen
    class Odd:
        when: complex = option(1j, help="a type options cannot have")

    with pytest.raises(PluginError, match=r"Odd.when has type .*complex.*which options cannot"):
        register("z", factory, options=Odd)


def test_check_options_is_deprecated_in_the_plugin_api() -> None:
    import rankseam.plugin

    with pytest.deprecated_call():
        check = rankseam.plugin.check_options
    with pytest.raises(ConfigurationError, match=r"^\[rerankers.x\] b is not an option"):
        check("rerankers.x", {"b": 1}, ["a"])
