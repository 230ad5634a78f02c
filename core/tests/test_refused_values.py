"""Values that used to be accepted and then did something else than asked (issue #39 case 7):
each is refused with an error naming the key, the variable or the argument
(docs/configuration.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import rankseam
from rankseam.config import Config
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.search.channels.vector import VectorSource
from rankseam.sqlite.ann import setting_from_env

#: Written the way no integer setting means: Python's int() reads each of them as a number.
NOT_DECIMAL = ["1_0", "٥", "١٢", "１２", "3_0"]


@pytest.fixture
def clean_env(monkeypatch):
    for var in ("RANKSEAM_DB", "RANKSEAM_RERANK", "RANKSEAM_NAMESPACE", "RANKSEAM_POOL"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("value", [7, 1.01, -1.5, -7])
def test_a_vector_min_score_no_cosine_can_reach_is_refused(tmp_path: Path, clean_env, value):
    """A cosine is in [-1, 1]: ``min_score = 7`` dropped every candidate (the channel silently
    off); the file's value is refused when the channel is built, naming the key."""
    config = {"sources": {"vector": {"min_score": value}}}
    with pytest.raises(
        ConfigurationError, match=r"\[sources.vector\] min_score must be a number in \[-1, 1\]"
    ):
        rankseam.open_memory(tmp_path / "m.sqlite3", config=config).search("heron")


@pytest.mark.parametrize("value", [-1, -0.2, 0, 0.35, 1])
def test_a_vector_min_score_in_the_cosine_range_still_cuts(value):
    assert VectorSource.from_options({"min_score": value}).min_score == value


def test_a_vector_min_score_cuts_the_channel_not_the_search(tmp_path: Path, clean_env):
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        memory.add("the grey heron waits in the reeds", memory_id="heron")
        memory.add("a note about taxes", memory_id="taxes")
    config = {"sources": {"vector": {"min_score": 0.99}}}
    with rankseam.open_memory(tmp_path / "m.sqlite3", config=config) as memory:
        hits = memory.search("grey heron", 5).hits
        assert [h.ref.memory_id for h in hits] == ["heron"]
        assert all("vector" not in h.matched_by for h in hits)


@pytest.mark.parametrize("value", [*NOT_DECIMAL, "1e1", "0x10", "0", "201", "-3", "ten"])
def test_rankseam_pool_takes_only_an_ascii_decimal_integer_in_bounds(value):
    with pytest.raises(ConfigurationError, match=r"^RANKSEAM_POOL must be an integer in 1\.\.200"):
        Config().with_env({"RANKSEAM_POOL": value})


@pytest.mark.parametrize(("value", "pool"), [("10", 10), (" 12 ", 12), ("+7", 7), ("200", 200)])
def test_rankseam_pool_reads_decimal_digits(value, pool):
    assert Config().with_env({"RANKSEAM_POOL": value}).search.pool == pool


@pytest.mark.parametrize("value", NOT_DECIMAL)
def test_rankseam_ann_takes_only_an_ascii_decimal_integer(value):
    with pytest.raises(ConfigurationError, match=r"^RANKSEAM_ANN="):
        setting_from_env({"RANKSEAM_ANN": value})
    assert setting_from_env({"RANKSEAM_ANN": "1000"}) == 1000


def test_rankseam_pool_through_open_memory_names_the_variable(tmp_path, clean_env, monkeypatch):
    monkeypatch.setenv("RANKSEAM_POOL", "1_0")
    with pytest.raises(ConfigurationError, match="RANKSEAM_POOL"):
        rankseam.open_memory(tmp_path / "m.sqlite3").search("heron")


@pytest.mark.parametrize(
    ("options", "got"),
    [("x", "a str"), (["lambda"], "a list"), (3, "a int"), ({1: 0.3}, "a key of type int")],
)
@pytest.mark.parametrize("reranker", ["mmr", None, "identity"])
def test_search_refuses_reranker_options_that_are_not_a_table(
    tmp_path: Path, clean_env, options, got, reranker
):
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        memory.add("the grey heron waits in the reeds")
        kwargs = {} if reranker is None else {"reranker": reranker}
        with pytest.raises(ValidationError, match=r"^reranker_options must be a mapping") as info:
            memory.search("heron", 3, reranker_options=options, **kwargs)
        assert got in str(info.value)


def test_asearch_refuses_them_too(tmp_path: Path, clean_env):
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        memory.add("the grey heron waits in the reeds")
        search = memory.asearch("heron", 3, reranker="identity", reranker_options="x")
        with pytest.raises(ValidationError, match=r"^reranker_options must be a mapping"):
            asyncio.run(search)
