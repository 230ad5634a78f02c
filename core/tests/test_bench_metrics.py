"""Metric functions on hand-computed examples (docs/benchmarks.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankseam.bench.metrics import dup_slot_at_k, mean, mrr, ndcg_at_k, percentile, recall_at_k

EV = {"D1:1": 1.0, "D1:5": 1.0}


def test_recall_counts_groups_in_top_k():
    ranked = ["D1:2", "D1:1", "D1:3", "D1:5", "D1:9"]
    assert recall_at_k(ranked, EV, 1) == 0.0
    assert recall_at_k(ranked, EV, 2) == 0.5
    assert recall_at_k(ranked, EV, 4) == 1.0


def test_recall_duplicates_of_one_group_count_once():
    ranked = ["D1:1", "D1:1", "D1:1"]  # a turn and two observations of it
    assert recall_at_k(ranked, EV, 3) == 0.5


def test_k_larger_than_list_uses_whole_list():
    ranked = ["D1:5"]
    assert recall_at_k(ranked, EV, 10) == 0.5
    assert dup_slot_at_k(ranked, 10) == 0.0
    # one relevant of two at position 1: DCG 1, IDCG 1 + 1/log2(3)
    assert ndcg_at_k(ranked, EV, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_empty_evidence_and_empty_list_score_zero():
    assert recall_at_k(["a"], {}, 5) == 0.0
    assert ndcg_at_k(["a"], {}, 5) == 0.0
    assert mrr(["a"], {}) == 0.0
    assert recall_at_k([], EV, 5) == 0.0
    assert ndcg_at_k([], EV, 5) == 0.0
    assert mrr([], EV) == 0.0
    assert dup_slot_at_k([], 5) == 0.0


def test_zero_or_negative_gain_is_not_relevant():
    assert recall_at_k(["a", "b"], {"a": 0.0, "b": 1.0}, 1) == 0.0
    assert mrr(["a", "b"], {"a": 0.0, "b": 1.0}) == 0.5


def test_ndcg_hand_computed():
    # relevant at positions 2 and 4 (1-based): DCG = 1/log2(3) + 1/log2(5)
    ranked = ["x", "D1:1", "y", "D1:5"]
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3)
    assert ndcg_at_k(ranked, EV, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(["D1:1", "D1:5"], EV, 10) == pytest.approx(1.0)


def test_ndcg_duplicate_slot_earns_no_gain():
    # the second D1:1 is a duplicate: no gain; D1:5 at position 3
    ranked = ["D1:1", "D1:1", "D1:5"]
    dcg = 1 + 1 / math.log2(4)
    assert ndcg_at_k(ranked, EV, 10) == pytest.approx(dcg / (1 + 1 / math.log2(3)))


def test_ndcg_graded_gains():
    rel = {"a": 2.0, "b": 1.0}
    # ranked b, a: DCG = 1 + 2/log2(3); ideal a, b: 2 + 1/log2(3)
    assert ndcg_at_k(["b", "a"], rel, 10) == pytest.approx(
        (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    )
    # k cuts the ideal list too
    assert ndcg_at_k(["a"], rel, 1) == pytest.approx(1.0)


def test_mrr_first_relevant_and_cut():
    assert mrr(["x", "y", "D1:5"], EV) == pytest.approx(1 / 3)
    assert mrr(["x", "y", "D1:5"], EV, k=2) == 0.0


def test_dup_slot_hand_computed():
    assert dup_slot_at_k(["a", "a", "b", "a", "c"], 5) == pytest.approx(2 / 5)
    assert dup_slot_at_k(["a", "a", "b", "a", "c"], 2) == pytest.approx(1 / 2)
    assert dup_slot_at_k(["a", "b", "c"], 5) == 0.0
    assert dup_slot_at_k(["a", "a"], 5) == pytest.approx(1 / 2)


@pytest.mark.parametrize("k", [0, -1, True, 2.0])
def test_bad_k_is_refused(k):
    with pytest.raises(ValueError, match="k must be"):
        recall_at_k(["a"], EV, k)


def test_percentile_matches_numpy_and_mean():
    values = [5.0, 1.0, 3.0, 2.0, 4.0, 10.0]
    for q in (0, 50, 95, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert mean([]) == 0.0
    assert mean([1.0, 2.0]) == 1.5
    with pytest.raises(ValueError):
        percentile([], 50)


groups = st.lists(st.sampled_from("abcdefg"), max_size=12)
relevance = st.dictionaries(st.sampled_from("abcdefg"), st.sampled_from([1.0, 2.0]), max_size=5)


@given(groups, relevance, st.integers(1, 15))
def test_metrics_stay_in_unit_interval_and_recall_grows_with_k(ranked, rel, k):
    for value in (
        recall_at_k(ranked, rel, k),
        ndcg_at_k(ranked, rel, k),
        mrr(ranked, rel, k),
        dup_slot_at_k(ranked, k),
    ):
        assert 0.0 <= value <= 1.0 + 1e-12
    assert recall_at_k(ranked, rel, k) <= recall_at_k(ranked, rel, k + 1)
