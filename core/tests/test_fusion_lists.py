"""Fusion gives the same coarse order, floats, channels and raw scores whatever form a
channel's list takes: a reader's arrays (``ScoredKeys``) or pairs, with or without a
repeated key, a prior that names keys no admitting channel listed, any method and cut."""

from __future__ import annotations

import random

import pytest

from rankseam.plugin.stores import ScoredKeys
from rankseam.search.fusion import ChannelList, Fused, ScoreSpec, fuse
from rankseam.types import MemoryRef


def _ref(key: int) -> MemoryRef:
    return MemoryRef("default", f"m{key:03d}", 1)


def _seen(out: list[Fused]) -> list[tuple[object, ...]]:
    # repr: the floats bit for bit, and the raw scores with their types
    return [(f.key, repr(f.score), f.matched_by, repr(dict(f.channel_scores))) for f in out]


def _lists(rng: random.Random, repeat: bool) -> list[tuple[str, bool, list[tuple[int, float]]]]:
    def listed(n: int) -> list[tuple[int, float]]:
        keys = rng.sample(range(1, 80), n)
        values = [rng.choice([rng.uniform(-1, 12), 0.0, 1.0, 0.5, -0.0]) for _ in keys]
        return list(zip(keys, values, strict=True))

    lexical, vector = listed(rng.randint(0, 30)), listed(rng.randint(0, 30))
    admitted = [k for k, _s in lexical + vector]
    # the prior: mostly admitted keys, sometimes others
    prior = [(k, rng.uniform(0, 1)) for k in dict.fromkeys(admitted) if rng.random() < 0.9]
    prior += [(k, rng.uniform(0, 1)) for k in rng.sample(range(100, 120), rng.randint(0, 3))]
    rng.shuffle(prior)
    lists = [("lexical", True, lexical), ("vector", True, vector), ("importance", False, prior)]
    if repeat and admitted:  # a channel names a key twice
        items = lists[rng.randrange(3)][2]
        items.append((rng.choice(admitted), rng.uniform(0, 1)))
    return lists


@pytest.mark.parametrize("seed", range(60))
def test_a_readers_arrays_fuse_as_the_per_key_path_does(seed: int) -> None:
    rng = random.Random(seed)
    specs = [ScoreSpec(s, w) for s in ("max", "unit", "minmax") for w in (0.0, 0.1, 1.0)]
    lists = _lists(rng, repeat=seed % 3 == 0)
    chosen = [rng.choice(specs) for _ in lists]
    typed = [
        ChannelList(n, a, ScoredKeys.of(items), spec)
        for (n, a, items), spec in zip(lists, chosen, strict=True)
    ]
    # the reference: the same pairs, with a prior that repeats a key no channel admitted
    # (which changes nothing, but sends every list down the per-key path)
    aside = ChannelList("aside", False, [(999, 1.0), (999, 2.0)], ScoreSpec("unit", 0.0))
    pairs = [
        *(
            ChannelList(n, a, items, spec)
            for (n, a, items), spec in zip(lists, chosen, strict=True)
        ),
        aside,
    ]
    for method in ("convex", "rrf"):
        for limit in (None, 1, 5, 30):
            options = {"method": method, "limit": limit}
            got = fuse(typed, _ref, **options)
            want = fuse(pairs, _ref, **options)
            # a reader's scores are float64: the pairs' raw scores compared as floats
            assert [(f.key, repr(f.score), f.matched_by) for f in got] == [
                (f.key, repr(f.score), f.matched_by) for f in want
            ]
            assert [{k: float(v) for k, v in f.channel_scores.items()} for f in got] == [
                {k: float(v) for k, v in f.channel_scores.items()} for f in want
            ]


def test_a_repeated_admitted_key_takes_the_per_key_path_from_arrays_too() -> None:
    # the first score is the raw score, the last the normalised one (the per-key path's rule)
    lexical = [(1, 4.0), (2, 2.0), (1, 1.0)]
    pairs = fuse([ChannelList("lexical", True, lexical, ScoreSpec("max", 1.0))], _ref)
    typed = fuse(
        [ChannelList("lexical", True, ScoredKeys.of(lexical), ScoreSpec("max", 1.0))], _ref
    )
    assert _seen(typed) == _seen(pairs)
    assert [(f.key, f.score, dict(f.channel_scores)) for f in typed] == [
        (2, 0.5, {"lexical": 2.0}),
        (1, 0.25, {"lexical": 4.0}),
    ]


def test_raw_scores_of_pairs_keep_their_type() -> None:
    out = fuse(
        [
            ChannelList("lexical", True, [(1, 3), (2, 1)], ScoreSpec("max", 1.0)),
            ChannelList("importance", False, [(2, 1), (9, 1)], ScoreSpec("unit", 0.1)),
        ],
        _ref,
    )
    assert _seen(out) == [
        (1, repr(1 / 1.1), ("lexical",), repr({"lexical": 3})),
        (2, repr((1 / 3 + 0.1) / 1.1), ("lexical",), repr({"lexical": 1, "importance": 1})),
    ]


def test_many_admitting_channels_fuse_as_the_per_key_path_does() -> None:
    rng = random.Random(7)
    channels = [
        ChannelList(
            f"c{i}",
            True,
            ScoredKeys.of([(k, rng.uniform(0, 5)) for k in rng.sample(range(1, 200), 5)]),
            ScoreSpec("max", 1.0),
        )
        for i in range(70)
    ]
    # a prior that repeats a key no channel admitted: the per-key path, the same result
    prior = ChannelList("importance", False, [(500, 0.1), (500, 0.2)], ScoreSpec("unit", 0.0))
    for limit in (None, 30):
        got = fuse(channels, _ref, limit=limit)
        want = fuse([*channels, prior], _ref, limit=limit)
        assert _seen(got) == _seen(want)
        assert got[0].matched_by and all(len(f.matched_by) >= 1 for f in got)
