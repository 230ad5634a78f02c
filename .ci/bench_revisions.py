"""Search CPU of this checkout against an earlier revision, in one interleaved run.

    python .ci/bench_revisions.py --base a93b0df --sizes 1000,10000 --queries 300

The base revision is checked out beside this one (``git worktree``, under ``--work``). For
each size, each version runs in a process of its own (``PYTHONPATH`` at its own ``core/src``,
only its built-in plugins): it builds a store of the same corpus with its own code (the
schema may differ), then answers queries the parent sends one at a time, timing each
``Memory.search(q, 10, reranker=None)`` — the default search of that version — in its own CPU
time (``time.process_time``) and wall time. The parent sends every query to both versions, in
alternating order, so a swing of the machine's load reaches both alike. numpy's BLAS pool is
held to one thread in both (``OPENBLAS_NUM_THREADS=1``), as ``rankseam bench latency`` does.
Prints a table (p50 and p95 of CPU and wall time, and head / base ratios of the p50s) and
writes ``report.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

WORKER = r"""
import json, sys, time
import rankseam
from rankseam.bench import synthetic

path, size, corpus, config = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
texts = synthetic.locomo_texts(size) if corpus == "locomo" else synthetic.texts(size)
with rankseam.open_memory(path) as memory:
    memory.ingest(list(texts), batch_size=1000)
    memory.maintain_index()
with rankseam.open_memory(path, **({"config": config} if config else {})) as memory:
    print(json.dumps({"ready": memory.stats()["memories"]}), flush=True)
    for line in sys.stdin:
        q = json.loads(line)
        c0, t0 = time.process_time(), time.perf_counter()
        memory.search(q, 10, reranker=None)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        print(json.dumps({"cpu_ms": cpu * 1000, "wall_ms": wall * 1000}), flush=True)
"""


def _worktree(base: str, work: Path) -> Path:
    tree = work / f"rankseam-{base}"
    if not (tree / "core" / "src" / "rankseam").is_dir():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), base],
            check=True,
            capture_output=True,
        )
    return tree


def _start(
    tree: Path, db: Path, size: int, corpus: str, config: dict[str, Any]
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(tree / "core" / "src"),
        "RANKSEAM_LOAD_PLUGINS": "",
        "RANKSEAM_CONFIG": "",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(db), str(size), corpus, json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(db.parent),
    )
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    if ready.get("ready") != size:
        raise SystemExit(f"{tree}: the store holds {ready}, not {size} memories")
    return proc


def _ask(proc: subprocess.Popen[str], query: str) -> dict[str, float]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(query) + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def _stats(values: list[float]) -> dict[str, float]:
    a = np.asarray(values)
    return {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the revision to compare with")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--corpus", choices=("locomo", "synthetic"), default="synthetic")
    parser.add_argument("--work", default=None, help="where the base's worktree goes")
    parser.add_argument("--out", default="bench-out/revisions")
    parser.add_argument(
        "--head-config",
        default="{}",
        help="a configuration (JSON) for this checkout's searches, e.g. "
        '\'{"search": {"distinct_sources": false}}\' [default: none, the default search]',
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "core" / "src"))
    from rankseam.bench import synthetic

    work = Path(args.work or tempfile.gettempdir())
    trees = {"base": _worktree(args.base, work), "head": ROOT}
    queries = (
        synthetic.locomo_queries(args.queries + 10)
        if args.corpus == "locomo"
        else synthetic.queries(args.queries + 10)
    )
    rows = []
    for size in [int(s) for s in args.sizes.split(",") if s]:
        with tempfile.TemporaryDirectory(prefix="rankseam-revisions-") as tmp:
            procs = {
                name: _start(
                    tree,
                    Path(tmp) / f"{name}.sqlite3",
                    size,
                    args.corpus,
                    json.loads(args.head_config) if name == "head" else {},
                )
                for name, tree in trees.items()
            }
            cpu: dict[str, list[float]] = {name: [] for name in procs}
            wall: dict[str, list[float]] = {name: [] for name in procs}
            try:
                for i, q in enumerate(queries):
                    order = list(procs) if i % 2 == 0 else list(reversed(procs))
                    for name in order:
                        answer = _ask(procs[name], q)
                        if i >= 10:  # the first queries warm caches
                            cpu[name].append(answer["cpu_ms"])
                            wall[name].append(answer["wall_ms"])
            finally:
                for proc in procs.values():
                    if proc.stdin is not None:
                        proc.stdin.close()
                    proc.wait(timeout=60)
        row: dict[str, Any] = {"size": size}
        for name in procs:
            row[name] = {"cpu_ms": _stats(cpu[name]), "wall_ms": _stats(wall[name])}
        row["cpu_p50_head_to_base"] = round(
            row["head"]["cpu_ms"]["p50"] / row["base"]["cpu_ms"]["p50"], 3
        )
        row["wall_p50_head_to_base"] = round(
            row["head"]["wall_ms"]["p50"] / row["base"]["wall_ms"]["p50"], 3
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = {
        "base": args.base,
        "head": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "corpus": args.corpus,
        "queries": args.queries,
        "head_config": json.loads(args.head_config),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "rows": rows,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2))
    print(
        "| memories | base CPU p50 / p95 ms | head CPU p50 / p95 ms | CPU p50 head / base "
        "| wall p50 head / base |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        b, h = r["base"]["cpu_ms"], r["head"]["cpu_ms"]
        print(
            f"| {r['size']} | {b['p50']} / {b['p95']} | {h['p50']} / {h['p95']} | "
            f"{r['cpu_p50_head_to_base']} | {r['wall_p50_head_to_base']} |"
        )


if __name__ == "__main__":
    main()
