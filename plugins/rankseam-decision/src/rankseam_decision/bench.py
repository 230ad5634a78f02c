"""Benchmark (not a test): wall time and decision calls of the decision reranker per window.

    python -m rankseam_decision.bench [--latency-ms 20] [--candidates 50] [--limit 10]
                                      [--windows 1,4,8] [--keep-every 3] [--repeats 3]

The backend sleeps ``latency-ms`` per call and answers YES for every ``keep-every``-th coarse
rank (NO otherwise), so the scan stops early at ``limit``. For each window ``w`` it prints the
best-of-``repeats`` wall time, the calls issued, and the target ``ceil(calls / w) * L * 1.2``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time

from rankseam.plugin.decision import DecisionOutcome, DecisionRequest, DecisionResult
from rankseam.plugin.rerankers import make_candidates
from rankseam.types import Hit, MemoryRef, Usage
from rankseam_decision.reranker import DecisionReranker


class SleepingBackend:
    """Sleeps ``latency_s`` per call; YES for every ``every``-th rank."""

    policy_id = "bench.sleeping.v1"
    deterministic = True

    def __init__(self, latency_s: float, every: int) -> None:
        self.latency_s = latency_s
        self.every = every

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        await asyncio.sleep(self.latency_s)
        rank = int(request.subject.rsplit(" ", 1)[-1])
        outcome = DecisionOutcome.YES if rank % self.every == 0 else DecisionOutcome.NO
        return DecisionResult(outcome, self.policy_id, Usage(1, 0, 0))


def run(
    latency_ms: float, n: int, limit: int, windows: list[int], every: int, repeats: int
) -> list[dict[str, object]]:
    hits = [Hit(MemoryRef("bench", f"m{i}", 1), f"candidate {i}", 1.0) for i in range(1, n + 1)]
    candidates = make_candidates(hits)
    backend = SleepingBackend(latency_ms / 1000.0, every)
    rows: list[dict[str, object]] = []
    for w in windows:
        reranker = DecisionReranker(backend, window=w, deadline_s=600.0)
        best = math.inf
        calls = 0
        kept = 0
        for _ in range(repeats):
            started = time.perf_counter()
            decision = asyncio.run(reranker.rerank("bench query", candidates, limit))
            best = min(best, (time.perf_counter() - started) * 1000.0)
            calls = decision.usage.calls
            kept = len(decision.selected_ranks)
        target = math.ceil(calls / w) * latency_ms * 1.2
        rows.append(
            {
                "window": w,
                "calls": calls,
                "kept": kept,
                "wall_ms": round(best, 1),
                "target_ms": round(target, 1),
                "ok": best <= target,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rankseam_decision.bench", description=__doc__)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--candidates", type=int, default=50)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--windows", default="1,4,8")
    parser.add_argument("--keep-every", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    args = parser.parse_args(argv)
    windows = [int(w) for w in args.windows.split(",") if w.strip()]
    rows = run(args.latency_ms, args.candidates, args.limit, windows, args.keep_every, args.repeats)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(
            f"decision reranker: {args.candidates} candidates, limit {args.limit}, "
            f"L = {args.latency_ms:g} ms, YES on every rank divisible by {args.keep_every}"
        )
        print(f"{'window':>6} {'calls':>5} {'kept':>4} {'wall ms':>8} {'target ms':>9}  ok")
        for r in rows:
            print(
                f"{r['window']:>6} {r['calls']:>5} {r['kept']:>4} {r['wall_ms']:>8} "
                f"{r['target_ms']:>9}  {'yes' if r['ok'] else 'NO'}"
            )
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
