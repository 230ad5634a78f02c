"""Which switch wins (docs/configuration.md, "Which switch wins"): a setting made in code — an
argument, a keyword override, a mapping or a Config passed in code, a per-call argument, a
command-line flag — wins over the environment, which wins over a configuration file, which
wins over the defaults. Every path is driven through the public API with the environment set."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import rankseam
from rankseam import RerankDecision, RerankError, RerankStatus
from rankseam.cli import cli
from rankseam.config import Config, SearchConfig

IDENTITY = "rankseam.rerank.identity.v1"
ENV_VARS = (
    "RANKSEAM_DB",
    "RANKSEAM_NAMESPACE",
    "RANKSEAM_EMBEDDER",
    "RANKSEAM_RERANK",
    "RANKSEAM_POOL",
    "RANKSEAM_ON_ERROR",
    "RANKSEAM_CONFIG",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


class Reverse:
    policy_id = "test.reverse.v1"

    def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        return RerankDecision(tuple(c.rank for c in reversed(candidates))[:limit])


class Broken:
    policy_id = "test.broken.v1"

    def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        raise RuntimeError("the reranker is down")


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rankseam.toml"
    path.write_text(text)
    return path


def _policy(memory: rankseam.Memory, **kwargs: Any) -> str | None:
    memory.add("Ada rides her bicycle to work")
    memory.add("Ada drinks green tea")
    rerank = memory.search("Ada", 5, **kwargs).trace.rerank
    return None if rerank is None else rerank.policy_id


# -- the reranker: RANKSEAM_RERANK=none does not switch off one composed in code ---------------


CODE_PATHS = {
    "config mapping": {"config": {"search": {"reranker": "identity"}}},
    "Config.from_mapping": {"config": Config.from_mapping({"search": {"reranker": "identity"}})},
    "Config object": {"config": Config(search=SearchConfig(reranker="identity"))},
    "keyword name": {"reranker": "identity"},
}


@pytest.mark.parametrize("kwargs", CODE_PATHS.values(), ids=CODE_PATHS.keys())
def test_the_environment_does_not_switch_off_a_reranker_composed_in_code(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    kwargs: dict[str, Any],
) -> None:
    monkeypatch.setenv("RANKSEAM_RERANK", "none")
    with caplog.at_level(logging.DEBUG, logger="rankseam"):
        memory = rankseam.open_memory(tmp_path / "m.sqlite3", **kwargs)
    with memory:
        assert memory.config.search.reranker == "identity"
        assert _policy(memory) == IDENTITY
        assert memory.search("Ada", 5).trace.notes == ()  # nothing was replaced
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_reranker_object_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKSEAM_RERANK", "none")
    with rankseam.open_memory(tmp_path / "m.sqlite3", reranker=Reverse()) as memory:
        assert _policy(memory) == "test.reverse.v1"


def test_the_environment_replaces_a_file_reranker_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RANKSEAM_RERANK", "none")
    toml = _toml(tmp_path, '[search]\nreranker = "identity"\n')
    with caplog.at_level(logging.WARNING, logger="rankseam"):
        memory = rankseam.open_memory(tmp_path / "m.sqlite3", config_file=toml)
    with memory:
        assert _policy(memory) is None
        [note] = memory.search("Ada", 5).trace.notes
        assert "RANKSEAM_RERANK" in note and "configuration file" in note
        # ... and the code's per-call choice wins over both
        assert _policy(memory, reranker="identity") == IDENTITY
    [warned] = [r for r in caplog.records if "RANKSEAM_RERANK" in r.getMessage()]
    assert warned.levelno == logging.WARNING


def test_the_environment_fills_what_code_left_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKSEAM_RERANK", "identity")
    monkeypatch.setenv("RANKSEAM_POOL", "7")
    monkeypatch.setenv("RANKSEAM_ON_ERROR", "coarse")
    monkeypatch.setenv("RANKSEAM_NAMESPACE", "env-ns")
    config = {"namespace": "code-ns", "search": {"pool": 50}}
    with rankseam.open_memory(tmp_path / "m.sqlite3", config=config) as memory:
        assert memory.config.namespace == "code-ns"  # set in code
        assert memory.config.search.pool == 50  # set in code
        assert memory.config.search.reranker == "identity"  # not set in code: the environment
        assert memory.config.search.on_error == "fail_open"
        assert _policy(memory) == IDENTITY
    with rankseam.open_memory(tmp_path / "d.sqlite3") as memory:  # the defaults: all from env
        assert (memory.config.namespace, memory.config.search.pool) == ("env-ns", 7)
    with rankseam.open_memory(tmp_path / "k.sqlite3", pool=9, namespace="kw") as memory:
        assert (memory.config.namespace, memory.config.search.pool) == ("kw", 9)


def test_the_environment_wins_over_a_file_and_code_over_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = _toml(tmp_path, 'namespace = "file-ns"\n[search]\npool = 12\non_error = "coarse"\n')
    monkeypatch.setenv("RANKSEAM_POOL", "7")
    with rankseam.open_memory(tmp_path / "m.sqlite3", config_file=toml) as memory:
        assert memory.config.search.pool == 7  # environment > file
        assert memory.config.namespace == "file-ns"  # the file > the default
        assert memory.config.search.on_error == "fail_open"
    with rankseam.open_memory(tmp_path / "m.sqlite3", config_file=toml, pool=3) as memory:
        assert memory.config.search.pool == 3  # keyword (code) > environment > file
        memory.add("Ada drinks green tea")
        assert memory.search("Ada", 1).trace.pool_size == 3
        assert memory.search("Ada", 1, pool=2).trace.pool_size == 2  # per call > all


def test_the_store_location_follows_the_same_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_db, file_db, code_db = (str(tmp_path / f"{n}.sqlite3") for n in ("env", "file", "code"))
    toml = _toml(tmp_path, f"db = {json.dumps(file_db)}\n")
    with rankseam.open_memory(config_file=toml) as memory:
        assert memory.path == file_db  # the file > the default
    monkeypatch.setenv("RANKSEAM_DB", env_db)
    with rankseam.open_memory(config_file=toml) as memory:
        assert memory.path == env_db  # environment > file
    with rankseam.open_memory(config={"db": code_db}) as memory:
        assert memory.path == code_db  # code > environment
    with rankseam.open_memory(tmp_path / "arg.sqlite3", config={"db": code_db}) as memory:
        assert memory.path == str(tmp_path / "arg.sqlite3")  # the target argument > all


# -- open_reranker -----------------------------------------------------------------------------


def test_open_reranker_keeps_the_failure_policy_set_in_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKSEAM_ON_ERROR", "raise")
    texts = ["Ada rides her bicycle", "Ada drinks tea"]
    for config in (
        {"search": {"on_error": "coarse"}},
        Config.from_mapping({"search": {"on_error": "coarse"}}),
        Config(search=SearchConfig(on_error="coarse")),
    ):
        result = rankseam.open_reranker(Broken(), config=config).rerank("Ada", texts, 2)
        assert result.status is RerankStatus.DEGRADED  # code's "coarse", not the env's "raise"
    toml = _toml(tmp_path, '[search]\non_error = "coarse"\n')
    with pytest.raises(RerankError):  # environment > file
        rankseam.open_reranker(Broken(), config_file=toml).rerank("Ada", texts, 2)
    monkeypatch.setenv("RANKSEAM_ON_ERROR", "coarse")
    with pytest.raises(RerankError):  # the argument > the environment
        rankseam.open_reranker(Broken(), on_error="raise").rerank("Ada", texts, 2)
    degraded = rankseam.open_reranker(Broken()).rerank("Ada", texts, 2)  # default: the env
    assert degraded.status is RerankStatus.DEGRADED


# -- the command line --------------------------------------------------------------------------


def _search(*args: str) -> dict[str, Any]:
    out = CliRunner().invoke(
        cli, ["search", *args, "--limit", "1", "--json", "--trace"], catch_exceptions=False
    )
    assert out.exit_code == 0, out.output
    return json.loads(out.output)  # type: ignore[no-any-return]


def test_command_line_flags_win_over_the_environment_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "cli.sqlite3")
    with rankseam.open_memory(db) as memory:
        memory.add("Ada drinks green tea")
        memory.add("Ada rides her bicycle")
    toml = _toml(tmp_path, '[search]\nreranker = "identity"\npool = 12\n')
    monkeypatch.setenv("RANKSEAM_CONFIG", str(toml))
    found = _search("Ada", "--db", db)
    assert found["trace"]["rerank"]["policy_id"] == IDENTITY  # the file
    assert found["trace"]["pool_size"] == 12
    monkeypatch.setenv("RANKSEAM_RERANK", "none")
    monkeypatch.setenv("RANKSEAM_POOL", "5")
    found = _search("Ada", "--db", db)
    assert found["trace"]["rerank"] is None  # environment > file
    assert found["trace"]["pool_size"] == 5
    found = _search("Ada", "--db", db, "--rerank", "identity", "--pool", "3")
    assert found["trace"]["rerank"]["policy_id"] == IDENTITY  # flag > environment
    assert found["trace"]["pool_size"] == 3
