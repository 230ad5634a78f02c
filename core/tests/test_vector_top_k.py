"""The embedded store's best-k of a vector search: score descending, ties by row key
ascending, at the cut too (a row left out with the k-th best score competes for its place by
row key), and rows marked retired (-inf) never listed."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rankseam.sqlite.vector_cache import top_k

#: few distinct scores, so that ties at the cut are the usual case
SCORES = st.sampled_from([0.1, 0.2, 0.3, float("-inf")])


@given(
    st.lists(st.tuples(st.integers(1, 10_000), SCORES), max_size=60, unique_by=lambda r: r[0]),
    st.integers(0, 70),
)
def test_ties_by_row_key_at_the_cut_too(rows, k):
    rids = np.array([r for r, _s in rows], dtype=np.int64)
    scores = np.array([s for _r, s in rows], dtype=np.float32)
    got = top_k(scores, rids, k)
    ranked = sorted((-s, r) for r, s in zip(rids.tolist(), scores.tolist(), strict=True))
    want = [(r, -s) for s, r in ranked[: max(k, 0)] if s != float("inf")]
    assert list(zip(got.row_keys.tolist(), got.scores.tolist(), strict=True)) == want
