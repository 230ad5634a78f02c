"""Sliding-window plan for pools larger than one window (bottom-up, as RankGPT / rank_llm).

Positions are 0-based slices ``[start, end)`` of the *working order* (which starts as the coarse
order). With ``n`` candidates, window ``w`` and stride ``s`` (``1 <= s < w``):

- ``n <= w``: one window ``[0, n)`` -- one call, exactly the single-request policy;
- ``n > w``: ``call_count(n, w, s) = ceil((n - w) / s) + 1`` windows. Window ``i`` (from 0)
  is ``[n - w - i*s, n - i*s)`` for every window but the last, which is the top window
  ``[0, w)``. Windows move from the bottom of the pool to the top, each overlapping the next by
  at least ``w - s`` positions, so the best candidates found low in the pool can climb.

Examples: ``w=20, s=10``: 20 -> 1 call, 50 -> 4, 100 -> 9, 200 -> 19 (the figures rank_llm
reports for the same window and stride).
"""

from __future__ import annotations

__all__ = ["call_count", "plan_windows"]


def _check(n: int, window: int, stride: int) -> None:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if window < 2:
        raise ValueError(f"window must be >= 2, got {window}")
    if not 1 <= stride < window:
        raise ValueError(f"stride must be in 1..window-1 ({window - 1}), got {stride}")


def call_count(n: int, window: int, stride: int) -> int:
    """How many generation calls a pool of ``n`` candidates takes (0 for an empty pool)."""
    _check(n, window, stride)
    if n == 0:
        return 0
    if n <= window:
        return 1
    return -(-(n - window) // stride) + 1


def plan_windows(n: int, window: int, stride: int) -> tuple[tuple[int, int], ...]:
    """The ``[start, end)`` slices, in call order (bottom first, top window last)."""
    calls = call_count(n, window, stride)
    if calls <= 1:
        return ((0, n),) if n else ()
    plan = [(n - window - i * stride, n - i * stride) for i in range(calls - 1)]
    plan.append((0, window))
    return tuple(plan)
