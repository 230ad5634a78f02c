"""Measurements behind docs/plugins/sentence-transformers.md (CPU time beside wall).

    python plugins/rankseam-sentence-transformers/studies/bench.py speed --memories 800
    python plugins/rankseam-sentence-transformers/studies/bench.py rerank-cpu \\
        --dataset beir:shared/data/scifact-train@train --queries 100
    python plugins/rankseam-sentence-transformers/studies/bench.py cosine \\
        --stores /tmp/stores/locomo --dataset locomo

A study script, not part of the plugin's package: it reads the datasets with rankseam's own
benchmark loader (``rankseam.bench.datasets``, the one ``rankseam bench quality`` uses).

``speed``: the same memories ingested into one SQLite store per backend (torch with its
default threads, torch with one thread, both again with ``precision = "bf16"``, ONNX fp32,
ONNX int8 with one worker and with the default two, and the torch-free ``minilm-int8``
embedder; ``--backends`` picks some),
**interleaved** chunk by chunk
so every backend sees the same machine load; after each chunk each backend embeds the same
queries one at a time (what a search pays for its query vector). Reports memories/s (wall),
CPU ms per memory, and query embedding CPU and wall ms, to compare with torch's.

``rerank-cpu``: a store of the dataset built with the model-free ``hashed`` embedder; for each
query the coarse pool (``--pool``, default 30) is reranked by ``semantic`` through the seam
(``rankseam.testing.run_reranker``), timed with the process's CPU clock, each ``--variant``
(options of ``[rerankers.semantic]``, plus ``torch_threads``: torch's intra-op threads while
that variant runs, default torch's own) in turn query by query. ``cold``: no vector cache
(every text of every pool encoded); ``warm``: the candidate cache filled by a first pass over
the same queries (the query itself is encoded again: a new reranker instance shares the
cache, not the query vectors).
``cosine``: how close two embedders' vectors of the same texts are (the torch model against
the torch-free ``minilm-int8`` by default): the memories' vectors that ``rankseam bench quality
--embedder A,B --stores DIR`` stored for each embedder, and the queries embedded with both.

Prints the report as JSON and writes ``report.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import rankseam
from rankseam.testing import build_component, run_reranker

__all__ = ["cosine", "main", "probe", "rerank_cpu", "speed"]

#: The backends ``speed`` compares: label -> (embedder options, torch threads or None).
BACKENDS: dict[str, tuple[dict[str, Any], int | None]] = {
    "torch": ({}, None),
    "torch-1-thread": ({}, 1),
    "torch-bf16": ({"precision": "bf16"}, None),
    "torch-bf16-1-thread": ({"precision": "bf16"}, 1),
    "onnx": ({"backend": "onnx"}, None),
    "onnx-int8-1-worker": ({"backend": "onnx", "quantize": True, "workers": 1}, None),
    "onnx-int8": ({"backend": "onnx", "quantize": True}, None),
    "minilm-int8": ({}, None),
}
#: Backends that are another embedder of the plugin (default: ``sentence-transformers``).
EMBEDDER_OF = {"minilm-int8": "minilm-int8"}


def _load(spec: str) -> Any:
    from rankseam.bench.datasets import load_dataset

    return load_dataset(spec)


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _timed(work: Callable[[], Any]) -> tuple[float, float]:
    wall, cpu = _clocks()
    work()
    end_wall, end_cpu = _clocks()
    return end_wall - wall, end_cpu - cpu


def _each(embed: Callable[[list[str]], Any], texts: Sequence[str]) -> None:
    for text in texts:
        embed([text])


def speed(
    dataset: str, memories: int, queries: int, chunk: int, backends: Sequence[str], folder: Path
) -> dict[str, Any]:
    import torch

    data = _load(dataset)
    records = [r.to_ingest() for c in data.collections for r in c.records][:memories]
    questions = [q.text for c in data.collections for q in c.queries][:queries]
    default_threads = torch.get_num_threads()
    opened = {}
    embedders: dict[str, Any] = {}
    for label in backends:
        options, _ = BACKENDS[label]
        name = EMBEDDER_OF.get(label, "sentence-transformers")
        opened[label] = rankseam.open_memory(
            folder / f"{label}.sqlite3",
            embedder=name,
            config={"embedders": {name: options}},
            reranker=None,
        )
        embedders[label] = build_component("embedder", name, options)
        embedders[label].embed(["warm-up"])  # load (and export) outside the clock
    totals = {label: {"ingest": [0.0, 0.0], "query": [0.0, 0.0]} for label in backends}
    for start in range(0, len(records), chunk):
        part = records[start : start + chunk]
        for label in backends:
            threads = BACKENDS[label][1]
            torch.set_num_threads(threads or default_threads)
            memory = opened[label]
            wall, cpu = _timed(partial(memory.ingest, part))
            totals[label]["ingest"][0] += wall
            totals[label]["ingest"][1] += cpu
            embed = embedders[label].embed
            wall, cpu = _timed(partial(_each, embed, questions))
            totals[label]["query"][0] += wall
            totals[label]["query"][1] += cpu
    torch.set_num_threads(default_threads)
    rounds = -(-len(records) // chunk)
    rows = {}
    for label, t in totals.items():
        rows[label] = {
            "memories_per_s": len(records) / t["ingest"][0],
            "ingest_cpu_ms_per_memory": 1000 * t["ingest"][1] / len(records),
            "query_cpu_ms": 1000 * t["query"][1] / (rounds * len(questions)),
            "query_wall_ms": 1000 * t["query"][0] / (rounds * len(questions)),
        }
    for memory in opened.values():
        memory.close()
    return {
        "memories": len(records),
        "queries": len(questions) * rounds,
        "torch_default_threads": default_threads,
        "backends": rows,
    }


def rerank_cpu(
    dataset: str,
    queries: int,
    pool: int,
    limit: int,
    variants: Mapping[str, Mapping[str, Any]],
    folder: Path,
) -> dict[str, Any]:
    """Each variant's cold and warm rerank CPU per query, interleaved query by query."""
    from rankseam_sentence_transformers import SemanticOptions, SemanticReranker

    data = _load(dataset)
    pools: list[tuple[str, Any]] = []
    for number, collection in enumerate(data.collections):
        memory = rankseam.open_memory(
            folder / f"hashed-{number}.sqlite3", embedder="hashed", reranker=None
        )
        memory.ingest([r.to_ingest() for r in collection.records])
        for question in collection.queries[: queries - len(pools)]:
            result = memory.search(question.text, limit=pool, pool=pool)
            pools.append((question.text, result.hits))
        memory.close()
        if len(pools) >= queries:
            break
    import torch

    default_threads = torch.get_num_threads()
    threads = {label: int(o.get("torch_threads", default_threads)) for label, o in variants.items()}
    variants = {
        label: {k: v for k, v in o.items() if k != "torch_threads"} for label, o in variants.items()
    }
    rerankers = {}
    for label, options in variants.items():
        for state, size in (("cold", 0), ("warm", 1 << 16)):
            reranker = SemanticReranker(
                SemanticOptions.from_mapping({**options, "cache_size": size})
            )
            reranker.encoder.encode(["warm-up"], batch_size=1, normalize=True)  # load first
            rerankers[label, state] = reranker
    samples: dict[tuple[str, str], list[tuple[float, float, int]]] = {k: [] for k in rerankers}
    for pass_ in range(2):  # the warm rerankers' first pass fills their caches
        if pass_ == 1:  # a new instance: the same (shared) vector cache, no query vectors yet
            for label, state in list(rerankers):
                if state == "warm":
                    rerankers[label, state] = SemanticReranker(rerankers[label, state].options)
        for text, hits in pools:
            for key, reranker in rerankers.items():
                if key[1] == "cold" and pass_ == 0:
                    continue
                torch.set_num_threads(threads[key[0]])
                wall, cpu = _clocks()
                run = run_reranker(reranker, text, hits, limit)
                end_wall, end_cpu = _clocks()
                if pass_ == 1:
                    assert run.trace is not None
                    tokens = run.trace.usage.input_tokens or 0
                    samples[key].append((1000 * (end_cpu - cpu), 1000 * (end_wall - wall), tokens))
    torch.set_num_threads(default_threads)
    out: dict[str, Any] = {"queries": len(pools), "pool": pool, "variants": {}}
    for (label, state), rows in samples.items():
        cpu_ms = sorted(r[0] for r in rows)
        out["variants"].setdefault(
            label,
            {"descriptor": rerankers[label, state].descriptor, "torch_threads": threads[label]},
        )
        out["variants"][label][state] = {
            "cpu_ms_mean": statistics.fmean(cpu_ms),
            "cpu_ms_p50": statistics.median(cpu_ms),
            "cpu_ms_p95": cpu_ms[int(0.95 * (len(cpu_ms) - 1))],
            "wall_ms_mean": statistics.fmean(r[1] for r in rows),
            "input_tokens_per_query": statistics.fmean(r[2] for r in rows),
        }
    return out


def probe(memories: int, abstracts: str, texts: int, sizes: Sequence[int]) -> dict[str, Any]:
    """Where int8's CPU goes: per memory at several batch sizes (dynamic int8 batched, which the
    plugin does not do: a reference for what batch-independent int8 could gain), and the
    tokenizer's share for long texts (whole text against the plugin's prefix cut)."""
    from rankseam_sentence_transformers.model import Runtime, load_encoder, resolve_model

    short = [r.to_ingest()["text"] for c in _load("locomo").collections for r in c.records]
    long = [r.to_ingest()["text"] for c in _load(abstracts).collections for r in c.records]
    short, long = short[:memories], long[:texts]
    encoder = load_encoder(
        resolve_model("all-MiniLM-L6-v2"),
        Runtime(backend="onnx", quantize=True, workers=1, max_seq_length=128),
    )
    # A study of the runtime's parts: it reaches past the public Encoder on purpose.
    tokenizer = encoder._tokenizer  # type: ignore[attr-defined]  # noqa: SLF001
    encodings = tokenizer.encode_batch(short)
    out: dict[str, Any] = {"memories": len(short), "tokens_per_memory": 0.0, "batch": {}}
    out["tokens_per_memory"] = statistics.fmean(len(e.ids) for e in encodings)
    order = sorted(range(len(short)), key=lambda i: -len(encodings[i].ids))
    for size in sizes:
        batches = [order[i : i + size] for i in range(0, len(order), size)]
        _wall, cpu = _timed(
            lambda b=batches: [encoder._run([encodings[i] for i in r]) for r in b]  # type: ignore[attr-defined]  # noqa: SLF001
        )
        out["batch"][size] = {"cpu_ms_per_memory": 1000 * cpu / len(short)}
    whole = _timed(partial(tokenizer.encode_batch, long))[1]
    cut = _timed(partial(encoder._tokenize, long))[1]  # type: ignore[attr-defined]  # noqa: SLF001
    out["tokenizer"] = {
        "texts": len(long),
        "chars_per_text": statistics.fmean(len(t) for t in long),
        "whole_cpu_ms_per_text": 1000 * whole / len(long),
        "prefix_cpu_ms_per_text": 1000 * cut / len(long),
    }
    return out


def _stored_vectors(store: Path) -> dict[str, Any]:
    """text -> stored vector of the one space in ``store`` (a SQLite store of rankseam bench
    quality --stores; read-only, straight from its tables)."""
    import sqlite3

    import numpy as np

    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT r.text, v.vector FROM vectors v JOIN revisions r ON r.rid = v.rid"
        ).fetchall()
    return {text: np.frombuffer(blob, dtype="<f4") for text, blob in rows}


def cosine(stores: Sequence[Path], datasets: Sequence[str], a: str, b: str) -> dict[str, Any]:
    """Cosine between embedder ``a``'s and ``b``'s vectors of the same texts: every memory of
    the stores that ``rankseam bench quality --embedder a,b --stores DIR`` left in each DIR
    (``<store>-a.sqlite3`` beside ``<store>-b.sqlite3``), and every query of ``datasets``
    embedded now with both."""
    import numpy as np

    found: dict[str, list[float]] = {}
    for folder in stores:
        values: list[float] = []
        for left in sorted(folder.glob(f"*-{a}.sqlite3")):
            one = _stored_vectors(left)
            two = _stored_vectors(left.with_name(left.name.replace(f"-{a}.", f"-{b}.")))
            values += [float(one[t] @ two[t]) for t in one.keys() & two.keys()]
        found[f"memories:{folder.name}"] = values
    first, second = build_component("embedder", a), build_component("embedder", b)
    for spec in datasets:
        texts = [q.text for c in _load(spec).collections for q in c.queries]
        pairs = np.sum(first.embed(texts) * second.embed(texts), axis=1)
        found[f"queries:{spec}"] = [float(x) for x in pairs]
    everything = [x for v in found.values() for x in v]
    found["all"] = everything

    def summary(values: Sequence[float]) -> dict[str, float]:
        arr = np.asarray(values)
        return {
            "texts": len(arr),
            "mean": float(arr.mean()),
            "p1": float(np.percentile(arr, 1)),
            "p5": float(np.percentile(arr, 5)),
            "median": float(np.median(arr)),
            "min": float(arr.min()),
            "below_0.998": int((arr < 0.998).sum()),
        }

    return {"embedders": [a, b], "cosine": {k: summary(v) for k, v in found.items()}}


def _variants(values: Sequence[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for item in values or ["default=="]:
        label, _, spec = item.partition("==")
        options: dict[str, Any] = {}
        for pair in filter(None, spec.split(":")):
            key, _, raw = pair.partition("=")
            try:
                options[key] = json.loads(raw)
            except ValueError:
                options[key] = raw
        out[label] = options
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="studies/bench.py")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("speed", help="torch vs ONNX, interleaved: ingest and query embedding")
    s.add_argument("--dataset", default="locomo")
    s.add_argument("--memories", type=int, default=800)
    s.add_argument("--queries", type=int, default=25, help="query embeddings per chunk")
    s.add_argument("--chunk", type=int, default=100)
    s.add_argument("--backends", default=",".join(BACKENDS))
    r = sub.add_parser("rerank-cpu", help="the semantic reranker's CPU per query, cold and warm")
    r.add_argument("--dataset", required=True)
    r.add_argument("--queries", type=int, default=100)
    r.add_argument("--pool", type=int, default=30)
    r.add_argument("--limit", type=int, default=10)
    r.add_argument(
        "--variant",
        action="append",
        default=[],
        help="LABEL==KEY=VALUE:KEY=VALUE (options of [rerankers.semantic], and torch_threads); "
        "repeatable; default: the defaults only",
    )
    b = sub.add_parser("probe", help="int8 CPU per memory by batch size; tokenizer cost")
    b.add_argument("--memories", type=int, default=400)
    b.add_argument("--abstracts", default="beir:../shared/data/scifact-train@train")
    b.add_argument("--texts", type=int, default=300)
    b.add_argument("--sizes", default="1,8,32")
    c = sub.add_parser("cosine", help="cosine between two embedders' vectors of the same texts")
    c.add_argument("--stores", type=Path, action="append", required=True)
    c.add_argument("--dataset", action="append", default=[], help="queries embedded now")
    c.add_argument("--embedders", default="sentence-transformers,minilm-int8")
    for p in (s, r, b, c):
        p.add_argument("--out", type=Path, default=None, help="folder for report.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rankseam-st-bench-") as scratch:
        if args.command == "speed":
            report = speed(
                args.dataset,
                args.memories,
                args.queries,
                args.chunk,
                args.backends.split(","),
                Path(scratch),
            )
        elif args.command == "cosine":
            a, b = args.embedders.split(",")
            report = cosine(args.stores, args.dataset, a, b)
        elif args.command == "probe":
            sizes = [int(x) for x in args.sizes.split(",")]
            report = probe(args.memories, args.abstracts, args.texts, sizes)
        else:
            report = rerank_cpu(
                args.dataset,
                args.queries,
                args.pool,
                args.limit,
                _variants(args.variant),
                Path(scratch),
            )
    report["environment"] = {
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    print(json.dumps(report, indent=2))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
