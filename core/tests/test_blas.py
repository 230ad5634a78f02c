"""BLAS discipline (docs/performance.md): the SQLite store's matrix products hold numpy's BLAS
pool to one thread below ``PARALLEL_FROM`` elements, restore it afterwards, and never leave it
lowered when searches hold it at the same time."""

from __future__ import annotations

import multiprocessing
import os
import threading

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController, threadpool_info, threadpool_limits

import rankseam
from rankseam.sqlite import blas


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_threads():
    """numpy's BLAS pool at two threads for the test (skipped where it cannot have two)."""
    with threadpool_limits(limits=2, user_api="blas"):
        if not _blas_threads() or min(_blas_threads()) < 2:
            pytest.skip("numpy's BLAS here cannot run two threads")
        yield


class _Recording(np.ndarray):
    """A matrix that records numpy's BLAS pool size when it is multiplied."""

    seen: list[list[int]]

    def __matmul__(self, other):
        type(self).seen.append(_blas_threads())
        return np.asarray(self) @ other


def _recording(rows: int, dims: int) -> np.ndarray:
    _Recording.seen = []
    return np.ones((rows, dims), dtype=np.float32).view(_Recording)


@pytest.mark.parametrize("way", ["as found", "process-wide"])
def test_one_thread_holds_the_pool_and_restores_it(two_threads, monkeypatch, way):
    if way == "process-wide":
        monkeypatch.setattr(blas, "_hold", ThreadpoolController())
    with blas.one_thread():
        assert set(_blas_threads()) == {1}
        with blas.one_thread():  # re-entrant in a thread
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {1}
    assert set(_blas_threads()) == {2}


def test_holders_share_the_pool_and_the_last_restores_it(two_threads):
    """Searches in several threads hold the pool at once: it stays at one thread until the
    last holder leaves, whichever thread that is, then is what it was (a holder that restored
    on its own exit would leave the other's product on two threads, or, restoring what the
    other had set, the pool at one thread for good)."""
    blas_libs = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    if not all(hasattr(lib.dynlib, "openblas_set_num_threads_local") for lib in blas_libs):
        pytest.skip(
            "this numpy's OpenBLAS exports no openblas_set_num_threads_local (numpy 2.5's does "
            "not): holders take turns under one lock instead of sharing the pool"
        )
    entered = threading.Event()
    leave = threading.Event()
    seen: list[list[int]] = []

    def other() -> None:
        with blas.one_thread():
            entered.set()
            leave.wait(10)
            seen.append(_blas_threads())

    thread = threading.Thread(target=other)
    with blas.one_thread():
        thread.start()
        assert entered.wait(10)
    assert set(_blas_threads()) == {1}  # the other thread still holds it
    leave.set()
    thread.join(10)
    assert seen == [[1] * len(seen[0])]
    assert set(_blas_threads()) == {2}


def test_many_threads_leave_the_pool_as_it_was(two_threads):
    q = np.ones(64, dtype=np.float32)
    m = np.ones((256, 64), dtype=np.float32)

    def work() -> None:
        for _ in range(200):
            blas.matvec(m, q)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    work()
    for thread in threads:
        thread.join(30)
    assert set(_blas_threads()) == {2}


@pytest.mark.parametrize("way", ["as found", "process-wide"])
def test_a_holder_that_raises_still_releases(two_threads, monkeypatch, way):
    if way == "process-wide":
        monkeypatch.setattr(blas, "_hold", ThreadpoolController())
    with pytest.raises(RuntimeError), blas.one_thread():
        raise RuntimeError("boom")
    assert set(_blas_threads()) == {2}


def test_nothing_is_held_without_a_known_blas(two_threads, monkeypatch):
    monkeypatch.setattr(blas, "_hold", False)
    with blas.one_thread():
        assert set(_blas_threads()) == {2}
    q = np.ones(8, dtype=np.float32)
    assert np.array_equal(blas.matvec(np.ones((4, 8), dtype=np.float32), q), np.full(4, 8.0))


def test_small_products_run_on_one_thread_large_ones_on_the_pool(two_threads, monkeypatch):
    q = np.ones(8, dtype=np.float32)
    small = _recording(4, 8)
    assert np.array_equal(blas.matvec(small, q), np.full(4, 8.0, dtype=np.float32))
    assert _Recording.seen == [[1] * len(_Recording.seen[0])]
    monkeypatch.setattr(blas, "PARALLEL_FROM", 32)  # 4 × 8 elements: at the threshold
    large = _recording(4, 8)
    blas.matvec(large, q)
    assert _Recording.seen == [[2] * len(_Recording.seen[0])]
    monkeypatch.setattr(blas, "PARALLEL_FROM", 33)
    below = _recording(4, 8)
    blas.matvec(below, q)
    assert _Recording.seen == [[1] * len(_Recording.seen[0])]


def test_holding_the_pool_changes_no_score(two_threads):
    """A product the pool splits over two threads (20 000 × 256: far above OpenBLAS's own
    threshold) and the same product held to one thread give the same floats, bit for bit
    (the pool splits the rows, not the sums)."""
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((20_000, 256), dtype=np.float32)
    query = rng.standard_normal(256, dtype=np.float32)
    spread = matrix @ query
    held = blas.matvec(matrix, query)
    assert held.dtype == spread.dtype == np.float32
    assert np.array_equal(held, spread)


def test_the_default_threshold_is_the_documented_one():
    assert blas.PARALLEL_FROM == 32 * 1024 * 1024


def test_a_search_leaves_the_pool_as_it_was(two_threads, tmp_path):
    """A real search through the SQLite store's vector channel: the same hits with the
    pool as numpy has it and held to one thread, and the pool at two threads after."""
    memory = rankseam.open_memory(str(tmp_path / "m.sqlite3"))
    try:
        for i in range(50):
            memory.add(f"note {i} about the walrus and ice number {i % 7}")
        first = memory.search("walrus ice", limit=5, reranker=None)
        with threadpool_limits(limits=1, user_api="blas"):
            pinned = memory.search("walrus ice", limit=5, reranker=None)
    finally:
        memory.close()
    assert [h.ref for h in first.hits] == [h.ref for h in pinned.hits]
    assert [h.score for h in first.hits] == [h.score for h in pinned.hits]
    assert set(_blas_threads()) == {2}


def _product_in_child() -> float:
    q = np.ones(8, dtype=np.float32)
    return float(blas.matvec(np.ones((4, 8), dtype=np.float32), q)[0])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
def test_a_child_forked_during_a_hold_can_multiply(two_threads, monkeypatch):
    """A process forked while another thread holds the pool (process-wide: the lock is held
    for the whole block) starts free: its first product does not wait for a holder that
    does not exist in it."""
    monkeypatch.setattr(blas, "_hold", ThreadpoolController())
    entered = threading.Event()
    leave = threading.Event()

    def holder() -> None:
        with blas.one_thread():
            entered.set()
            leave.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert entered.wait(10)
        with multiprocessing.get_context("fork").Pool(1) as pool:
            assert pool.apply_async(_product_in_child).get(timeout=60) == 8.0
    finally:
        leave.set()
        thread.join(10)
