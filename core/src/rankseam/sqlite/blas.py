"""BLAS discipline: the store's matrix products hold numpy's BLAS pool to one thread.

numpy hands a matrix-vector product to its BLAS (OpenBLAS in the wheels), which splits a
large one over its thread pool. After each product the pool's idle threads spin-wait before
they sleep, and that spinning is CPU time billed to the process: measured on stock numpy
(OpenBLAS, two threads), a search of 10k memories cost 8 ms of CPU instead of 3.3, the
product itself taking 0.2 ms. A second thread shortens the product only when it is large
(docs/performance.md has the figures): at 10k × 256 it saves 0.2 ms of wall time and costs
3.7 ms of CPU, at 100k × 256 it saves 3.5 ms and costs 4.4, at 1M it saves 35 ms for 6.

So :func:`matvec` runs a product of fewer than :data:`PARALLEL_FROM` elements with the pool
held to one thread (:func:`one_thread`, threadpoolctl), and a larger one with the pool as
numpy has it. Holding the pool changes no result: each score is the same dot product either
way (the pool splits the rows, not the sums).

How it is held: where numpy's OpenBLAS exports ``openblas_set_num_threads_local`` (0.3.27
on; numpy 2.4's wheels do, numpy 2.5's scipy-openblas build does not), through it, which any
thread may call; the count is still the
process's, so holders share it: the first lowers it, the last one out restores it, and
concurrent searches never leave it lowered. Any other BLAS threadpoolctl knows (MKL, BLIS, an
older OpenBLAS) through threadpoolctl, under one lock, lowered and restored by the same thread
(``openblas_set_num_threads`` lets no other thread raise a count the main thread lowered).
numpy work that other threads do while a search holds the pool runs on one thread too.
Without threadpoolctl, or without a BLAS it knows, nothing is held.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["PARALLEL_FROM", "matvec", "one_thread"]

#: Products of at least this many matrix elements run with numpy's BLAS pool as it is (32 Mi:
#: 128k vectors of 256 dimensions, 43k of 768); smaller ones on one thread.
PARALLEL_FROM = 1 << 25

_lock = threading.RLock()
#: How the pool is held, found at the first product (about 2 ms, once): OpenBLAS's per-thread
#: setters, or threadpoolctl's controller of the process-wide pools, or False (nothing).
_hold: Any = None


def _holder() -> Any:
    global _hold
    if _hold is None:
        _hold = _find_holder()
    return _hold


def _find_holder() -> Any:
    try:
        from threadpoolctl import ThreadpoolController

        controller = ThreadpoolController()
    except Exception:  # not installed, or a BLAS it cannot read: hold nothing
        return False
    blas = [lib for lib in controller.lib_controllers if lib.user_api == "blas"]
    if not blas:
        return False
    local = []
    for lib in blas:
        setter = getattr(lib.dynlib, "openblas_set_num_threads_local", None)
        if lib.internal_api != "openblas" or setter is None:
            return controller  # a BLAS without per-thread counts: the process-wide pool
        setter.argtypes = [ctypes.c_int]
        setter.restype = ctypes.c_int
        local.append(setter)
    return tuple(local)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """numpy's BLAS pool held to one thread inside the block, then restored (see the module
    docstring for how)."""
    hold = _holder()
    if isinstance(hold, tuple):
        with _shared(hold):
            yield
        return
    with _lock:
        limiter = hold.limit(limits=1, user_api="blas") if hold else None
        try:
            yield
        finally:
            if limiter is not None:
                limiter.restore_original_limits()


_holders = 0
_before: list[int] = []


@contextlib.contextmanager
def _shared(setters: tuple[Any, ...]) -> Iterator[None]:
    """The pool held through OpenBLAS's setters: lowered by the first holder, restored to what
    it was by the last one out."""
    global _holders, _before
    with _lock:
        if _holders == 0:
            _before = [setter(1) for setter in setters]
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                for setter, count in zip(setters, _before, strict=True):
                    setter(count)


def _after_fork_in_child() -> None:
    # a child forked while a search held the pool starts with no holder and a free lock (the
    # lock a thread of the parent held would never be released in the child)
    global _lock, _holders, _before
    _lock = threading.RLock()
    _holders = 0
    _before = []


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector``; with numpy's BLAS pool held to one thread below
    :data:`PARALLEL_FROM` elements."""
    if matrix.size >= PARALLEL_FROM:
        return matrix @ vector
    with one_thread():
        return matrix @ vector
