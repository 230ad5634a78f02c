"""Search throughput of one PostgreSQL store with many processes: each process opens the store
(its own ``Memory`` and connection pool) and searches the LoCoMo questions (synthetic ones when
the data is absent) one after another, limit 10, no reranker, for ``--seconds``; all start
together. For each process count: searches per second of all processes together, their ratio
to one process's, and the latency percentiles of every search.

    python plugins-hosted/rankseam-postgres/bench/throughput.py \\
        --store 'postgresql://me@/bench?schema=bench_locomo_100000' --processes 1,8

The store must exist (``bench/latency.py --stores DIR --url URL`` keeps its stores, in the
schema ``bench_<corpus>_<size>``). Writes ``report.json`` and ``report.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time
from typing import Any

import numpy as np
from latency import corpus_name, write_report

import rankseam
from rankseam.bench.latency import corpus_queries


def _worker(store: str, queries: list[str], seconds: float, start: Any, out: Any) -> None:
    with rankseam.open_memory(store, create=False) as memory:
        for q in queries[:5]:  # warm: pool, plans, caches
            memory.search(q, 10, reranker=None)
        start.wait()
        times: list[float] = []
        c0 = time.process_time()
        t_end = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < t_end:
            t0 = time.perf_counter()
            memory.search(queries[i % len(queries)], 10, reranker=None)
            times.append((time.perf_counter() - t0) * 1000)
            i += 1
        out.put({"times": times, "cpu_s": time.process_time() - c0})


def measure(store: str, processes: int, seconds: float, queries: list[str]) -> dict[str, Any]:
    """``processes`` processes searching ``store`` together for ``seconds``."""
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(processes + 1)
    out = ctx.Queue()
    step = max(1, len(queries) // processes)
    procs = [
        ctx.Process(
            target=_worker,
            args=(store, queries[i * step :] + queries[: i * step], seconds, start, out),
        )
        for i in range(processes)
    ]
    for p in procs:
        p.start()
    start.wait(timeout=600)
    t0 = time.perf_counter()
    results = [out.get(timeout=seconds + 600) for _ in procs]
    elapsed = max(time.perf_counter() - t0, seconds)
    for p in procs:
        p.join()
    times = np.concatenate([np.asarray(r["times"]) for r in results])
    return {
        "processes": processes,
        "searches": int(times.size),
        "seconds": round(elapsed, 2),
        "searches_per_s": round(times.size / seconds, 2),
        "p50_ms": round(float(np.percentile(times, 50)), 2),
        "p95_ms": round(float(np.percentile(times, 95)), 2),
        "client_cpu_s": round(sum(r["cpu_s"] for r in results), 2),
    }


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"store {report['store']}; corpus {report['corpus']}; {report['seconds']} s per count; "
        f"load average {report['load_before']} -> {report['load_after']}",
        "",
        "| processes | searches | searches/s | × one process | p50 ms | p95 ms | client CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['processes']} | {r['searches']} | {r['searches_per_s']} | "
            f"{r['ratio_to_one']} | {r['p50_ms']} | {r['p95_ms']} | {r['client_cpu_s']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="the store's postgresql:// URL")
    parser.add_argument("--processes", default="1,8")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--out", default="bench-out/postgres-throughput")
    args = parser.parse_args()
    corpus = corpus_name()
    queries = corpus_queries(corpus, args.queries)
    load_before = os.getloadavg()
    rows = [
        measure(args.store, int(n), args.seconds, queries) for n in args.processes.split(",") if n
    ]
    one = next((r["searches_per_s"] for r in rows if r["processes"] == 1), None)
    for r in rows:
        r["ratio_to_one"] = round(r["searches_per_s"] / one, 2) if one else None
        print(json.dumps(r), flush=True)
    with rankseam.open_memory(args.store, create=False) as memory:
        location = memory.store.location
    report = {
        "store": location,
        "corpus": corpus,
        "seconds": args.seconds,
        "rows": rows,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    write_report(args.out, report, _markdown(report))


if __name__ == "__main__":
    main()
