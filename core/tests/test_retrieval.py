"""Lexical query building, fusion and the default embedder."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rankseam
from rankseam.default_plugins.hashed_embedder import HashedEmbedder
from rankseam.errors import ConfigurationError
from rankseam.retrieval.base import over_fetch
from rankseam.retrieval.fusion import ChannelList, competition_ranks, fuse
from rankseam.retrieval.lexical import match_expression, query_terms
from rankseam.testing.embedder import EmbedderContract
from rankseam.types import MemoryRef


def test_question_becomes_or_joined_quoted_terms():
    assert match_expression("When did Caroline go to the LGBTQ support group?") == (
        '"caroline" OR "go" OR "lgbtq" OR "support" OR "group"'
    )
    assert query_terms("what is it?") == ["what", "is", "it"]  # all stop words: keep them
    assert match_expression("?!* ()") is None


@pytest.fixture(scope="module")
def fts():
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE f USING fts5(t, tokenize='porter unicode61')")
    con.executemany("INSERT INTO f(t) VALUES (?)", [("near the river",), ("a b c",)])
    return con


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_any_text_yields_a_valid_fts_expression(fts, text):
    expr = match_expression(text)
    if expr is not None:
        fts.execute("SELECT rowid FROM f WHERE f MATCH ?", (expr,)).fetchall()


@pytest.mark.parametrize(
    "text",
    [
        "NEAR(a b)",
        'a" OR "b',
        "t:river",
        "-river",
        "river*",
        "((river",
        "^river",
        "AND",
        "river NOT near",
    ],
)
def test_fts_syntax_is_plain_text(fts, text):
    expr = match_expression(text)
    assert expr is not None
    fts.execute("SELECT rowid FROM f WHERE f MATCH ?", (expr,)).fetchall()


def _ref(i):
    return MemoryRef("ns", f"m{i}", 1)


def test_rrf_sums_reciprocal_ranks_and_breaks_ties_by_identity():
    lexical = ChannelList("lexical", True, [(1, 9.0), (2, 5.0)])
    vector = ChannelList("vector", True, [(2, 0.9), (1, 0.8), (3, 0.1)])
    prior = ChannelList("importance", False, [(3, 1.0), (1, 0.5), (2, 0.5), (99, 1.0)])
    out = fuse([lexical, vector, prior], _ref)
    assert [f.key for f in out] == [1, 2, 3]  # 99 was never admitted
    assert out[0].score == pytest.approx(1 / 61 + 1 / 62 + 1 / 62)
    assert out[1].score == pytest.approx(1 / 62 + 1 / 61 + 1 / 62)
    assert out[0].matched_by == ("lexical", "vector")
    assert out[2].matched_by == ("vector",)
    assert out[2].channel_scores == {"vector": 0.1, "importance": 1.0}
    tied = fuse([ChannelList("lexical", True, [(5, 1.0), (3, 1.0), (4, 1.0)])], _ref)
    assert [f.key for f in tied] == [3, 4, 5]
    assert len(fuse([lexical, vector], _ref, limit=2)) == 2


def test_competition_ranks_share_ties():
    assert competition_ranks([(1, 0.5), (2, 0.5), (3, 0.1)]) == {1: 1, 2: 1, 3: 3}


def test_weighted_fusion():
    lexical = ChannelList("lexical", True, [(1, 10.0), (2, 5.0)])
    vector = ChannelList("vector", True, [(2, 0.9), (1, -0.2)])
    out = fuse([lexical, vector], _ref, method="weighted", weights={"lexical": 1.0, "vector": 1.0})
    assert {f.key: round(f.score, 6) for f in out} == {1: 1.0, 2: 1.4}
    assert [f.key for f in out] == [2, 1]


def test_over_fetch():
    assert over_fetch(1) == 32 and over_fetch(30) == 120


def test_hashed_embedder_options():
    assert HashedEmbedder.from_options({"dimensions": 64}).descriptor.dimensions == 64
    with pytest.raises(ConfigurationError, match="dimensions"):
        HashedEmbedder.from_options({"dimensions": 8})
    with pytest.raises(ConfigurationError, match="char_ngrams"):
        HashedEmbedder.from_options({"char_ngrams": [5, 3]})
    with pytest.raises(ConfigurationError, match="has no option"):
        HashedEmbedder.from_options({"model": "x"})
    a = HashedEmbedder.from_options({}).descriptor.key
    b = HashedEmbedder.from_options({"char_weight": 0.3}).descriptor.key
    assert a != b  # every option is part of the space


def test_embedders_are_registered():
    with rankseam.open_memory(":memory:") as m:
        assert "hashed" in m.context.available("embedder")
        assert {"lexical", "vector", "importance"} <= set(m.context.available("candidate_source"))


class TestHashedEmbedderContract(EmbedderContract):
    def make_embedder(self):
        return HashedEmbedder()


class TestSmallHashedEmbedderContract(EmbedderContract):
    def make_embedder(self):
        return HashedEmbedder.from_options({"dimensions": 32, "char_ngrams": [2, 3]})
