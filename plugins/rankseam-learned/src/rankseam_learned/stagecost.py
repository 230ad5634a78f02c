"""What the ``learned`` rerank stage costs on real pools (a benchmark, not a test).

    python -m rankseam_learned.stagecost --dataset locomo --model PATH|NAME
                                         [--queries 200] [--pool 30] [--collection 0]

One collection of the data set (``rankseam train --dataset`` names: ``locomo``, ``scifact``,
or a bench spec) is ingested into a scratch SQLite store; each query is searched once with the
``learned`` reranker at the given pool size, and the reranker's own call -- features from the
pool, its neighbours and vectors, the model's scores, the order -- is timed in CPU
(``time.process_time``) and wall time. Prints JSON: p50 / p95 of both (the first 5 searches
are warm-up), the model's size and its load time (CPU, p50 of 20 loads). CPU time is the
figure to compare on a shared machine (docs/plugins/learned.md, "Cost").
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

import rankseam
from rankseam.types import Candidate, RerankDecision
from rankseam_learned import benchdata
from rankseam_learned.installed import model_path
from rankseam_learned.model import load
from rankseam_learned.reranker import LearnedReranker

__all__ = ["StageTimer", "measure"]

WARMUP = 5


class StageTimer:
    """The ``learned`` reranker with each call's CPU and wall time recorded."""

    needs_event_loop: ClassVar[bool] = False
    needs_neighbours = LearnedReranker.needs_neighbours
    needs_embeddings: ClassVar[bool] = True

    def __init__(self, inner: LearnedReranker) -> None:
        self.inner = inner
        self.policy_id = inner.policy_id
        self.cpu_ms: list[float] = []
        self.wall_ms: list[float] = []

    async def rerank(
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision:
        cpu, wall = time.process_time(), time.perf_counter()
        decision = self.inner.select(query, candidates, limit)
        self.cpu_ms.append((time.process_time() - cpu) * 1000.0)
        self.wall_ms.append((time.perf_counter() - wall) * 1000.0)
        return decision


def _p(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 3)


def measure(
    dataset: str,
    model: str,
    *,
    queries: int = 200,
    pool: int = 30,
    collection: int = 0,
    warmup: int = WARMUP,
) -> dict[str, Any]:
    """The stage's cost over ``queries`` questions of one collection of ``dataset`` (after
    ``warmup`` searches that are not counted)."""
    path, label = model_path(model)
    loads = []
    for _ in range(20):
        started = time.process_time()
        load(path)
        loads.append((time.process_time() - started) * 1000.0)
    data = benchdata.load(dataset)
    chosen = data.collections[collection]
    timer = StageTimer(LearnedReranker.from_options({"model": model}))
    with tempfile.TemporaryDirectory() as scratch:
        memory = rankseam.open_memory(Path(scratch) / "store.sqlite3")
        try:
            memory.ingest(r.to_ingest() for r in chosen.records)
            for query in chosen.queries[: queries + warmup]:
                memory.search(query.text, limit=10, reranker=timer, pool=pool)
        finally:
            memory.close()
    cpu, wall = timer.cpu_ms[warmup:], timer.wall_ms[warmup:]
    return {
        "dataset": dataset,
        "collection": chosen.name,
        "model": label,
        "model_bytes": path.stat().st_size,
        "model_load_cpu_ms_p50": round(statistics.median(loads), 3),
        "pool": pool,
        "searches": len(cpu),
        "stage_cpu_ms": {"p50": _p(cpu, 50), "p95": _p(cpu, 95)} if cpu else None,
        "stage_wall_ms": {"p50": _p(wall, 50), "p95": _p(wall, 95)} if wall else None,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="locomo")
    parser.add_argument("--model", default="", help="a model file or an installed model's name")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--pool", type=int, default=30)
    parser.add_argument("--collection", type=int, default=0)
    args = parser.parse_args(argv)
    report = measure(
        args.dataset,
        args.model,
        queries=args.queries,
        pool=args.pool,
        collection=args.collection,
    )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
