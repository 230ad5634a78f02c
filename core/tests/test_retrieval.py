"""Lexical query building, fusion and the default embedder."""

from __future__ import annotations

import random
import sqlite3

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rankseam
from rankseam.default_plugins.hashed_embedder import HashedEmbedder
from rankseam.embedding import DEFAULT_FUSION_SCALE, DEFAULT_FUSION_WEIGHT, EmbedderDescriptor
from rankseam.errors import ConfigurationError
from rankseam.plugin.stores import LexicalQuery, ScoredKeys
from rankseam.search.channels.base import over_fetch
from rankseam.search.channels.importance import ImportanceSource
from rankseam.search.channels.lexical import LexicalSource, query_terms
from rankseam.search.channels.vector import VectorSource
from rankseam.search.fusion import ChannelList, ScoreSpec, competition_ranks, fuse, score_spec_of
from rankseam.sqlite.reader import or_joined
from rankseam.testing.embedder import EmbedderContract
from rankseam.types import MemoryRef


def match_expression(query: str) -> str | None:
    """The SQLite store's FTS5 query text for the lexical channel's terms of ``query``."""
    return or_joined(query_terms(query)) or None


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
    out = fuse([lexical, vector, prior], _ref, method="rrf")
    assert [f.key for f in out] == [1, 2, 3]  # 99 was never admitted
    assert out[0].score == pytest.approx(1 / 61 + 1 / 62 + 1 / 62)
    assert out[1].score == pytest.approx(1 / 62 + 1 / 61 + 1 / 62)
    assert out[0].matched_by == ("lexical", "vector")
    assert out[2].matched_by == ("vector",)
    assert out[2].channel_scores == {"vector": 0.1, "importance": 1.0}
    tied = fuse([ChannelList("lexical", True, [(5, 1.0), (3, 1.0), (4, 1.0)])], _ref, method="rrf")
    assert [f.key for f in tied] == [3, 4, 5]
    assert len(fuse([lexical, vector], _ref, method="rrf", limit=2)) == 2
    # configured weights scale a channel's reciprocal ranks; declared ones do not count
    heavy = ChannelList("vector", True, [(2, 0.9)], ScoreSpec("unit", 9.0))
    out = fuse([lexical, heavy], _ref, method="rrf", weights={"lexical": 2.0})
    assert {f.key: f.score for f in out} == pytest.approx({1: 2 / 61, 2: 2 / 62 + 1 / 61})


def test_competition_ranks_share_ties():
    assert competition_ranks([(1, 0.5), (2, 0.5), (3, 0.1)]) == {1: 1, 2: 1, 3: 3}


LEX = ScoreSpec("max", 1.0)
VEC = ScoreSpec("unit", 0.5)


def _scores(out):
    return {f.key: f.score for f in out}


def test_convex_one_channel_only_is_that_channel_scaled_by_its_best():
    out = fuse([ChannelList("lexical", True, [(1, 8.0), (2, 4.0), (3, 2.0)], LEX)], _ref)
    assert [f.key for f in out] == [1, 2, 3]
    assert _scores(out) == {1: 1.0, 2: 0.5, 3: 0.25}


def test_convex_is_the_weighted_mean_of_normalised_scores():
    lexical = ChannelList("lexical", True, [(1, 10.0), (2, 5.0)], LEX)
    vector = ChannelList("vector", True, [(2, 0.8), (3, 0.6), (4, -0.3)], VEC)
    out = fuse([lexical, vector], _ref)
    # total weight 1.5; 1: 1/1.5; 2: (0.5 + 0.5 * 0.8)/1.5; 3: 0.5 * 0.6/1.5; 4: cosine < 0 -> 0
    assert [f.key for f in out] == [1, 2, 3, 4]
    assert _scores(out) == pytest.approx({1: 2 / 3, 2: 0.6, 3: 0.2, 4: 0.0})
    assert out[1].matched_by == ("lexical", "vector")
    assert out[1].channel_scores == {"lexical": 5.0, "vector": 0.8}
    # a configured weight replaces the declared one: vector at 1.5 now puts memory 2 first
    out = fuse([lexical, vector], _ref, weights={"vector": 1.5})
    assert _scores(out) == pytest.approx({1: 0.4, 2: (0.5 + 1.2) / 2.5, 3: 0.36, 4: 0.0})
    assert [f.key for f in out] == [2, 1, 3, 4]


def test_convex_ties_break_by_identity_bytes():
    # 5: 1.0 / 1.5; 6: (0.5 + 0.5 * 1.0) / 1.5: the same float, so identity decides
    lexical = ChannelList("lexical", True, [(6, 1.0), (5, 2.0)], LEX)
    vector = ChannelList("vector", True, [(6, 1.0)], VEC)
    out = fuse([lexical, vector], _ref)
    assert out[0].score == out[1].score == pytest.approx(2 / 3)
    assert [f.key for f in out] == [5, 6]  # "m5" sorts before "m6"
    out = fuse([ChannelList("lexical", True, [(9, 1.0), (7, 1.0), (8, 1.0)], LEX)], _ref)
    assert [f.key for f in out] == [7, 8, 9] and _scores(out) == {7: 1.0, 8: 1.0, 9: 1.0}


def test_convex_channel_with_no_hits_keeps_the_order_and_its_share_of_the_weight():
    lexical = ChannelList("lexical", True, [(1, 4.0), (2, 2.0)], LEX)
    empty = ChannelList("vector", True, [], VEC)
    out = fuse([lexical, empty], _ref)
    assert [f.key for f in out] == [1, 2]
    assert _scores(out) == pytest.approx({1: 1 / 1.5, 2: 0.5 / 1.5})
    assert out[0].matched_by == ("lexical",)
    assert fuse([empty], _ref) == []
    # every channel empty, or a query no admitting channel answered: nothing, not an error
    assert fuse([empty, ChannelList("importance", False, [(1, 1.0)], VEC)], _ref) == []


def test_convex_channel_with_all_equal_scores_adds_the_same_to_everyone():
    lexical = ChannelList("lexical", True, [(1, 3.0), (2, 1.0), (3, 2.0)], LEX)
    flat = ChannelList("importance", False, [(1, 0.5), (2, 0.5), (3, 0.5)], ScoreSpec("unit", 0.1))
    out = fuse([lexical, flat], _ref)
    assert [f.key for f in out] == [1, 3, 2]
    assert _scores(out) == pytest.approx(
        {1: 1.05 / 1.1, 3: (2 / 3 + 0.05) / 1.1, 2: (1 / 3 + 0.05) / 1.1}
    )
    # min-max of a list whose scores are all equal is 1 for each; max-scaled zeros are 0
    equal = ChannelList("other", True, [(1, 7.0), (2, 7.0)], ScoreSpec("minmax", 1.0))
    assert _scores(fuse([equal], _ref)) == {1: 1.0, 2: 1.0}
    zero = ChannelList("lexical", True, [(1, 0.0), (2, 0.0)], LEX)
    assert _scores(fuse([zero], _ref)) == {1: 0.0, 2: 0.0}


def test_convex_minmax_scale_and_zero_weights():
    other = ChannelList("other", True, [(1, -2.0), (2, 0.0), (3, 6.0)], ScoreSpec("minmax", 2.0))
    assert _scores(fuse([other], _ref)) == {3: 1.0, 2: 0.25, 1: 0.0}
    lexical = ChannelList("lexical", True, [(1, 4.0)], LEX)
    # all weights zero: every score is 0 and identity orders
    out = fuse([lexical, other], _ref, weights={"lexical": 0, "other": 0})
    assert [f.key for f in out] == [1, 2, 3] and set(_scores(out).values()) == {0.0}


def test_unknown_fusion_method_is_refused():
    with pytest.raises(ValueError, match="unknown fusion 'weighted'"):
        fuse([], _ref, method="weighted")


def test_sources_declare_their_scores():
    undeclared = object()
    assert score_spec_of(undeclared, None) == ScoreSpec("minmax", 1.0)
    assert score_spec_of(LexicalSource(), None) == ScoreSpec("max", 1.0)
    assert score_spec_of(ImportanceSource(), None) == ScoreSpec("unit", 0.1)
    weak = EmbedderDescriptor("e", 4, fusion_weight=0.25)
    assert score_spec_of(VectorSource(), weak) == ScoreSpec("unit", 0.25)
    silent = EmbedderDescriptor("e", 4)
    assert score_spec_of(VectorSource(), silent) == ScoreSpec("unit", DEFAULT_FUSION_WEIGHT)
    assert weak == silent and weak.key == silent.key  # the weight is not part of the space
    assert "fusion_weight" not in weak.to_dict()

    class Wrong:
        def score_spec(self, embedder):
            return {"scale": "max"}

    with pytest.raises(TypeError, match="must return a rankseam ScoreSpec"):
        score_spec_of(Wrong(), None)
    with pytest.raises(ValueError, match="scale"):
        ScoreSpec("log", 1.0)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="weight must be a finite number >= 0"):
            ScoreSpec("max", bad)
        with pytest.raises(ValueError, match="fusion_weight must be a finite number >= 0"):
            EmbedderDescriptor("e", 4, fusion_weight=bad)


def test_embedder_declares_its_channel_scale():
    assert DEFAULT_FUSION_SCALE == "unit"
    semantic = EmbedderDescriptor("e", 4, fusion_weight=0.7, fusion_scale="minmax")
    assert score_spec_of(VectorSource(), semantic) == ScoreSpec("minmax", 0.7)
    assert score_spec_of(VectorSource(), EmbedderDescriptor("e", 4, fusion_scale="max")) == (
        ScoreSpec("max", DEFAULT_FUSION_WEIGHT)
    )
    # like the weight, the scale says how to use the space, not what it is
    assert semantic == EmbedderDescriptor("e", 4) and "fusion_scale" not in semantic.to_dict()
    with pytest.raises(ValueError, match="fusion_scale"):
        EmbedderDescriptor("e", 4, fusion_scale="log")


def test_convex_minmax_vector_channel_by_hand():
    # a semantic channel's cosines crowd into a band: 0.62, 0.5, 0.3 min-max scale to 1, 0.625, 0
    lexical = ChannelList("lexical", True, [(1, 6.0), (2, 3.0)], LEX)
    vector = ChannelList("vector", True, [(2, 0.62), (3, 0.5), (1, 0.3)], ScoreSpec("minmax", 0.7))
    out = fuse([lexical, vector], _ref)
    # total 1.7; 1: (1 + 0)/1.7; 2: (0.5 + 0.7)/1.7; 3: 0.7 * 0.625/1.7
    assert _scores(out) == pytest.approx({1: 1 / 1.7, 2: 1.2 / 1.7, 3: 0.4375 / 1.7})
    assert [f.key for f in out] == [2, 1, 3]
    # the same cosines used as they are (unit) leave the lexical order
    unit = ChannelList("vector", True, vector.items, ScoreSpec("unit", 0.7))
    assert [f.key for f in fuse([lexical, unit], _ref)] == [1, 2, 3]


def test_over_fetch():
    assert over_fetch(1) == 32 and over_fetch(30) == 120


def test_hashed_embedder_options():
    assert HashedEmbedder.from_options({"dimensions": 64}).descriptor.dimensions == 64
    with pytest.raises(ConfigurationError, match="dimensions"):
        HashedEmbedder.from_options({"dimensions": 8})
    with pytest.raises(ConfigurationError, match="char_ngrams"):
        HashedEmbedder.from_options({"char_ngrams": [5, 3]})
    with pytest.raises(ConfigurationError, match=r"\[embedders.hashed\] model is not an option"):
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


def test_configuration_knows_the_same_fusion_methods():
    from rankseam.compose import FUSION_METHODS as CONFIGURABLE
    from rankseam.search.fusion import DEFAULT_FUSION, FUSION_METHODS

    assert CONFIGURABLE == FUSION_METHODS
    assert rankseam.compose.SearchConfig().fusion == DEFAULT_FUSION


@pytest.mark.parametrize("seed", range(40))
def test_fusion_gives_the_same_floats_for_any_list(seed):
    # Lists with distinct keys and finite scores are fused over arrays, others key by key:
    # a list that repeats a key the admitting channels never listed changes nothing, but
    # takes the per-key path, so both must give the same keys, floats and channels.
    rng = random.Random(seed)
    pool = range(1, 60)

    def scores(n, tie):
        values = [rng.choice([rng.uniform(-1, 12), 0.0, 1.0, 0.5]) for _ in range(n)]
        return [values[0] if tie and rng.random() < 0.3 else v for v in values]

    def listed(n, tie=True):
        keys = rng.sample(pool, n)
        return list(zip(keys, scores(n, tie), strict=True))

    specs = [ScoreSpec(s, w) for s in ("max", "unit", "minmax") for w in (0.0, 0.1, 1.0, 2.5)]
    channels = [
        ChannelList("lexical", True, listed(rng.randint(0, 30)), rng.choice(specs)),
        ChannelList("vector", True, listed(rng.randint(0, 30)), rng.choice(specs)),
        ChannelList("importance", False, listed(rng.randint(0, 50)), rng.choice(specs)),
    ]
    repeated = [
        *channels[:2],
        attrs.evolve(channels[2], items=[*channels[2].items, (99, 1.0), (99, 2.0)]),
    ]
    for method in ("convex", "rrf"):
        for limit in (None, 5, 30):
            options = {"method": method, "limit": limit}
            if rng.random() < 0.5:
                options["weights"] = {"vector": rng.choice([0.0, 0.7, 3.0])}
                options["scales"] = {"lexical": rng.choice(["max", "unit", "minmax"])}
            arrays = fuse(channels, _ref, **options)
            per_key = fuse(repeated, _ref, **options)
            assert [(f.key, f.score, f.matched_by, dict(f.channel_scores)) for f in arrays] == [
                (f.key, f.score, f.matched_by, dict(f.channel_scores)) for f in per_key
            ]
            # a reader's ScoredKeys (fused from its arrays) give what its pairs give
            typed = [attrs.evolve(ch, items=ScoredKeys.of(ch.items)) for ch in channels]
            assert all(isinstance(ch.items, ScoredKeys) for ch in typed)
            assert fuse(typed, _ref, **options) == arrays


def test_scored_keys_are_typed_arrays_that_read_as_pairs():
    pairs = [(7, 2.5), (3, 1.0), (9, 1.0)]
    answer = ScoredKeys.of(pairs)
    assert answer.row_keys.dtype == np.int64 and answer.scores.dtype == np.float64
    assert len(answer) == 3 and list(answer) == pairs and answer == pairs
    assert answer[0] == (7, 2.5) and answer[1:] == ScoredKeys([3, 9], [1.0, 1.0])
    assert dict(answer) == dict(pairs)  # no ``keys`` attribute for dict() to mistake
    assert ScoredKeys.empty() == [] and len(ScoredKeys.of([])) == 0
    with pytest.raises(ValueError, match="one score per key"):
        ScoredKeys([1, 2], [0.5])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_scored_keys_with_a_non_finite_score_take_the_per_key_path(bad):
    # the same result as the pairs they hold: fusion's per-key checks still see every score
    lexical = [(1, 3.0), (2, bad), (3, 1.0)]
    vector = [(2, 0.9), (3, 0.5)]
    for method in ("convex", "rrf"):
        pairs = fuse(
            [ChannelList("lexical", True, lexical), ChannelList("vector", True, vector)],
            _ref,
            method=method,
        )
        typed = fuse(
            [
                ChannelList("lexical", True, ScoredKeys.of(lexical)),
                ChannelList("vector", True, ScoredKeys.of(vector)),
            ],
            _ref,
            method=method,
        )
        assert repr(typed) == repr(pairs)  # (NaN != NaN: compared as text)


def test_readers_answer_scored_keys(tmp_path):
    memory = rankseam.open_memory(tmp_path / "m.db")
    try:
        memory.add("the ferry leaves the island at noon", memory_id="a", importance=0.9)
        memory.add("a ferry timetable", memory_id="b", importance=0.2)
        descriptor = memory.embedder.descriptor
        qvec = memory.embedder.embed(["ferry"])[0]
        with memory.store.read() as reader:
            lexical = reader.lexical(LexicalQuery("default", 10, ["ferry"]))
            vector = reader.vector("default", descriptor, qvec, 10)
            top = reader.top_importance("default", 10)
        for answer in (lexical, vector, top):
            assert isinstance(answer, ScoredKeys) and len(answer) == 2
        assert top.scores.tolist() == [0.9, 0.2]
    finally:
        memory.close()
