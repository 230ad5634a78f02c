"""The re-embedding benchmark (``rankseam bench reembed``; docs/store.md, "Re-embedding").

Two parts, each optional:

- **quality during a re-embed** (``--dataset``): each collection is ingested with the
  ``--from`` embedder and re-embedded into the ``--to`` space in slices (``max_memories``)
  up to each checkpoint (share of the live memories with a vector in the new space). At each
  checkpoint the dev queries are searched twice, with no reranker: as the store answers while
  the re-embed runs (the old space, by the stated rule) and as it would answer if it switched
  early (the new space, partly filled). At 100 % the re-embed completes with
  ``switch=True`` and the switched Memory answers; it is compared with a store of the same
  records embedded with ``--to`` at ingest (the figures must be the same to the digit).
- **live** (``--live-size N``): a store of N memories (LoCoMo dev memories, then memories
  spliced from their turns) written with ``--from`` is re-embedded into ``--live-to`` (default
  ``--to``) in a background thread with ``switch=True``, while a search loop and a writer run
  beside it on the same Memory. Reported: failed searches, writes lost (a written id missing,
  or a live memory without a vector in the new space at the end), re-embed throughput (wall
  and process CPU), search latency per phase.
"""

from __future__ import annotations

import itertools
import json
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rankseam.bench.datasets import HEADLINE_CATEGORIES, Collection, Dataset
from rankseam.bench.metrics import mean, percentile
from rankseam.bench.policies import parse_policy
from rankseam.bench.quality import score_query
from rankseam.errors import ConfigurationError

__all__ = ["EmbedderSpec", "parse_embedder", "reembed_markdown", "run_reembed", "write_reembed"]

#: Checkpoints of the quality part: share of live memories with a vector in the new space.
DEFAULT_CHECKPOINTS = (0, 25, 50, 75, 100)
_METRICS = ("recall@5", "recall@10", "ndcg@10")


class EmbedderSpec:
    """``NAME[:KEY=VALUE...]``: an embedder and its options (``hashed:dimensions=512``)."""

    def __init__(self, spec: str) -> None:
        parsed = parse_policy(spec)
        if parsed.reranker is None:
            raise ConfigurationError(f"embedder spec {spec!r} names no embedder")
        self.label = spec
        self.name = parsed.reranker
        self.options = dict(parsed.options)

    def kwargs(self) -> dict[str, Any]:
        """``open_memory`` keyword arguments that make this the active embedder."""
        out: dict[str, Any] = {"embedder": self.name, "reranker": None}
        if self.options:
            out["config"] = {"embedders": {self.name: self.options}}
        return out


def parse_embedder(spec: str) -> EmbedderSpec:
    return EmbedderSpec(spec)


def _open(target: str, spec: EmbedderSpec) -> Any:
    import rankseam

    return rankseam.open_memory(target, **spec.kwargs())


def _score(memory: Any, collection: Collection, kind: str, limit: int, pool: int) -> list[dict]:
    group_of = collection.group_of()
    rows = []
    for query in collection.queries:
        if kind == "locomo" and query.category not in HEADLINE_CATEGORIES:
            continue
        result = memory.search(query.text, limit=limit, reranker=None, pool=pool)
        hits = [group_of.get(h.ref.memory_id, h.ref.memory_id) for h in result.hits]
        coarse = [group_of.get(c.ref.memory_id, c.ref.memory_id) for c in result.trace.coarse]
        rows.append({k: score_query(hits, coarse, query.relevance)[k] for k in _METRICS})
    return rows


def _quality(
    dataset: Dataset,
    source: EmbedderSpec,
    target: EmbedderSpec,
    checkpoints: Sequence[int],
    batch_size: int,
    workdir: Path,
    echo: Callable[[str], None],
) -> dict[str, Any]:
    limit = 100 if dataset.kind == "beir" else 10
    pool = max(30, limit)
    answering: dict[int, list[dict]] = {c: [] for c in checkpoints}
    early: dict[int, list[dict]] = {c: [] for c in checkpoints}
    at_ingest: list[dict] = []
    embed_s = embed_cpu = 0.0
    embedded = 0
    for index, collection in enumerate(dataset.collections):
        path = str(workdir / f"q{index}.sqlite3")
        reference = str(workdir / f"q{index}-reference.sqlite3")
        records = [r.to_ingest() for r in collection.records]
        with _open(reference, target) as ref:
            ref.ingest(records)
            at_ingest += _score(ref, collection, dataset.kind, limit, pool)
        memory = _open(path, source)
        view = None
        try:
            memory.ingest(records)
            view = _open(path, target)  # searches the new space as it fills
            new = view.embedder
            live = memory.stats()["memories"]
            for checkpoint in checkpoints:
                goal = live * checkpoint // 100
                have = memory.stats()["vectors_by_space"].get(new.descriptor.key, 0)
                wall, cpu = time.perf_counter(), time.process_time()
                if checkpoint >= 100:
                    report = memory.reembed(new, batch_size=batch_size, switch=True)
                    assert report.switched and report.complete, report
                elif goal > have:
                    memory.reembed(new, batch_size=batch_size, max_memories=goal - have)
                embed_s += time.perf_counter() - wall
                embed_cpu += time.process_time() - cpu
                answering[checkpoint] += _score(memory, collection, dataset.kind, limit, pool)
                early[checkpoint] += _score(view, collection, dataset.kind, limit, pool)
            embedded += live
        finally:
            memory.close()
            if view is not None:
                view.close()
        echo(f"{dataset.name}: collection {index + 1}/{len(dataset.collections)} done")

    def agg(rows: list[dict]) -> dict[str, float]:
        return {k: round(mean([r[k] for r in rows]), 6) for k in _METRICS}

    final = agg(answering[max(checkpoints)])
    reference_figures = agg(at_ingest)
    return {
        "dataset": dataset.name,
        "kind": dataset.kind,
        "memories": dataset.record_count,
        "queries": len(at_ingest),
        "limit": limit,
        "pool": pool,
        "checkpoints": [
            {
                "percent": c,
                "answering": agg(answering[c]),
                "new_space_early": agg(early[c]),
            }
            for c in checkpoints
        ],
        "embedded_at_ingest": reference_figures,
        "final_equals_ingest": {
            k: round(final[k], 3) == round(v, 3) for k, v in reference_figures.items()
        },
        "reembed_wall_s": round(embed_s, 3),
        "reembed_cpu_s": round(embed_cpu, 3),
        "reembed_memories": embedded,
    }


def _live(
    size: int,
    source: EmbedderSpec,
    target: EmbedderSpec,
    batch_size: int,
    write_every_s: float,
    workdir: Path,
    echo: Callable[[str], None],
) -> dict[str, Any]:
    from rankseam.bench.synthetic import locomo_queries, locomo_texts

    path = str(workdir / "live.sqlite3")
    queries = locomo_queries(200)
    memory = _open(path, source)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        memory.ingest(locomo_texts(size), batch_size=2000)
        memory.maintain_index()
        ingest = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
        echo(f"live: {size} memories ingested with {source.label} in {ingest['wall_s']:.1f} s")
        with _open(path, target) as view:
            new = view.embedder
        old_key, new_key = memory.embedder.descriptor.key, new.descriptor.key
        stop = threading.Event()
        failures: list[str] = []
        searches: list[tuple[str, float]] = []  # (phase, ms)
        written: list[str] = []
        phase = ["before"]
        progress: list[tuple[float, int, int]] = []
        started = time.perf_counter()

        def search_loop() -> None:
            for query in itertools.cycle(queries):
                if stop.is_set():
                    return
                at = phase[0]
                s0 = time.perf_counter()
                try:
                    result = memory.search(query, limit=10, reranker=None)
                    if not result.hits:
                        failures.append(f"no hit for {query!r}")
                except Exception as exc:  # counted: the benchmark's verdict
                    failures.append(f"{type(exc).__name__}: {exc}")
                searches.append((at, (time.perf_counter() - s0) * 1000.0))

        def writer() -> None:
            for i in itertools.count():
                if stop.is_set():
                    return
                mid = f"live-write-{i}"
                text = f"{queries[i % len(queries)]} (written live, number {i})"
                try:
                    memory.add(text, memory_id=mid)
                    written.append(mid)
                except Exception as exc:  # counted: the benchmark's verdict
                    failures.append(f"write {mid}: {type(exc).__name__}: {exc}")
                time.sleep(write_every_s)

        threads = [threading.Thread(target=search_loop), threading.Thread(target=writer)]
        for t in threads:
            t.start()
        time.sleep(5.0)  # searches and writes before the re-embed starts
        phase[0] = "during"
        w0, c0 = time.perf_counter(), time.process_time()
        report = memory.reembed(
            new,
            batch_size=batch_size,
            switch=True,
            progress=lambda p: progress.append(
                (time.perf_counter() - started, p.embedded, p.remaining)
            ),
        )
        reembed = {
            "wall_s": time.perf_counter() - w0,
            "cpu_s": time.process_time() - c0,
            "embedded": report.embedded,
            "complete": report.complete,
            "switched": report.switched,
        }
        phase[0] = "after"
        time.sleep(5.0)  # searches and writes after the switch
        stop.set()
        for t in threads:
            t.join()
        missing = [mid for mid in written if _absent(memory, mid)]
        stats = memory.stats()
    finally:
        memory.close()
    by_phase = {}
    for name in ("before", "during", "after"):
        times = [ms for p, ms in searches if p == name]
        by_phase[name] = {
            "searches": len(times),
            "p50_ms": round(percentile(times, 50), 2) if times else None,
            "p95_ms": round(percentile(times, 95), 2) if times else None,
        }
    return {
        "size": size,
        "from": source.label,
        "to": target.label,
        "old_space": old_key,
        "new_space": new_key,
        "ingest": {k: round(v, 3) for k, v in ingest.items()},
        "reembed": {k: round(v, 3) if isinstance(v, float) else v for k, v in reembed.items()},
        "reembed_memories_per_s": round(reembed["embedded"] / reembed["wall_s"], 1),
        "searches": by_phase,
        "failed_searches_or_writes": len(failures),
        "failures": failures[:10],
        "writes": len(written),
        "writes_missing": len(missing),
        "memories_at_end": stats["memories"],
        "new_space_vectors_at_end": stats["vectors_by_space"].get(new_key, 0),
        "new_space_complete": stats["vectors_by_space"].get(new_key, 0) == stats["memories"],
        "active_space_at_end": stats["embedder"]["key"],
        "progress": [
            {"t_s": round(t, 2), "embedded": e, "remaining": r}
            for t, e, r in progress[:: max(1, len(progress) // 20)]
        ],
    }


def _absent(memory: Any, memory_id: str) -> bool:
    from rankseam.errors import RankseamError

    try:
        memory.get(memory_id)
    except RankseamError:
        return True
    return False


def run_reembed(
    datasets: Sequence[Dataset],
    *,
    source: EmbedderSpec,
    target: EmbedderSpec,
    checkpoints: Sequence[int] = DEFAULT_CHECKPOINTS,
    batch_size: int = 500,
    live_size: int = 0,
    live_target: EmbedderSpec | None = None,
    write_every_s: float = 0.02,
    workdir: str | Path | None = None,
    echo: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Run both parts (see the module docstring); the report body."""
    checkpoints = sorted(set(checkpoints) | {100})
    if any(c < 0 or c > 100 for c in checkpoints):
        raise ConfigurationError(f"checkpoints are percentages 0..100, got {checkpoints}")
    body: dict[str, Any] = {
        "kind": "reembed",
        "configuration": {
            "from": source.label,
            "to": target.label,
            "checkpoints": checkpoints,
            "batch_size": batch_size,
        },
        "quality": [],
    }
    with tempfile.TemporaryDirectory(prefix="rankseam-reembed-", dir=workdir) as tmp:
        for dataset in datasets:
            body["quality"].append(
                _quality(dataset, source, target, checkpoints, batch_size, Path(tmp), echo)
            )
        if live_size:
            body["live"] = _live(
                live_size,
                source,
                live_target or target,
                batch_size,
                write_every_s,
                Path(tmp),
                echo,
            )
    return body


def reembed_markdown(report: Mapping[str, Any]) -> str:
    lines: list[str] = []
    config = report["configuration"]
    for part in report.get("quality", []):
        metric = "ndcg@10" if part["kind"] == "beir" else "recall@5"
        lines.append(
            f"### {part['dataset']}: {part['memories']} memories, {part['queries']} queries, "
            f"{config['from']} -> {config['to']} ({metric})\n"
        )
        lines.append("| re-embedded | answering (rule) | new space if switched early |")
        lines.append("|---|---|---|")
        for c in part["checkpoints"]:
            lines.append(
                f"| {c['percent']} % | {c['answering'][metric]:.3f} | "
                f"{c['new_space_early'][metric]:.3f} |"
            )
        ref = part["embedded_at_ingest"]
        same = all(part["final_equals_ingest"].values())
        lines.append(
            f"\nembedded with {config['to']} at ingest: {metric} {ref[metric]:.3f}; after the "
            f"re-embed: same to 3 digits on every metric: {same}; "
            f"re-embed {part['reembed_memories']} memories in {part['reembed_wall_s']} s wall, "
            f"{part['reembed_cpu_s']} s CPU\n"
        )
    live = report.get("live")
    if live:
        lines.append(
            f"### live: {live['size']} memories, {live['from']} -> {live['to']} beside a search "
            "loop and a writer\n"
        )
        r = live["reembed"]
        lines.append(
            f"re-embedded {r['embedded']} in {r['wall_s']} s wall / {r['cpu_s']} s process CPU "
            f"({live['reembed_memories_per_s']} memories/s); complete {r['complete']}, "
            f"switched {r['switched']}; failed searches or writes: "
            f"{live['failed_searches_or_writes']}; writes {live['writes']}, missing "
            f"{live['writes_missing']}; new space complete at the end: "
            f"{live['new_space_complete']} ({live['new_space_vectors_at_end']} vectors, "
            f"{live['memories_at_end']} memories)\n"
        )
        lines.append("| phase | searches | p50 ms | p95 ms |")
        lines.append("|---|---|---|---|")
        for name, s in live["searches"].items():
            lines.append(f"| {name} | {s['searches']} | {s['p50_ms']} | {s['p95_ms']} |")
    return "\n".join(lines) + "\n"


def write_reembed(report: Mapping[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "report.json", out / "report.md"]
    paths[0].write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(reembed_markdown(report), encoding="utf-8")
    return paths
