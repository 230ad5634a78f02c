"""Study of the ANN index build's cost and recall (#40).

What does building the SQLite store's usearch HNSW graph cost per memory, and what recall at
pool 30 does each setting keep? The vectors are those the store holds for the bench's
LoCoMo-derived corpus (``rankseam bench latency --corpus locomo``), embedded by the default
embedder (``hashed``, 256 dimensions, L2-normalised) and cached as ``.npy`` files; the
queries are the corpus's first 200 questions (the bench's ``--queries 200``).

Each setting (``M<connectivity>-ea<expansion_add>-<dtype>-t<threads>-b<block>``; block
``all`` adds every vector in one call, ``merge`` builds the way maintenance does while a
store grows: a first base at 20 000 vectors, then a merge — restore a copy, add the delta,
save — whenever the delta passes 5 % of the base) is built from scratch in this process;
the build's CPU time (``time.process_time``: every thread of the process) and wall time are
reported per memory. Recall is the bench's (``rankseam.bench.whole_search``): for each query
the index proposes ``over_fetch(30) = 120`` candidates at ``expansion_search`` (default
512), they are re-scored with their float32 vectors, and recall@30 is the share of the exact
best 30 (a matrix-vector product over every vector) among those best 30. Settings are
interleaved, round after round, because the machine is shared.

Usage, from the repository root, with the development data (LoCoMo dev)::

    python docs/studies/ann_build_study.py --size 100000 --rounds 2 \\
        M16-ea128-f16-t2-b2000 M16-ea64-f16-t2-b2000 ...
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from usearch.index import Index

from rankseam.bench import synthetic
from rankseam.default_plugins.hashed_embedder import HashedEmbedder

POOL = 30
CANDIDATES = max(4 * POOL, 32)  # rankseam.search.channels.base.over_fetch(POOL)
FIRST_BASE = 20_000  # rankseam.sqlite.ann.MIN_VECTORS
MERGE_SHARE, MERGE_MIN = 0.05, 2_000  # rankseam.sqlite.ann


def vectors(size: int, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """The corpus's ``size`` vectors and 200 query vectors (cached in ``cache``)."""
    cache.mkdir(parents=True, exist_ok=True)
    path, qpath = cache / f"locomo-{size}.npy", cache / "queries-200.npy"
    embedder = HashedEmbedder()
    if not path.exists():
        texts = [r["text"] for r in synthetic.locomo_texts(size)]
        out = np.empty((size, embedder.dimensions), dtype=np.float32)
        for start in range(0, size, 10_000):
            out[start : start + 10_000] = embedder.embed(texts[start : start + 10_000])
        np.save(path, out)
    if not qpath.exists():
        np.save(qpath, np.asarray(embedder.embed(synthetic.locomo_queries(200)), np.float32))
    return np.load(path), np.load(qpath)


def parse(setting: str) -> dict[str, str]:
    m, ea, dtype, threads, block = setting.split("-")
    return {"M": m[1:], "ea": ea[2:], "dtype": dtype, "threads": threads[1:], "block": block[1:]}


def new_index(dims: int, p: dict[str, str]) -> Index:
    return Index(
        ndim=dims,
        metric="ip",
        dtype=p["dtype"],
        connectivity=int(p["M"]),
        expansion_add=int(p["ea"]),
        expansion_search=512,
    )


def build(data: np.ndarray, p: dict[str, str], folder: Path) -> tuple[Index, float, float]:
    """The index of ``data`` built as ``p`` says; (index, CPU s, wall s)."""
    keys = np.arange(len(data), dtype=np.uint64)
    threads = int(p["threads"])
    c0, w0 = time.process_time(), time.perf_counter()
    index = new_index(data.shape[1], p)
    if p["block"] == "all":
        index.add(keys, data, threads=threads)
    elif p["block"] == "merge":
        done = min(FIRST_BASE, len(data))
        index.add(keys[:done], data[:done], threads=threads)
        while done < len(data):
            path = str(folder / "base.usearch")
            index.save(path)
            index = Index.restore(path)
            step = max(MERGE_MIN, int(done * MERGE_SHARE)) + 1
            end = min(len(data), done + step)
            for start in range(done, end, 2_000):
                stop = min(end, start + 2_000)
                index.add(keys[start:stop], data[start:stop], threads=threads)
            done = end
        index.save(str(folder / "base.usearch"))
    else:
        block = int(p["block"])
        for start in range(0, len(data), block):
            index.add(keys[start : start + block], data[start : start + block], threads=threads)
    if p["block"] != "merge":
        index.save(str(folder / "base.usearch"))  # maintenance saves every base it builds
    return index, time.process_time() - c0, time.perf_counter() - w0


def exact_best(data: np.ndarray, queries: np.ndarray) -> list[np.ndarray]:
    """Each query's exact best 120 keys, best first."""
    out = []
    for q in queries:
        scores = data @ q
        top = np.argpartition(-scores, CANDIDATES)[:CANDIDATES]
        out.append(top[np.argsort(-scores[top], kind="stable")])
    return out


def recall(
    index: Index, data: np.ndarray, queries: np.ndarray, best: list[np.ndarray], ef: int
) -> tuple[float, float, float]:
    """(recall@30, recall@120, search CPU µs per query) as the bench measures them."""
    at_pool, at_k, cpu = [], [], 0.0
    index.expansion_search = max(ef, CANDIDATES)
    for q, exact in zip(queries, best, strict=True):
        c0 = time.process_time()
        keys = np.asarray(index.search(q, CANDIDATES, threads=1).keys, dtype=np.int64)
        cpu += time.process_time() - c0
        rescored = keys[np.argsort(-(data[keys] @ q), kind="stable")]
        at_pool.append(len(set(rescored[:POOL]) & set(exact[:POOL])) / POOL)
        at_k.append(len(set(keys) & set(exact)) / CANDIDATES)
    return float(np.mean(at_pool)), float(np.mean(at_k)), cpu / len(queries) * 1e6


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("settings", nargs="+")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ef", default="512", help="expansion_search values, comma-separated")
    ap.add_argument("--vectors-only", action="store_true", help="embed and cache, then stop")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/ann-build-study"))
    args = ap.parse_args(argv)
    data, queries = vectors(args.size, args.cache)
    if args.vectors_only:
        return
    efs = [int(e) for e in args.ef.split(",")]
    best = exact_best(data, queries)
    print(f"{args.size} vectors x {data.shape[1]}, {len(queries)} queries, cpus {os.cpu_count()}")
    print(
        "round setting cpu_us_per_mem wall_us_per_mem load "
        + " ".join(f"r@30(ef{e}) r@120(ef{e}) search_cpu_us(ef{e})" for e in efs)
    )
    for rnd in range(1, args.rounds + 1):
        for setting in args.settings:
            with tempfile.TemporaryDirectory() as tmp:
                index, cpu, wall = build(data, parse(setting), Path(tmp))
                load = os.getloadavg()[0]
                figures = [recall(index, data, queries, best, ef) for ef in efs]
                del index
            cells = " ".join(f"{a:.4f} {b:.4f} {s:.0f}" for a, b, s in figures)
            n = args.size
            print(
                f"{rnd} {setting} {cpu / n * 1e6:.1f} {wall / n * 1e6:.1f} {load:.1f} {cells}",
                flush=True,
            )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main(sys.argv[1:])
