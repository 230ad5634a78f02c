"""Where a PostgreSQL search spends its time, per channel: the wall time of each reader method
a search calls (as the client sees it: round trip, server and client work), how many times a
search calls it, and with ``--explain`` the server's own ``EXPLAIN (ANALYZE, BUFFERS)`` time of
every statement it sends (each statement then runs twice; the plan of each method's slowest
statement is printed).

    python plugins-hosted/rankseam-postgres/bench/channels.py \\
        --store 'postgresql://me@/bench?schema=bench_locomo_100000' --queries 150
    python plugins-hosted/rankseam-postgres/bench/channels.py --store URL --explain
    python plugins-hosted/rankseam-postgres/bench/channels.py --store URL --ef-search 128,256,512

``--ef-search`` measures the vector channel alone for each ``hnsw.ef_search``: its wall time
per search and the share of the exact best ``k`` (120: the over-fetch of a pool of 30) that the
HNSW index finds.

The store must exist (``bench/latency.py --stores DIR --url URL`` keeps its stores, in the
schema ``bench_<corpus>_<size>``). LoCoMo questions (synthetic ones when the data is absent),
limit 10, no reranker, after 10 warm-up searches.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from psycopg import sql

import rankseam
from rankseam.bench.latency import corpus_queries
from rankseam.bench.synthetic import locomo_texts
from rankseam_postgres.reader import PostgresReader

METHODS = (
    "live_count",
    "document_frequency",
    "lexical",
    "vector",
    "importance",
    "identities",
    "memories",
)


class _Explaining:
    """A connection whose queries (those that only read) also run under ``EXPLAIN``."""

    def __init__(self, conn: Any, record: Callable[[float, str, str], None]) -> None:
        self._conn = conn
        self._record = record

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
        text = query if isinstance(query, str) else query.as_string(self._conn)
        head = text.lstrip().upper()
        if head.startswith(("SELECT", "WITH")) and ";" not in text:
            sql_query = sql.SQL(query) if isinstance(query, str) else query  # type: ignore[arg-type]
            plan = "\n".join(
                row[0]
                for row in self._conn.execute(
                    sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + sql_query, params
                )
            )
            found = re.search(r"Execution Time: ([\d.]+)", plan)
            self._record(float(found.group(1)) if found else 0.0, plan, text)
        elif ";" in text:  # the vector search with its settings: explain its search part
            parts = text.split(";")
            search = next(p for p in parts if "ORDER BY" in p)
            self._conn.execute(";".join(parts[:1]))
            plan = "\n".join(
                row[0] for row in self._conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + search)
            )
            self._conn.execute(parts[-1])
            found = re.search(r"Execution Time: ([\d.]+)", plan)
            self._record(float(found.group(1)) if found else 0.0, plan, search)
        return self._conn.execute(query, params, **kw)


def measure(store: str, queries: list[str], explain: bool) -> dict[str, Any]:
    wall: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()
    server: dict[str, list[float]] = collections.defaultdict(list)
    plans: dict[str, tuple[float, str, str]] = {}
    current = ["other"]

    def record(ms: float, plan: str, text: str) -> None:
        server[current[0]].append(ms)
        if current[0] not in plans or ms > plans[current[0]][0]:
            plans[current[0]] = (ms, plan, text[:200])

    originals = {name: getattr(PostgresReader, name) for name in METHODS}
    original_init = PostgresReader.__init__

    def init(self: Any, store_: Any, conn: Any) -> None:
        original_init(self, store_, _Explaining(conn, record) if explain else conn)

    def timed(name: str) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kw: Any) -> Any:
            previous, current[0] = current[0], name
            t0 = time.perf_counter()
            try:
                return originals[name](self, *args, **kw)
            finally:
                wall[name] += time.perf_counter() - t0
                calls[name] += 1
                current[0] = previous

        return method

    try:
        PostgresReader.__init__ = init  # type: ignore[method-assign]
        for name in METHODS:
            setattr(PostgresReader, name, timed(name))
        with rankseam.open_memory(store, create=False) as memory:
            for q in queries[:10]:
                memory.search(q, 10, reranker=None)
            wall.clear()
            calls.clear()
            server.clear()
            times = []
            c0 = time.process_time()
            for q in queries[10:]:
                t0 = time.perf_counter()
                memory.search(q, 10, reranker=None)
                times.append((time.perf_counter() - t0) * 1000)
            cpu = time.process_time() - c0
    finally:
        PostgresReader.__init__ = original_init  # type: ignore[method-assign]
        for name, method in originals.items():
            setattr(PostgresReader, name, method)
    n = len(times)
    return {
        "searches": n,
        "p50_ms": round(float(np.percentile(times, 50)), 2),
        "p95_ms": round(float(np.percentile(times, 95)), 2),
        "client_cpu_ms": round(cpu * 1000 / n, 2),
        "methods": {
            name: {
                "calls_per_search": round(calls[name] / n, 2),
                "wall_ms_per_search": round(wall[name] * 1000 / n, 2),
                **(
                    {"server_ms_per_search": round(sum(server[name]) / n, 2)}
                    if explain and server.get(name)
                    else {}
                ),
            }
            for name in METHODS
            if calls[name]
        },
        "plans": {name: {"ms": p[0], "statement": p[2], "plan": p[1]} for name, p in plans.items()},
    }


def ef_search(store: str, queries: list[str], values: list[int], k: int) -> list[dict[str, Any]]:
    """The vector channel alone with each ``hnsw.ef_search``: ms per search, recall@k."""
    import rankseam_postgres.reader as reader_module

    rows = []
    saved = reader_module.EF_SEARCH, reader_module.EF_SEARCH_LARGE
    with rankseam.open_memory(store, create=False) as memory:
        space = memory.embedder.descriptor
        vectors = memory.embedder.embed(queries)
        with memory.store.read() as reader:
            exact = [
                {key for key, _s in reader.vector("default", space, v, k, exact=True)}
                for v in vectors
            ]
        try:
            for value in values:
                reader_module.EF_SEARCH = reader_module.EF_SEARCH_LARGE = value
                times, recall = [], []
                for v, best in zip(vectors, exact, strict=True):
                    with memory.store.read() as reader:
                        t0 = time.perf_counter()
                        found = {key for key, _s in reader.vector("default", space, v, k)}
                        times.append((time.perf_counter() - t0) * 1000)
                    recall.append(len(found & best) / max(len(best), 1))
                rows.append(
                    {
                        "ef_search": value,
                        "p50_ms": round(float(np.percentile(times, 50)), 2),
                        "p95_ms": round(float(np.percentile(times, 95)), 2),
                        f"recall_at_{k}": round(float(np.mean(recall)), 3),
                    }
                )
        finally:
            reader_module.EF_SEARCH, reader_module.EF_SEARCH_LARGE = saved
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="the store's postgresql:// URL")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--ef-search", default=None, metavar="N,N,...")
    parser.add_argument("--k", type=int, default=120)
    args = parser.parse_args()
    try:
        next(iter(locomo_texts(1)))
        corpus = "locomo"
    except Exception:  # no LoCoMo data here: pseudo-words
        corpus = "synthetic"
    queries = corpus_queries(corpus, args.queries + 10)
    if args.ef_search:
        values = [int(v) for v in args.ef_search.split(",") if v]
        for row in ef_search(args.store, queries[10:], values, args.k):
            print(json.dumps(row), flush=True)
        return
    report = measure(args.store, queries, args.explain)
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    plans = report.pop("plans")
    print(json.dumps(report, indent=2))
    if args.explain:
        for name, p in plans.items():
            print(f"===== {name}: {p['ms']} ms: {p['statement']}\n{p['plan']}")


if __name__ == "__main__":
    main()
