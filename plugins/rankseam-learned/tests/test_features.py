"""The feature set: its columns, what they measure, and that every path computes the same rows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rankseam.plugin.rerankers import make_candidates
from rankseam.types import Hit, MemoryRef
from rankseam_learned.features import (
    FEATURE_SET,
    FEATURES,
    PAIR_FEATURES,
    PAIR_INDEX,
    compute,
    compute_pairs,
)

QUERY = "When did Melanie paint a sunrise in 2022?"
TEXTS = [
    "Melanie painted a sunrise over the lake in 2022.",
    "Melanie painted a sunrise over the lake in 2022!",
    "Caroline went to a support group on Tuesday.",
    "A sunrise is lovely. " * 100,  # a long text, cut at the seam's max_chars
    "paint sunrise",
]


def hits(texts: list[str] = TEXTS) -> list[Hit]:
    return [
        Hit(
            ref=MemoryRef("t", f"m{i}", 1),
            text=text,
            score=1.0 - i / 10,
            matched_by=("lexical",) if i % 2 == 0 else ("lexical", "vector"),
            channel_scores={"lexical": 5.0 - i, **({"vector": 0.5} if i % 2 else {})},
        )
        for i, text in enumerate(texts)
    ]


def column(rows: np.ndarray, name: str) -> np.ndarray:
    return rows[:, FEATURES.index(name)]


def test_the_feature_set_is_named_and_versioned() -> None:
    assert re.fullmatch(r"[a-z]+-v\d+", FEATURE_SET)
    assert len(set(FEATURES)) == len(FEATURES)
    assert set(PAIR_FEATURES) <= set(FEATURES)
    assert [FEATURES[i] for i in PAIR_INDEX] == list(PAIR_FEATURES)


def test_rows_of_an_empty_pool() -> None:
    assert compute(QUERY, ()).shape == (0, len(FEATURES))


def test_pair_columns_equal_compute_pairs() -> None:
    views = make_candidates(hits())
    rows = compute(QUERY, views)
    texts = [c.text for c in views]
    np.testing.assert_array_equal(rows[:, PAIR_INDEX], compute_pairs(QUERY, texts))


def test_views_and_a_plain_sequence_give_the_same_rows() -> None:
    views = make_candidates(hits())
    np.testing.assert_array_equal(compute(QUERY, views), compute(QUERY, tuple(views)))


def test_what_the_columns_measure() -> None:
    rows = compute(QUERY, make_candidates(hits()))
    # query terms: melanie, paint, sunrise, 2022 ("when", "did", "a", "in" are stop words)
    assert column(rows, "query_terms")[0] == 4
    assert column(rows, "term_coverage")[0] == pytest.approx(3 / 4)  # "painted" != "paint"
    assert column(rows, "prefix_coverage")[0] == 1.0  # "paint" is "painted"'s prefix
    assert column(rows, "number_coverage")[0] == 1.0
    assert column(rows, "name_coverage")[0] == 1.0
    assert column(rows, "name_coverage")[2] == 0.0
    assert column(rows, "bigram_coverage")[4] == pytest.approx(1 / 3)  # "paint sunrise"
    assert list(column(rows, "coarse_rank")) == [1, 2, 3, 4, 5]
    assert column(rows, "coarse_minmax")[0] == 1.0 and column(rows, "coarse_minmax")[-1] == 0.0
    assert list(column(rows, "vector_matched")) == [0, 1, 0, 1, 0]
    assert list(column(rows, "lexical_rank_norm")) == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    # the two restatements are near-duplicates; the first has none above it
    assert column(rows, "jaccard_max_above")[1] == 1.0
    assert column(rows, "jaccard_max_above")[0] == 0.0
    assert list(column(rows, "near_dup_count")[:3]) == [1, 1, 0]
    # no vectors, no threads: those columns are 0
    assert not column(rows, "has_vectors").any() and not column(rows, "has_thread").any()


def test_within_pool_idf_weights_rare_terms() -> None:
    pool = make_candidates(hits(["melanie a", "sunrise b", "sunrise c", "sunrise d"]))
    rows = compute("sunrise melanie", pool)
    # each text holds one of the two terms; "melanie" is in 1 of 4 texts, "sunrise" in 3
    assert list(column(rows, "term_coverage")) == [0.5] * 4
    idf = column(rows, "idf_coverage")
    assert idf[0] > 0.5 > idf[1] == idf[2] == idf[3]
    assert idf[0] + idf[1] == pytest.approx(1.0)


def test_cosines_when_the_views_carry_vectors() -> None:
    vectors = np.eye(5, 8, dtype=np.float32)
    vectors[1] = vectors[0]  # the second is the first's direction
    views = make_candidates(hits(), vectors=vectors, embedding_space="test")
    rows = compute(QUERY, views)
    assert column(rows, "has_vectors").all()
    assert list(column(rows, "cos_top")) == pytest.approx([1, 1, 0, 0, 0])
    assert column(rows, "cos_max_above")[1] == pytest.approx(1.0)


def test_rows_are_the_same_in_every_process() -> None:
    code = (
        "import sys; sys.path[:0] = " + repr(sys.path) + "\n"
        "from test_features import hits, QUERY\n"
        "from rankseam.plugin.rerankers import make_candidates\n"
        "from rankseam_learned.features import compute\n"
        "print(compute(QUERY, make_candidates(hits())).tobytes().hex())\n"
    )
    here = Path(__file__).parent
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=here,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1
