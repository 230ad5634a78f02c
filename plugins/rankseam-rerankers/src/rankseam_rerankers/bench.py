"""Latency of the ``rerankers`` reranker per candidate, through the real seam.

    python -m rankseam_rerankers.bench                         # tiny random model (tests' shape)
    python -m rankseam_rerankers.bench --shape minilm-l6       # MiniLM-L6 compute, random weights
    python -m rankseam_rerankers.bench --model /models/ce --model-type cross-encoder

A store of synthetic memories of ``--words`` words is searched with the reranker at each pool
size (``pool = n``; one untimed warm-up); the reranker's own call time (the trace's
``latency_ms``, measured by the seam) gives p50/p95 and a least-squares fit
``t(n) = t0 + n * t_pair``. ``--shape`` builds a random-weight BERT cross-encoder of that shape
in a temporary folder (nothing is downloaded): the same compute as the real model of that
shape, meaningless scores. Prints a Markdown table and writes ``report.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import rankseam
from rankseam_rerankers import make_reranker
from rankseam_rerankers.tiny import SHAPES, WORDS, build_cross_encoder

QUERY = "when is the conference in lisbon"
_SHAPE_KEYS = ("layers", "hidden", "heads", "ffn")


def _texts(n: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=words)) for _ in range(n)]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares ``t = a + b * n`` over (n, t) points."""
    ns = [float(n) for n, _ in points]
    ts = [t for _, t in points]
    mean_n, mean_t = statistics.fmean(ns), statistics.fmean(ts)
    var = sum((n - mean_n) ** 2 for n in ns)
    b = sum((n - mean_n) * (t - mean_t) for n, t in zip(ns, ts, strict=True)) / var
    return mean_t - b * mean_n, b


def _tokens_per_pair(reranker: Any, texts: list[str]) -> float | None:
    tokenizer = getattr(reranker.ranker, "tokenizer", None)
    if tokenizer is None:
        return None
    batch = tokenizer([(QUERY, text) for text in texts], truncation=True)
    return statistics.fmean(len(ids) for ids in batch["input_ids"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rankseam-rerankers-bench-") as tmp:
        if args.model:
            model, model_type, what = args.model, args.model_type, args.model
        else:
            model = str(build_cross_encoder(Path(tmp) / args.shape, shape=args.shape))
            model_type, what = "cross-encoder", f"random-weight BERT, shape {args.shape}"
        options: dict[str, Any] = {"model": model}
        if model_type:
            options["model_type"] = model_type
        if args.batch_size:
            options["batch_size"] = args.batch_size
        t0 = time.perf_counter()
        reranker: Any = make_reranker(options, None)
        load_s = time.perf_counter() - t0
        rows = []
        with rankseam.open_memory(Path(tmp) / "bench.sqlite3") as memory:
            for text in _texts(max(args.pools), args.words, seed=0):
                memory.add(text)
            for n in args.pools:

                def call_ms(n: int = n) -> float:
                    result = memory.search(QUERY, min(10, n), pool=n, reranker=reranker)
                    rerank = result.trace.rerank
                    if rerank is None or rerank.candidate_count != n:
                        raise RuntimeError(f"the search did not rerank a pool of {n}: {rerank}")
                    return rerank.latency_ms

                call_ms()  # warm-up
                times = [call_ms() for _ in range(args.repeats)]
                p50 = _percentile(times, 0.5)
                rows.append(
                    {
                        "candidates": n,
                        "p50_ms": round(p50, 3),
                        "p95_ms": round(_percentile(times, 0.95), 3),
                        "p50_ms_per_candidate": round(p50 / n, 4),
                    }
                )
        intercept, slope = _fit([(r["candidates"], r["p50_ms"]) for r in rows])
        tokens = _tokens_per_pair(reranker, _texts(20, args.words, seed=1))
    import torch

    return {
        "model": what,
        "descriptor": dict(reranker.descriptor),
        "shape": None
        if args.model
        else dict(zip(("layers", "hidden", "heads", "ffn"), SHAPES[args.shape], strict=True)),
        "words_per_candidate": args.words,
        "tokens_per_pair": None if tokens is None else round(tokens, 1),
        "repeats": args.repeats,
        "load_s": round(load_s, 3),
        "rows": rows,
        "fit": {"t0_ms": round(intercept, 3), "ms_per_candidate": round(slope, 4)},
        "environment": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"model: {report['model']}; {report['words_per_candidate']} words per candidate "
        f"(~{report['tokens_per_pair']} tokens per query+candidate pair); "
        f"{report['repeats']} repeats; torch threads {report['environment']['torch_threads']}; "
        f"load average {report['environment']['load_average']}",
        "",
        "| candidates | p50 ms | p95 ms | p50 ms / candidate |",
        "|---:|---:|---:|---:|",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['candidates']} | {r['p50_ms']} | {r['p95_ms']} | {r['p50_ms_per_candidate']} |"
        )
    fit = report["fit"]
    lines += ["", f"fit: t(n) = {fit['t0_ms']} ms + n x {fit['ms_per_candidate']} ms"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rankseam_rerankers.bench", description=__doc__)
    parser.add_argument("--model", help="a model the library can load (default: --shape)")
    parser.add_argument("--model-type", default=None, help="the library's model_type")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--pools", default="10,30,50,100", help="candidate counts, e.g. 10,30")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--words", type=int, default=32, help="words per candidate text")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads for this run (default: torch's, one per core)",
    )
    parser.add_argument("--out", default="bench-out/rerankers", help="report folder")
    args = parser.parse_args(argv)
    args.pools = [int(p) for p in args.pools.split(",") if p.strip()]
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    report = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(markdown(report))
    print(f"wrote {out / 'report.json'}")


if __name__ == "__main__":
    main()
