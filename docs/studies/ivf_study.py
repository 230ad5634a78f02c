"""Study: could an inverted-file index (IVF, k-means lists) replace the HNSW graph (#40)?

The ANN build target is 100 µs of CPU per memory at 100 000 memories with recall@30 ≥ 0.99.
An IVF index builds for a fraction of that (k-means over a sample, then one product per
vector to assign it), so this asks what recall it keeps. The vectors and queries are those of
``ann_build_study.py`` (the bench's LoCoMo-derived corpus, ``hashed`` embedder, 256
dimensions; cached as ``.npy`` files there). ``lists`` centroids are trained by spherical
k-means on ``sample`` vectors for ``iters`` rounds; every vector goes to its nearest
centroid; a query scores the vectors of its ``nprobe`` nearest lists exactly and keeps the
best 120 (``over_fetch(30)``). Recall@30 is the share of the exact best 30 among the best 30
found, as ``ann_build_study.py`` measures it. CPU is ``time.process_time`` with numpy's BLAS
pool held to one thread (run it under ``OPENBLAS_NUM_THREADS=1``).

Usage, from the repository root, with the development data (LoCoMo dev)::

    OPENBLAS_NUM_THREADS=1 python docs/studies/ivf_study.py --size 100000 --lists 316 \\
        --iters 8 --sample 30000 --nprobe 8,16,32,48,64,96
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ann_build_study import CANDIDATES, POOL, exact_best, vectors


def kmeans(data: np.ndarray, lists: int, iters: int, sample: int, seed: int) -> np.ndarray:
    """Spherical k-means centroids (unit length) trained on a random sample of ``data``."""
    rng = np.random.default_rng(seed)
    train = data[rng.choice(len(data), min(sample, len(data)), replace=False)]
    centroids = train[rng.choice(len(train), lists, replace=False)].copy()
    for _ in range(iters):
        nearest = np.argmax(train @ centroids.T, axis=1)
        for j in range(lists):
            members = train[nearest == j]
            if len(members):
                total = members.sum(axis=0)
                centroids[j] = total / (np.linalg.norm(total) + 1e-12)
    return centroids


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--lists", type=int, default=316)
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--sample", type=int, default=30_000)
    ap.add_argument("--nprobe", default="8,16,32,48,64,96")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/ann-build-study"))
    args = ap.parse_args(argv)
    data, queries = vectors(args.size, args.cache)
    best = exact_best(data, queries)

    c0 = time.process_time()
    centroids = kmeans(data, args.lists, args.iters, args.sample, seed=0)
    assigned = np.concatenate(
        [np.argmax(data[s : s + 10_000] @ centroids.T, axis=1) for s in range(0, len(data), 10_000)]
    )
    order = np.argsort(assigned, kind="stable")
    grouped = data[order]  # each list's vectors side by side
    bounds = np.searchsorted(assigned[order], np.arange(args.lists + 1))
    build_us = (time.process_time() - c0) / len(data) * 1e6
    sizes = np.diff(bounds)
    print(
        f"{args.lists} lists ({args.iters} rounds on {args.sample} vectors): build "
        f"{build_us:.1f} µs CPU per memory; list sizes mean {sizes.mean():.0f}, max {sizes.max()}"
    )
    print("| nprobe | recall@30 | search CPU ms | vectors scored (mean) |")
    print("|---|---|---|---|")
    for nprobe in (int(n) for n in args.nprobe.split(",")):
        recalls, cpu, scored = [], 0.0, 0
        for q, exact in zip(queries, best, strict=True):
            c1 = time.process_time()
            probe = np.argpartition(-(centroids @ q), nprobe)[:nprobe]
            keys = np.concatenate([order[bounds[p] : bounds[p + 1]] for p in probe])
            rows = np.concatenate([grouped[bounds[p] : bounds[p + 1]] for p in probe])
            scores = rows @ q
            top = np.argpartition(-scores, min(CANDIDATES, len(scores) - 1))[:CANDIDATES]
            found = keys[top[np.argsort(-scores[top], kind="stable")]]
            cpu += time.process_time() - c1
            scored += len(keys)
            recalls.append(len(set(found[:POOL]) & set(exact[:POOL])) / POOL)
        n = len(queries)
        print(f"| {nprobe} | {np.mean(recalls):.4f} | {cpu / n * 1e3:.2f} | {scored // n} |")


if __name__ == "__main__":
    main(sys.argv[1:])
