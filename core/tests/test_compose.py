"""Configuration: code, TOML and environment; every mistake is a ConfigurationError."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankseam.compose import ComponentContext, Config
from rankseam.errors import ConfigurationError
from rankseam.options import resolve_env_refs


def test_defaults() -> None:
    config = Config()
    assert config.search.pool == 30 and config.search.fusion == "convex"
    assert config.search.reranker is None and config.search.on_error == "fail_closed"
    assert config.search.sources == ("lexical", "vector", "importance", "context")


def test_toml_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "rankseam.toml"
    path.write_text(
        """
        db = "x.sqlite3"
        namespace = "work"
        [search]
        pool = 50
        reranker = "identity"
        on_error = "coarse"
        trace_text = false
        [rerankers.mmr]
        lambda = 0.6
        [write_gate]
        backend = "heuristic"
        """
    )
    config = Config.from_toml(path)
    assert config.db == "x.sqlite3" and config.namespace == "work"
    assert config.search.pool == 50 and config.search.reranker == "identity"
    assert config.search.on_error == "fail_open" and config.search.trace_text is False
    assert config.options("reranker", "mmr") == {"lambda": 0.6}
    assert config.options("reranker", "other") == {}
    assert config.write_gate and config.write_gate_backend == "heuristic"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"search": {"pool": 0}}, r"search.pool: pool size must be an integer in 1..200"),
        ({"search": {"pool": 201}}, r"1..200"),
        ({"search": {"on_error": "ignore"}}, r"on_error must be 'fail_closed'"),
        ({"search": {"fusion": "max"}}, r"one of 'convex', 'rrf'"),
        ({"search": {"pooll": 3}}, r"unknown \[search\] key\(s\) \['pooll'\]"),
        ({"rerankerz": {}}, r"unknown key\(s\) \['rerankerz'\]"),
        ({"rerankers": {"mmr": 0.5}}, r"\[rerankers\] must hold one table per component"),
        ({"search": {"max_chars": 0}}, r"max_chars must be an integer >= 1"),
    ],
)
def test_bad_configuration_says_what_and_how(data: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Config.from_mapping(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # Each of these was accepted silently before: "no" turned the gate on, a misspelt
        # key was ignored, and a string became a tuple of letters.
        ({"write_gate": "no"}, r"write_gate must be true, false or a table"),
        ({"write_gate": {"enabeld": False}}, r"unknown \[write_gate\] key\(s\) \['enabeld'\]"),
        ({"write_gate": {"enabled": "no"}}, r"write_gate.enabled must be true or false"),
        ({"write_gate": {"backend": 3}}, r"write_gate.backend must be a decision backend name"),
        ({"search": {"sources": "lexical"}}, r"search.sources must be a list of source names"),
        ({"search": {"sources": ["lexical", 3]}}, r"search.sources must hold source names"),
        ({"search": {"weights": {"vector": "high"}}}, r"search.weights maps channel names"),
        ({"search": {"weights": [1, 2]}}, r"search.weights must be a table"),
        ({"search": {"reranker": 5}}, r"search.reranker must be a component name"),
        ({"search": {"trace_text": "no"}}, r"search.trace_text must be true or false"),
        ({"namespace": ""}, r"namespace must be a non-empty string"),
        ({"embedder": ["hashed"]}, r"embedder must be a non-empty string"),
        ({"db": 7}, r"db must be a string"),
    ],
)
def test_every_configuration_mistake_is_a_configuration_error(data: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        Config.from_mapping(data, source="rankseam.toml")
    assert str(caught.value).startswith("rankseam.toml: ")


def test_the_same_mistakes_through_open_memory_overrides(tmp_path: Path) -> None:
    from rankseam import open_memory

    with pytest.raises(ConfigurationError, match=r"search.sources must be a list"):
        open_memory(tmp_path / "m.sqlite3", sources="lexical")
    with pytest.raises(ConfigurationError, match=r"write_gate must be true or false"):
        open_memory(tmp_path / "m.sqlite3", write_gate="no")


def test_bad_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[search\npool = ")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        Config.from_toml(path)
    with pytest.raises(ConfigurationError, match="does not exist"):
        Config.from_toml(tmp_path / "missing.toml")


def test_environment_overrides() -> None:
    config = Config().with_env(
        {
            "RANKSEAM_DB": "/tmp/a.sqlite3",
            "RANKSEAM_RERANK": "identity",
            "RANKSEAM_POOL": "12",
            "RANKSEAM_ON_ERROR": "coarse",
            "RANKSEAM_NAMESPACE": "ns",
        }
    )
    assert config.db == "/tmp/a.sqlite3" and config.namespace == "ns"
    assert config.search.reranker == "identity" and config.search.pool == 12
    assert config.search.on_error == "fail_open"
    # a setting made in code is not replaced; one the defaults (or a file) gave is
    in_code = Config.from_mapping({"search": {"reranker": "identity"}})
    assert in_code.set_in_code == {"search.reranker"}
    env = {"RANKSEAM_RERANK": "none", "RANKSEAM_POOL": "12"}
    assert in_code.with_env(env).search.reranker == "identity"
    assert in_code.with_env(env).search.pool == 12
    with pytest.raises(ConfigurationError, match="RANKSEAM_POOL must be an integer"):
        Config().with_env({"RANKSEAM_POOL": "many"})


def test_with_options_merges() -> None:
    config = Config.from_mapping({"rerankers": {"mmr": {"lambda": 0.5, "relevance": "coarse"}}})
    merged = config.with_options("reranker", "mmr", {"lambda": 0.9})
    assert merged.options("reranker", "mmr") == {"lambda": 0.9, "relevance": "coarse"}
    assert config.options("reranker", "mmr")["lambda"] == 0.5


def test_env_refs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "s3cret")
    assert resolve_env_refs({"$env": "MY_KEY"}, what="x") == "s3cret"
    assert resolve_env_refs({"$env": "UNSET_VAR_FOR_TEST"}, what="x") is None
    assert resolve_env_refs("plain", what="x") == "plain"
    with pytest.raises(ConfigurationError):
        resolve_env_refs({"$env": ""}, what="x")


def test_identity_refuses_options() -> None:
    with pytest.raises(ConfigurationError, match="takes no options"):
        ComponentContext(Config()).reranker("identity", {"x": 1})


def test_a_role_without_a_backend_name_is_a_configuration_error() -> None:
    from rankseam.decision import RERANK_ROLE

    with pytest.raises(ConfigurationError, match="needs a decision backend"):
        ComponentContext(Config()).decision_backend(None, RERANK_ROLE)


def test_value_checks_refuse_bools_and_non_finite_numbers() -> None:
    from rankseam.checks import is_int, is_real

    assert is_int(3) and not is_int(True) and not is_int(3.0) and not is_int("3")
    assert is_real(0.5) and is_real(2) and not is_real(False)
    assert not is_real(float("nan")) and not is_real(float("inf")) and not is_real("0.5")
