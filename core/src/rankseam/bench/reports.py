"""Report writers: ``report.json`` (with environment and configuration), ``report.md``
(Markdown tables that docs/benchmarks.md includes) and a PNG plot (matplotlib, Agg backend)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from rankseam.bench.paired import paired_markdown
from rankseam.errors import ConfigurationError

__all__ = [
    "SCHEMA",
    "check_plotting",
    "environment",
    "finish_report",
    "latency_markdown",
    "mmr_gate_lines",
    "plot_latency",
    "plot_quality",
    "quality_markdown",
    "write_report",
]

SCHEMA = "rankseam.bench/1"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """Where the numbers were measured (no hostnames, users or secrets)."""
    from rankseam.plugins import get_plugins

    plugins = [
        {"name": p.name, "version": p.version, "status": p.status} for p in get_plugins(all=False)
    ]
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(terse=True),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "packages": {
            name: _version(name)
            for name in ("rankseam", "numpy", "scikit-learn", "matplotlib", "langchain-core")
        },
        "plugins": plugins,
    }


def finish_report(
    body: Mapping[str, Any], *, command: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Wrap a benchmark body with schema, time stamp, environment and the command used."""
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "environment": environment(),
    }
    out.update(body)
    config = dict(out.get("configuration", {}))
    if command is not None:
        config["cli"] = dict(command)
    out["configuration"] = config
    return out


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


_QUALITY_COLUMNS = (
    ("recall@5", "Recall@5"),
    ("recall@10", "Recall@10"),
    ("ndcg@10", "nDCG@10"),
    ("mrr", "MRR"),
    ("dup_slot@5", "dup-slot@5"),
    ("pool_recall", "pool recall"),
    ("calls_per_query", "calls/query"),
)


def quality_markdown(report: Mapping[str, Any]) -> str:
    """Headline table, category-5 line and per-category Recall@5 (LoCoMo) or the BEIR table."""
    config = report["configuration"]
    data = report["dataset"]
    policies: Mapping[str, Mapping[str, float]] = report["policies"]
    details = report.get("details", {})
    parts = []
    embedders = config.get("embedders") or []
    if len(embedders) > 1:
        parts.append(
            f"Embedders side by side: {', '.join(embedders)}; each builds its own stores, and "
            "columns are labelled `EMBEDDER/policy`."
        )
    if data.get("name") == "locomo" or "category_5" in report:
        parts.append(
            f"LoCoMo ({data.get('conversations')} conversations, "
            f"{data.get('turns')} turns + {data.get('observations')} observations; "
            f"{details[next(iter(policies))]['queries'] if policies else 0} questions of "
            f"categories 1–4; limit {config['limit']}, coarse pool {config['pool']}). "
            f"Dropped evidence ids: {data.get('dropped_evidence_ids')}; skipped questions "
            f"without evidence: {data.get('skipped_queries_no_evidence')}."
        )
        header = ["policy", *(title for _, title in _QUALITY_COLUMNS)]
        rows = [[label, *(m[k] for k, _ in _QUALITY_COLUMNS)] for label, m in policies.items()]
        parts.append(_table(header, rows))
        cat5 = report.get("category_5", {})
        n5 = next(iter(cat5.values())).get("queries", 0) if cat5 else 0
        if n5:
            parts.append(f"Category 5 (adversarial, {n5} questions), on its own:")
            rows = [[label, *(m[k] for k, _ in _QUALITY_COLUMNS)] for label, m in cat5.items()]
            parts.append(_table(header, rows))
        by_cat = report.get("by_category", {})
        if by_cat:
            from rankseam.bench.datasets import CATEGORY_NAMES

            cats = sorted({c for per in by_cat.values() for c in per}, key=int)
            parts.append("Recall@5 by question category:")
            header = ["policy", *(f"{c} {CATEGORY_NAMES.get(int(c), '')}".strip() for c in cats)]
            rows = [
                [label, *(per.get(c, {}).get("recall@5") for c in cats)]
                for label, per in by_cat.items()
            ]
            parts.append(_table(header, rows))
    else:
        parts.append(
            f"{data.get('name')} ({data.get('documents')} documents, "
            f"{data.get('queries')} queries; "
            f"limit {config['limit']}, coarse pool {config['pool']})."
        )
        # recall over the hits a search returns: at most `limit` of them, so with a limit under
        # 100 the "recall@100" detail is recall@limit, and the column says so
        deep = f"Recall@{min(100, int(config['limit']))}"
        header = ["policy", "nDCG@10", "Recall@5", deep, "MRR", "pool recall"]
        header.append("calls/query")
        rows = [
            [
                label,
                m["ndcg@10"],
                m["recall@5"],
                details.get(label, {}).get("recall@100"),
                m["mrr"],
                m["pool_recall"],
                m["calls_per_query"],
            ]
            for label, m in policies.items()
        ]
        parts.append(_table(header, rows))
    parts.extend(paired_markdown(report))
    parts.extend(mmr_gate_lines(report))
    timing = report.get("timing", {})
    env = report.get("environment", {})
    if timing and env:
        by = timing.get("ingest_s_by_embedder") or {}
        ingest = ", ".join(f"{k} {v:.0f} s" for k, v in by.items()) or (
            f"{timing.get('ingest_s', 0):.0f} s"
        )
        parts.append(
            f"Run time {timing.get('elapsed_s', 0):.0f} s "
            f"(ingest {ingest}) on {env['cpu_count']} CPUs, Python {env['python']}."
        )
    return "\n\n".join(parts) + "\n"


def mmr_gate_lines(report: Mapping[str, Any]) -> list[str]:
    """One line per coarse column: its dup-slot@5 against HotMem's gate, and whether MMR is
    advised (no ``mmr_gate`` in the report: no line)."""
    gate = report.get("mmr_gate")
    if not gate:
        return []
    share = f"{gate['threshold']:.0%}"
    coarse = gate["coarse"]
    if not coarse:
        return [
            f"HotMem's {share} MMR gate: no coarse column in this run (add `none` to --rerank)."
        ]
    lines = []
    for label, entry in coarse.items():
        prefix = "" if label == "none" else f"{label}: "
        verdict = "MMR advised" if entry["mmr_advised"] else "MMR not advised"
        lines.append(
            f"{prefix}coarse dup-slot@5 {entry['dup_slot@5']:.3f} vs HotMem's {share} gate: "
            f"{verdict}."
        )
    return lines


_CALL_HEADERS = ("call p50 ms", "call p95 ms", "ratio")


def _timing_row(first: Any, second: Any, m: Mapping[str, Any], ratio_key: str) -> list[Any]:
    """p50/p95, the reranker's own call (— where none ran) and the ratio, for one table row."""
    calls = [m.get("call_p50_ms", "—"), m.get("call_p95_ms", "—")]
    return [first, second, m["p50_ms"], m["p95_ms"], *calls, m.get(ratio_key)]


def latency_markdown(report: Mapping[str, Any]) -> str:
    """Rerank-stage table, whole-search table, ingest throughput and the reference comparison."""
    parts = []
    stage = report.get("rerank_stage", {})
    if stage:
        parts.append(
            "Rerank stage alone (`rerank_pool`: fetching the pool's stored vectors, building "
            "the candidate views, the reranker's call, validating its ranks and the trace; "
            f"synthetic candidates with {report['configuration'].get('dimensions')}-dim "
            f"vectors, limit {report['configuration'].get('limit')}; rerankers interleaved, "
            "each timed call after an untimed `gc.collect(1)`). `call` = the reranker's own "
            "`rerank` call inside the stage (the trace's `latency_ms`); "
            "ratio = stage p50 / stage p50 of `identity`:"
        )
        rows = [
            _timing_row(name, n, m, "ratio_to_identity")
            for name, per_n in stage.items()
            for n, m in per_n.items()
        ]
        headers = ["reranker", "candidates", "stage p50 ms", "stage p95 ms", *_CALL_HEADERS]
        parts.append(_table(headers, rows))
    skipped = report.get("skipped_rerankers", {})
    if skipped:
        parts.append(
            "Not timed: " + "; ".join(f"`{name}` ({why})" for name, why in skipped.items()) + "."
        )
    search = report.get("whole_search", {})
    if search:
        parts.append(
            "Whole search (`Memory.search`), by store size; `call` = the reranker's own call "
            "inside the search (the trace's `latency_ms`); ratio = p50 / p50 of `none`; "
            "`CPU` = the process's CPU time per search (`time.process_time`), CPU ratio = CPU "
            "p50 / CPU p50 of `none`; numpy's BLAS threads: "
            f"{report['configuration'].get('blas_threads') or 'numpy default'}:"
        )
        rows = [
            [
                *_timing_row(size, name, m, "ratio_to_none"),
                m.get("cpu_p50_ms", "—"),
                m.get("cpu_mean_ms", "—"),
                m.get("cpu_ratio_to_none", "—"),
            ]
            for size, per_policy in search.items()
            for name, m in per_policy.items()
            if isinstance(m, Mapping) and "p50_ms" in m
        ]
        headers = ["memories", "policy", "p50 ms", "p95 ms", *_CALL_HEADERS]
        headers += ["CPU p50 ms", "CPU mean ms", "CPU ratio"]
        parts.append(_table(headers, rows))
        rows = [
            [
                size,
                m.get("ingest_per_s"),
                m.get("peak_rss_mib_ingest"),
                m.get("peak_rss_mib_search"),
                m.get("open_ms", "—"),
                m.get("first_search_ms", "—"),
                m.get("warm_read_s", "—"),
                m.get("none_to_floor", "—"),
                m.get("cpu_none_to_floor", "—"),
            ]
            for size, m in search.items()
        ]
        parts.append(
            "`floor` = a numpy cosine over all vectors plus the same FTS5 query, fused by RRF "
            "(the least a search can cost); `bm25s` = the same with bm25s in place of FTS5 "
            "(where bm25s is installed); none / floor = p50 ratio, of wall time and of CPU "
            "time (the same searches, interleaved). `NAME [default pool]`: with numpy's own "
            "BLAS pool, each one's searches in a block (what idle BLAS threads spin after a "
            "search is billed to the next of its kind). Open and first search: "
            "`open_memory` and the first `search` of a fresh process; then the store's files "
            "are read once (warm read) so the timed searches meet the file cache of a store in "
            "use."
        )
        parts.append(
            _table(
                [
                    "memories",
                    "ingest memories/s",
                    "peak RSS MiB (ingest)",
                    "peak RSS MiB (search)",
                    "open ms",
                    "first search ms",
                    "warm read s",
                    "none / floor",
                    "none / floor CPU",
                ],
                rows,
            )
        )
    recalls = {size: m["ann_recall"] for size, m in search.items() if m.get("ann_recall")}
    if recalls:
        parts.append(
            "ANN index against exact search (vector channel alone, the corpus's queries): "
            "recall@pool = share of the exact best `pool` among the ANN's best `pool`; "
            "recall@k over the channel's whole list:"
        )
        rows = [
            [
                size,
                r["recall_at_pool"],
                r["recall_at_k"],
                r["ann_p50_ms"],
                r["exact_p50_ms"],
            ]
            for size, r in recalls.items()
        ]
        parts.append(
            _table(["memories", "recall@pool", "recall@k", "ANN p50 ms", "exact p50 ms"], rows)
        )
    disabled = report.get("disabled_path")
    if disabled:
        parts.append(
            "Disabled path (`reranker=None`) vs `identity`: "
            + ", ".join(
                f"{k}: {_fmt(v)}" for k, v in disabled.items() if isinstance(v, int | float)
            )
        )
    to_floor = report.get("floor_ratios")
    if to_floor:
        parts.append(
            "Default search (`none`) to the floor, p50s of the same interleaved searches: "
            + ", ".join(f"{k}: {_fmt(v)}" for k, v in to_floor.items())
        )
    ref = report.get("reference_mmr")
    if ref:
        if ref.get("skipped"):
            parts.append(f"Reference MMR (langchain-core): not run — {ref['skipped']}.")
        else:
            rows = [
                [n, m["rankseam_p50_ms"], m["langchain_p50_ms"], m["ratio"], m["agreement"]]
                for n, m in ref["by_candidates"].items()
            ]
            parts.append(
                f"`mmr` vs langchain-core `maximal_marginal_relevance` on identical inputs "
                f"(λ={ref.get('lambda')}, k={ref.get('k')}; ratio = rankseam / langchain; "
                "agreement = share of trials with identical selections):"
            )
            parts.append(
                _table(
                    ["candidates", "rankseam p50 ms", "langchain p50 ms", "ratio", "agreement"],
                    rows,
                )
            )
    env = report.get("environment", {})
    if env:
        parts.append(f"Measured on {env.get('cpu_count')} CPUs, Python {env.get('python')}.")
    return "\n\n".join(parts) + "\n"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_quality(report: Mapping[str, Any], path: Path) -> Path:
    """Left: Recall@5 / Recall@10 / nDCG@10 / pool recall per policy. Right: Recall@5 against
    dup-slot@5 (up and left is better)."""
    plt = _pyplot()
    policies: Mapping[str, Mapping[str, float]] = report["policies"]
    labels = list(policies)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    keys = ["recall@5", "recall@10", "ndcg@10", "pool_recall"]
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        xs = [j + i * width for j in range(len(labels))]
        ax1.bar(xs, [policies[label][key] for label in labels], width, label=key)
    ax1.set_xticks([j + 0.4 - width / 2 for j in range(len(labels))], labels, rotation=20)
    ax1.set_ylim(0, 1)
    ax1.set_title(f"{report['dataset']['name']}: quality per policy")
    ax1.legend(fontsize=8)
    points: dict[tuple[float, float], list[str]] = {}
    for label in labels:
        m = policies[label]
        points.setdefault((m["dup_slot@5"], m["recall@5"]), []).append(label)
    for (x, y), names in points.items():  # policies with equal figures share one point
        ax2.scatter(x, y)
        ax2.annotate(
            " = ".join(names), (x, y), fontsize=8, xytext=(4, 4), textcoords="offset points"
        )
    ax2.set_xlabel("dup-slot@5 (lower is better)")
    ax2.set_ylabel("Recall@5 (higher is better)")
    ax2.set_title("Recall@5 vs duplicate slots")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_latency(report: Mapping[str, Any], path: Path) -> Path:
    """Left: rerank-stage p50/p95 per reranker and pool size. Right: whole-search p50 by size."""
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    stage = report.get("rerank_stage", {})
    labels, p50, p95 = [], [], []
    for name, per_n in stage.items():
        for n, m in per_n.items():
            labels.append(f"{name}@{n}")
            p50.append(m["p50_ms"])
            p95.append(m["p95_ms"])
    xs = list(range(len(labels)))
    ax1.bar([x - 0.2 for x in xs], p50, 0.4, label="p50")
    ax1.bar([x + 0.2 for x in xs], p95, 0.4, label="p95")
    ax1.set_xticks(xs, labels, rotation=30, fontsize=8)
    ax1.set_ylabel("ms")
    ax1.set_yscale("log")
    ax1.set_title("rerank stage")
    ax1.legend()
    search = report.get("whole_search", {})
    sizes = list(search)
    names = sorted({n for per in search.values() for n, m in per.items() if isinstance(m, Mapping)})
    for name in names:
        ys = [search[s].get(name, {}).get("p50_ms") for s in sizes]
        ax2.plot([int(s) for s in sizes], ys, marker="o", label=f"{name} p50")
    ax2.set_xscale("log")
    ax2.set_xlabel("memories")
    ax2.set_ylabel("ms")
    ax2.set_title("whole search")
    if names:
        ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def check_plotting() -> None:
    """Raise a fix-it error when matplotlib (the ``bench`` extra) is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            "report.png needs matplotlib: pip install 'rankseam[bench]', or pass --no-plot to "
            "write report.json and report.md only"
        ) from None


def write_report(
    report: Mapping[str, Any], out_dir: str | Path, *, plot: bool = True
) -> dict[str, Path]:
    """Write ``report.json``, ``report.md`` and (``plot``) ``report.png`` into ``out_dir``."""
    if plot:
        check_plotting()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "markdown": out / "report.md"}
    paths["json"].write_text(json.dumps(report, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    quality = report.get("kind") == "quality"
    markdown = quality_markdown(report) if quality else latency_markdown(report)
    paths["markdown"].write_text(markdown, encoding="utf-8")
    if plot:
        paths["plot"] = out / "report.png"
        (plot_quality if quality else plot_latency)(report, paths["plot"])
    return paths
