"""Summaries shared by the latency benchmark's parts: percentiles of timed calls, CPU time,
peak RSS and the optional progress bar.

Wall time is ``time.perf_counter``; CPU time is ``time.process_time`` (every thread of the
process: a search that hands its reranker to a worker thread is charged for it). On a shared
machine wall time also counts the time other programs held the cores; CPU time counts only
this process's own work, so a ratio of CPU times moves less with the load than one of wall
times. numpy's BLAS keeps worker threads that spin-wait after each product; their spinning
is CPU time too, and on a busy machine it swamps what is measured, so timed searches hold the
BLAS pool to one thread (:func:`blas_threads`) unless told otherwise.
"""

from __future__ import annotations

import contextlib
import resource
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

from rankseam.bench.metrics import mean, percentile

__all__ = [
    "Clock",
    "blas_threads",
    "call_stats",
    "cpu_stats",
    "maxrss_mib",
    "peak_rss_mib",
    "progress_bar",
    "ratio",
    "stats",
]


@attrs.frozen
class Clock:
    """Wall and CPU time read together; :meth:`since` gives both elapsed, in milliseconds."""

    wall: float
    cpu: float

    @classmethod
    def now(cls) -> Clock:
        return cls(wall=time.perf_counter(), cpu=time.process_time())

    def since(self) -> tuple[float, float]:
        """``(wall_ms, cpu_ms)`` since this reading (CPU read first: the wall clock then
        covers it)."""
        cpu = time.process_time()
        wall = time.perf_counter()
        return (wall - self.wall) * 1000.0, (cpu - self.cpu) * 1000.0


def stats(times_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95 of wall times and their count."""
    return {
        "p50_ms": round(percentile(times_ms, 50), 4),
        "p95_ms": round(percentile(times_ms, 95), 4),
        "runs": len(times_ms),
    }


def cpu_stats(cpu_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95/mean of CPU times (``time.process_time`` per call)."""
    return {
        "cpu_p50_ms": round(percentile(cpu_ms, 50), 4),
        "cpu_p95_ms": round(percentile(cpu_ms, 95), 4),
        "cpu_mean_ms": round(mean(cpu_ms), 4),
    }


def call_stats(times_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95 of a reranker's own call (the trace's ``latency_ms``)."""
    return {
        "call_p50_ms": round(percentile(times_ms, 50), 4),
        "call_p95_ms": round(percentile(times_ms, 95), 4),
    }


def ratio(top: Mapping[str, Any] | None, bottom: Mapping[str, Any] | None, key: str) -> Any:
    """``top[key] / bottom[key]`` rounded to 3 decimals, or ``None`` where either is missing
    or the divisor is not positive."""
    if not top or not bottom or key not in top or key not in bottom:
        return None
    return round(top[key] / bottom[key], 3) if bottom[key] > 0 else None


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, MiB: its own (``VmHWM`` of
    ``/proc/self/status``, Linux), else ``resource.getrusage``'s ``ru_maxrss`` (which on
    Linux keeps the parent's peak across fork and exec: a search child spawned by a
    benchmark that had held 500 MiB reported 500 MiB, measuring 51 on its own)."""
    own = _vm_hwm_kib()
    if own is not None:
        return round(own / 1024, 1)
    return maxrss_mib()


def maxrss_mib() -> float:
    """``ru_maxrss`` of this process, MiB (inherited across fork and exec on Linux)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return round(rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024, 1)


def _vm_hwm_kib() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def progress_bar(total: int, desc: str, enabled: bool) -> Any:
    """A tqdm bar when asked for and tqdm is installed (the bench extra), else ``None``."""
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, leave=False, disable=None)


@contextlib.contextmanager
def blas_threads(threads: int | None) -> Iterator[None]:
    """Hold numpy's BLAS thread pool to ``threads`` threads inside the block (``None`` or 0:
    leave it as it is). Uses threadpoolctl (the bench extra)."""
    if not threads:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads, user_api="blas"):
        yield
