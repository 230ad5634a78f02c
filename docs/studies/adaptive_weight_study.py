"""Offline study: a query-adaptive weight for the hashed vector channel (#15).

The vector weight of the default fusion is one number per embedder (0.3 for `hashed`). This
script asks whether a weight that follows a query-performance predictor of the lexical list
lifts the default above the better single channel by 0.01 on both development sets:

- ``gap``: how far the lexical list's 10th score falls below its best, ``(s1 - s10) / s1``
  (a clear lexical winner: high);
- ``agree``: the share of the lexical top 10 also in the vector top 10;

each used as it is (``up``: the vector counts more when the predictor is high) or as one minus
it (``down``), times a base weight of 0.3 or 0.5; and the vector channel only re-scoring the
memories the lexical channel found. It reads the channel lists as ``fusion_study.py`` does
(same stores, same checks: its ``default`` and ``lexical-only`` rows equal the bench's).

Usage, from the repository root, on the development data only::

    for ds in locomo beir:../shared/data/scifact-train@train; do
      rankseam bench quality --dataset $ds --rerank none --stores /tmp/stores --max-queries 1
    done
    python docs/studies/adaptive_weight_study.py --stores /tmp/stores
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from fusion_study import DATASETS, _rows, _scaled, convex, evaluate


def gap(row: dict[str, Any], k: int = 10) -> float:
    scores = [s for _m, s in row["lex"][:k]]
    if len(scores) < 2 or scores[0] <= 0:
        return 1.0 if scores else 0.0
    return (scores[0] - scores[-1]) / scores[0]


def agree(row: dict[str, Any], k: int = 10) -> float:
    lexical = {m for m, _s in row["lex"][:k]}
    vector = {m for m, _s in row["vec"][:k]}
    return len(lexical & vector) / k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", type=Path, required=True)
    args = parser.parse_args()
    data = {ds: _rows(args.stores, ds, "hashed") for ds in DATASETS}

    def line(label: str, fuse: Callable[[dict[str, Any]], dict[str, float]]) -> None:
        a = evaluate(*data["locomo"], fuse, "locomo")
        b = evaluate(*data["scifact"], fuse, "scifact")
        print(f"| {label} | {a['recall@5']:.4f} | {b['ndcg@10']:.4f} |", flush=True)

    print("| variant | LoCoMo R@5 | SciFact nDCG@10 |\n|---|---|---|")
    line("default (vector weight 0.3)", lambda r: convex(r, 0.3, "unit"))
    line("lexical-only", lambda r: convex(r, 0, "unit"))
    for base in (0.3, 0.5):
        for name, predictor in (("gap", gap), ("agree", agree)):
            for mode in ("up", "down"):

                def fuse(r: dict[str, Any], b: float = base, p: Any = predictor, m: str = mode):
                    c = p(r)
                    return convex(r, b * (c if m == "up" else 1 - c), "unit")

                line(f"{base} × {name} ({mode})", fuse)
    for w in (0.3, 0.5, 1.0):

        def rescore(r: dict[str, Any], w: float = w) -> dict[str, float]:
            out = convex(r, 0, "unit")
            for m, s in _scaled(r["vec"], "unit").items():
                if m in out:
                    out[m] += w * s
            return out

        line(f"vector re-scores lexical hits only, weight {w}", rescore)


if __name__ == "__main__":
    main()
