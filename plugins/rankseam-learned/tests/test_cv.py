"""Cross-validation that cannot leak (rankseam_learned.cv): the groups, the folds and the paired
comparison the training command prints."""

from __future__ import annotations

import pytest

from rankseam_learned.cv import LeakKey, assign_folds, compare, leak_groups


def key(
    text: str, relevant: tuple[str, ...], thread: str | None = None, store: str = "s"
) -> LeakKey:
    return LeakKey(store, text, frozenset(relevant), thread)


def test_duplicated_queries_that_straddle_naive_folds_stay_together() -> None:
    # Twenty queries, each asked twice, the copy ten places later: a naive split into
    # contiguous folds (or every fifth query) puts each copy in another fold than its original,
    # so the model would be scored on questions it was trained on.
    originals = [key(f"where is thing {i}?", (f"m{i}",)) for i in range(10)]
    keys = originals + [key(f"Where is  thing {i}?", (f"m{i}",)) for i in range(10)]
    naive = [i * 5 // len(keys) for i in range(len(keys))]  # contiguous 5-fold split
    assert any(naive[i] != naive[i + 10] for i in range(10))  # the naive folds leak
    folds = assign_folds(leak_groups(keys), 5)
    for i in range(10):
        assert folds[i] == folds[i + 10]
    assert len(set(folds)) == 5


def test_queries_sharing_a_relevant_memory_are_one_group_transitively() -> None:
    keys = [
        key("a", ("m1",)),
        key("b", ("m1", "m2")),
        key("c", ("m2",)),
        key("d", ("m3",)),
        key("e", ("m1",), store="other"),  # the same id in another store is another memory
    ]
    groups = leak_groups(keys)
    assert groups[0] == groups[1] == groups[2]
    assert len({groups[0], groups[3], groups[4]}) == 3


def test_a_thread_is_one_group_and_few_threads_leave_one_out() -> None:
    keys = [key(f"q{i}", (f"m{i}",), thread=f"conv-{i % 3}") for i in range(12)]
    groups = leak_groups(keys)
    assert len(set(groups)) == 3
    folds = assign_folds(groups, 5)
    assert len(set(folds)) == 3  # leave-one-thread-out: no more folds than threads
    for i in range(12):
        for j in range(12):
            if i % 3 == j % 3:
                assert folds[i] == folds[j]


def test_folds_are_balanced_and_never_split_a_group() -> None:
    groups = [0] * 7 + [1] * 3 + [2] * 3 + [3] * 2 + [4] * 2 + [5] * 1 + [6] * 1 + [7] * 1
    folds = assign_folds(groups, 3)
    by_group: dict[int, set[int]] = {}
    for g, f in zip(groups, folds, strict=True):
        by_group.setdefault(g, set()).add(f)
    assert all(len(f) == 1 for f in by_group.values())
    sizes = sorted(folds.count(f) for f in set(folds))
    assert sizes == [6, 6, 8] or max(sizes) - min(sizes) <= 2


def test_one_group_cannot_be_cross_validated() -> None:
    with pytest.raises(ValueError, match="at least two independent groups"):
        assign_folds([0, 0, 0], 5)
    with pytest.raises(ValueError, match="at least 2 folds"):
        assign_folds([0, 1], 1)


def test_compare_counts_wins_losses_and_tests_them() -> None:
    default = [0.0] * 18 + [1.0] * 2 + [1.0] * 10
    model = [1.0] * 18 + [0.0] * 2 + [1.0] * 10
    c = compare("R@5", default, model, resamples=2000)
    assert (c.wins, c.losses, c.ties) == (18, 2, 10)
    assert c.default == pytest.approx(12 / 30) and c.model == pytest.approx(28 / 30)
    assert c.sign_p < 0.001
    assert c.bootstrap_p < 0.01
    assert 0 < c.ci_low < c.delta < c.ci_high
    again = compare("R@5", default, model, resamples=2000)
    assert again == c  # seeded: the same figures every run
    assert "18 wins / 2 losses" in c.line()


def test_compare_of_equal_scores_finds_nothing() -> None:
    c = compare("nDCG@10", [0.5, 0.2, 0.9], [0.5, 0.2, 0.9])
    assert (c.wins, c.losses, c.sign_p, c.bootstrap_p) == (0, 0, 1.0, 1.0)
    assert c.delta == 0.0


def test_compare_of_a_balanced_split_is_not_significant() -> None:
    default = [0.0, 1.0] * 10
    model = [1.0, 0.0] * 10
    c = compare("R@5", default, model, resamples=2000)
    assert (c.wins, c.losses) == (10, 10)
    assert c.sign_p == 1.0
    assert c.bootstrap_p > 0.5
    assert c.ci_low < 0 < c.ci_high
