"""The latency bench's RSS figures are the measured process's own (docs/benchmarks.md): a
child spawned by a process that had grown large reports its own peak, not its parent's."""

from __future__ import annotations

import multiprocessing
import sys

import numpy as np
import pytest

from rankseam.bench.timing import maxrss_mib, peak_rss_mib

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the fork-and-exec case is Linux's"
)

#: What the parent holds before it spawns the child, MiB: far above a bare interpreter's peak.
HELD_MIB = 400


def _child_figures() -> tuple[float, float]:
    return maxrss_mib(), peak_rss_mib()


def test_a_spawned_child_reports_its_own_peak_not_its_parents():
    held = np.ones(HELD_MIB << 20, dtype=np.uint8)  # written: resident
    assert peak_rss_mib() >= HELD_MIB
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        inherited, own = pool.apply(_child_figures)
    del held
    # ru_maxrss kept the parent's peak across fork and exec: the figure the bench used to
    # report for its search child
    assert inherited >= HELD_MIB
    # VmHWM is the child's own: a fresh interpreter that imported numpy and the bench
    assert 0 < own < HELD_MIB / 2
    assert own < inherited


def _child_growing() -> tuple[float, float]:
    before = peak_rss_mib()
    held = np.ones(HELD_MIB << 20, dtype=np.uint8)
    after = peak_rss_mib()
    del held
    return before, after


def test_a_childs_own_peak_counts_what_it_holds():
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        before, after = pool.apply(_child_growing)
    # below half the array before it, at least the array after: the peak counts what the child
    # holds (not "before + the array": the peak so far may stand above what is resident then)
    assert before < HELD_MIB / 2
    assert after >= HELD_MIB
