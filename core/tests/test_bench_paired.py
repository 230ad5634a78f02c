"""The paired comparison of a quality run's columns (rankseam.bench.paired) and the search
variant key that turns source-aware selection on and off."""

from __future__ import annotations

import math

import pytest

from rankseam.bench.paired import paired, paired_markdown, sign_test
from rankseam.bench.policies import parse_search


def test_sign_test_hand_computed() -> None:
    # 14 wins, 0 losses: 2 × 0.5**14
    assert sign_test(14, 0) == pytest.approx(2 * 0.5**14)
    assert sign_test(0, 14) == sign_test(14, 0)
    # 3 against 1: 2 × (C(4,0) + C(4,1)) / 16 = 0.625
    assert sign_test(3, 1) == pytest.approx(0.625)
    assert sign_test(2, 2) == 1.0 and sign_test(0, 0) == 1.0
    # the tail over every split sums to one
    n = 9
    assert sum(math.comb(n, i) for i in range(n + 1)) / 2**n == 1.0
    with pytest.raises(ValueError, match="counts >= 0"):
        sign_test(-1, 3)


def test_paired_counts_wins_losses_and_ties_against_the_first_column() -> None:
    def row(r5: float) -> dict[str, float]:
        return {"recall@5": r5, "recall@10": r5, "ndcg@10": r5, "pool_recall": 0.5}

    rows = {
        "before": [row(0.0), row(1.0), row(0.5), row(0.5)],
        "after": [row(1.0), row(1.0), row(0.0), row(1.0)],
    }
    out = paired(["before", "after"], rows)
    assert out["baseline"] == "before"
    r5 = out["columns"]["after"]["recall@5"]
    assert (r5["wins"], r5["losses"], r5["ties"]) == (2, 1, 1)
    assert r5["sign_test_p"] == 1.0  # 2 against 1 is no evidence
    assert out["columns"]["after"]["pool_recall"]["ties"] == 4
    (table,) = paired_markdown({"paired": out})
    assert "| after | 2 / 1 (p 1)" in table
    assert paired(["only"], {"only": rows["before"]}) == {}
    with pytest.raises(ValueError, match="has 1 queries"):
        paired(["before", "after"], {"before": rows["before"], "after": rows["after"][:1]})


def test_a_search_variant_sets_distinct_sources() -> None:
    variant = parse_search("plain==sources=lexical+vector:distinct_sources=false")
    assert variant.config()["search"] == {
        "sources": ["lexical", "vector"],
        "distinct_sources": False,
    }
    assert parse_search("sources.context.weight=0.6").config()["sources"] == {
        "context": {"weight": 0.6}
    }
