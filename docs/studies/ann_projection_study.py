"""Study: would a graph over PCA-projected vectors keep the recall (#40)?

A graph's build cost grows with the vectors' width, so a graph over fewer dimensions builds
for less. This bounds what it could find: for each question, the exact best ``K`` vectors in
the projected space (what a perfect graph over them would propose) are re-scored with the
stored vectors, and recall@30 is the share of the exact best 30 among the best 30 of those.
A real graph loses more on top. The vectors and questions are those of
``ann_build_study.py`` (cached there); the projection is trained on 20 000 of them.

Usage, from the repository root, with the development data (LoCoMo dev)::

    OPENBLAS_NUM_THREADS=1 python docs/studies/ann_projection_study.py --size 100000 \\
        --dims 32,64,96,128 --candidates 120,240,480
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ann_build_study import POOL, vectors


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--dims", default="32,64,96,128")
    ap.add_argument("--candidates", default="120,240,480")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/ann-build-study"))
    args = ap.parse_args(argv)
    data, queries = vectors(args.size, args.cache)
    best = [set(np.argpartition(-(data @ q), POOL)[:POOL].tolist()) for q in queries]
    train = data[np.random.default_rng(0).choice(len(data), 20_000, replace=False)]
    _u, singular, axes = np.linalg.svd(train - data.mean(axis=0), full_matrices=False)
    explained = singular**2 / (singular**2).sum()
    sizes = [int(c) for c in args.candidates.split(",")]
    print("| dimensions | variance kept | " + " | ".join(f"recall@30 of {k}" for k in sizes) + " |")
    print("|---" * (2 + len(sizes)) + "|")
    for dims in (int(d) for d in args.dims.split(",")):
        projection = axes[:dims].T
        projected = data @ projection
        row = []
        for k in sizes:
            recalls = []
            for q, exact in zip(queries, best, strict=True):
                proposed = np.argpartition(-(projected @ (q @ projection)), k)[:k]
                found = proposed[np.argsort(-(data[proposed] @ q))[:POOL]]
                recalls.append(len(set(found.tolist()) & exact) / POOL)
            row.append(f"{np.mean(recalls):.3f}")
        print(f"| {dims} | {explained[:dims].sum():.3f} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
