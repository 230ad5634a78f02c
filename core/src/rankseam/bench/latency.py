"""The latency benchmark: rerank stage, whole search, ingest, disabled path, reference MMR.

Everything is measured side by side in one run and reported with ratios, because absolute
times on a small shared machine are noisy:

- **rerank stage** — :func:`rankseam.seam.rerank_pool` over synthetic candidates (384-dim unit
  vectors) for every installed reranker that can be built with its default options (others are
  listed as skipped, with the reason), plus ``none`` (the disabled path). Ratio: to identity.
- **whole search** — ``Memory.search`` at several store sizes, policies ``none`` and
  ``identity`` interleaved query by query, next to the **floor**: a plain numpy cosine over
  the store's vectors plus the same FTS5 query, fused by RRF (:func:`floor_search`), the
  least a search of that store can cost. Ratio: to none. Each size is ingested in one child
  process (throughput in memories/s) and searched in another, so that each peak RSS
  (``resource.getrusage``) belongs to that step alone; the search child also times opening
  the store and its first search. The corpus is ``locomo`` (LoCoMo dev memories, then
  memories spliced from their turns; LoCoMo questions) or ``synthetic`` (pseudo-words).
- **reference MMR** — when the ``mmr`` reranker is installed and ``langchain-core`` importable,
  ``maximal_marginal_relevance`` on identical inputs: selections compared, time ratio.
"""

from __future__ import annotations

import asyncio
import gc
import json
import multiprocessing
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rankseam.bench import synthetic
from rankseam.bench.metrics import percentile
from rankseam.errors import ConfigurationError

__all__ = [
    "DEFAULT_SIZES",
    "QUICK_SIZES",
    "reference_mmr",
    "run_latency",
    "time_rerank_stage",
]

DEFAULT_SIZES = (1_000, 10_000, 100_000)
#: Corpora of the whole-search benchmark (:mod:`rankseam.bench.synthetic`).
CORPORA = ("locomo", "synthetic")
#: The floor loads every vector into one matrix: it is measured up to this size only.
FLOOR_MAX_SIZE = 300_000
QUICK_SIZES = (300, 1_000)
DIMENSIONS = 384
CANDIDATE_COUNTS = (20, 50)
#: Whole-search policies by default: no reranker, and the identity reranker (the disabled
#: path's overhead).
SEARCH_POLICIES = ("none", "identity")


def _stats(times_ms: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(times_ms, 50), 4),
        "p95_ms": round(percentile(times_ms, 95), 4),
        "runs": len(times_ms),
    }


def _call_stats(times_ms: Sequence[float]) -> dict[str, float]:
    return {
        "call_p50_ms": round(percentile(times_ms, 50), 4),
        "call_p95_ms": round(percentile(times_ms, 95), 4),
    }


def _peak_rss_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return round(rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024, 1)


def _build_rerankers(
    names: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    config: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Build each reranker with its ``options`` (default: none) in a context configured with
    ``config`` (other components' options, ``rankseam.toml`` layout); list the ones that cannot
    be built (typically: a backend must be chosen) with the reason."""
    from rankseam.compose import ComponentContext, Config

    context = ComponentContext(Config.from_mapping(config or {}, source="bench --option"))
    options = options or {}
    built: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            built[name] = context.reranker(name, dict(options.get(name, {})))
        except ConfigurationError as exc:
            skipped[name] = (
                f"cannot be built with {'these' if name in options else 'default'} options "
                f"(pass --option {name}.KEY=VALUE): {exc}"
            )
    return built, skipped


def time_rerank_stage(
    rerankers: Mapping[str, Any | None],
    *,
    counts: Sequence[int] = CANDIDATE_COUNTS,
    dims: int = DIMENSIONS,
    limit: int = 10,
    repeats: int = 200,
    warmup: int = 5,
    progress: bool = False,
) -> dict[str, dict[str, dict[str, float]]]:
    """p50/p95 of ``rerank_pool`` for each reranker (``None`` = disabled) at each pool size,
    and of the reranker's own call inside it (``call_*``: the trace's ``latency_ms``).

    Candidate vectors are fetched as the store serves them (float32 decoded from its stored
    bytes). Runs all repetitions in one event loop; reranker order is rotated every repetition
    so that drift on a busy machine spreads over all of them. Each timed call starts after an
    untimed collection of the young generations (``gc.collect(1)``): a reranker's time includes
    the collector work its own allocations cause, not the garbage of the reranker timed before.
    """
    from rankseam.seam import rerank_pool
    from rankseam.store.vectors import decode_vectors, encode_vector

    query = synthetic.queries(1)[0]
    out: dict[str, dict[str, dict[str, float]]] = {name: {} for name in rerankers}
    bar = _bar(len(counts) * (repeats + warmup), "rerank stage", progress)

    async def run() -> None:
        for n in counts:
            vectors = synthetic.unit_vectors(n, dims, seed=n)
            hits = synthetic.pool_hits(n)
            stored = {h.ref: encode_vector(vectors[i]) for i, h in enumerate(hits)}

            def fetch(
                refs: Sequence[Any], stored: Mapping[Any, bytes] = stored
            ) -> np.ndarray | list[np.ndarray | None]:
                return decode_vectors([stored[r] for r in refs], dims)

            times: dict[str, list[float]] = {name: [] for name in rerankers}
            calls: dict[str, list[float]] = {name: [] for name in rerankers}
            names = list(rerankers)
            for rep in range(repeats + warmup):
                rotated = names[rep % len(names) :] + names[: rep % len(names)]
                for name in rotated:
                    gc.collect(1)
                    t0 = time.perf_counter()
                    _, trace = await rerank_pool(
                        query,
                        hits,
                        limit,
                        rerankers[name],
                        fetch_vectors=fetch,
                        embedding_space="bench/d384",
                    )
                    if rep >= warmup:
                        times[name].append((time.perf_counter() - t0) * 1000.0)
                        if trace is not None:
                            calls[name].append(trace.latency_ms)
                if bar is not None:
                    bar.update(1)
            for name in names:
                out[name][str(n)] = _stats(times[name])
                if calls[name]:
                    out[name][str(n)].update(_call_stats(calls[name]))

    asyncio.run(run())
    if bar is not None:
        bar.close()
    base = out.get("identity")
    for per_n in out.values():
        for n, m in per_n.items():
            if base and n in base and base[n]["p50_ms"] > 0:
                m["ratio_to_identity"] = round(m["p50_ms"] / base[n]["p50_ms"], 3)
    return out


def _bar(total: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, leave=False, disable=None)


# ---------------------------------------------------------------------------- reference MMR


def _reference_inputs(n: int, dims: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A query and ``n`` candidate vectors whose query cosines span exactly [0, 1].

    Vectors are non-negative, one candidate equals the query (cosine 1) and one lives on the
    other half of the dimensions (cosine 0). So min-max normalising the cosines (what the
    ``mmr`` plugin does with coarse scores) changes nothing, and both implementations see the
    same relevance values.
    """
    rng = np.random.default_rng(seed)
    half = dims // 2
    query = np.zeros(dims)
    query[:half] = np.abs(rng.standard_normal(half))
    query /= np.linalg.norm(query)
    cands = np.abs(rng.standard_normal((n, dims)))
    cands[0] = query
    cands[1, :half] = 0.0
    cands /= np.linalg.norm(cands, axis=1, keepdims=True)
    order = rng.permutation(n)
    return query, cands[order]


def reference_mmr(
    mmr: Any,
    *,
    lam: float,
    counts: Sequence[int] = CANDIDATE_COUNTS,
    dims: int = DIMENSIONS,
    k: int = 10,
    trials: int = 20,
    repeats: int = 50,
) -> dict[str, Any]:
    """Compare the ``mmr`` reranker with langchain-core's ``maximal_marginal_relevance``.

    Both use λ·relevance − (1−λ)·max cosine to the selected items, with λ = 1 meaning pure
    relevance in both, so the same ``lam`` goes to both. The coarse score handed to ``mmr`` is
    the query cosine (see :func:`_reference_inputs`); its ranks are mapped back to indices.
    """
    try:
        from langchain_core.vectorstores.utils import maximal_marginal_relevance
    except ImportError:
        return {
            "skipped": "langchain-core is not installed (pip install 'rankseam[bench-reference]')"
        }
    from rankseam.seam import make_candidates

    by_n: dict[str, Any] = {}

    async def run() -> None:
        for n in counts:
            agree = 0
            ours_ms: list[float] = []
            theirs_ms: list[float] = []
            for trial in range(trials):
                query, cands = _reference_inputs(n, dims, seed=1000 * n + trial)
                cos = cands @ query
                order = np.argsort(-cos, kind="stable")  # coarse order: by score
                hits = synthetic.pool_hits(n, scores=cos[order])
                candidates = make_candidates(
                    hits,
                    vectors=[cands[i].astype(np.float32) for i in order],
                    embedding_space="bench/d384",
                )
                decision = await mmr.rerank("query", candidates, min(k, n))
                ours = [int(order[r - 1]) for r in decision.selected_ranks]
                theirs = maximal_marginal_relevance(query, list(cands), lambda_mult=lam, k=k)
                agree += ours == [int(i) for i in theirs]
                if trial == 0:
                    for _ in range(repeats):
                        t0 = time.perf_counter()
                        await mmr.rerank("query", candidates, min(k, n))
                        t1 = time.perf_counter()
                        maximal_marginal_relevance(query, list(cands), lambda_mult=lam, k=k)
                        t2 = time.perf_counter()
                        ours_ms.append((t1 - t0) * 1000.0)
                        theirs_ms.append((t2 - t1) * 1000.0)
            p_ours = percentile(ours_ms, 50)
            p_theirs = percentile(theirs_ms, 50)
            by_n[str(n)] = {
                "rankseam_p50_ms": round(p_ours, 4),
                "langchain_p50_ms": round(p_theirs, 4),
                "ratio": round(p_ours / p_theirs, 3) if p_theirs > 0 else None,
                "agreement": round(agree / trials, 3),
                "trials": trials,
            }

    asyncio.run(run())
    return {"lambda": lam, "k": k, "by_candidates": by_n}


# ----------------------------------------------------------------------------- whole search


def default_corpus() -> str:
    """``locomo`` when the LoCoMo dev file can be found, else ``synthetic``."""
    from rankseam.bench.datasets import find_locomo

    try:
        find_locomo()
    except ConfigurationError:
        return "synthetic"
    return "locomo"


def _check_corpus(corpus: str) -> None:
    if corpus not in CORPORA:
        raise ConfigurationError(f"unknown corpus {corpus!r}; choose one of {list(CORPORA)}")


def corpus_texts(corpus: str, size: int) -> Any:
    _check_corpus(corpus)
    return synthetic.locomo_texts(size) if corpus == "locomo" else synthetic.texts(size)


def corpus_queries(corpus: str, count: int) -> list[str]:
    _check_corpus(corpus)
    return synthetic.locomo_queries(count) if corpus == "locomo" else synthetic.queries(count)


class FloorSearch:
    """The floor a search of a store is compared with: what a user could write in 25 lines.

    The store's vectors of one space in one float32 matrix (loaded once, untimed), a cosine
    by one matrix-vector product and ``argpartition``, the lexical channel's FTS5 query (the
    question's quoted terms OR-joined, ranked by BM25), both fused by RRF, the texts of the
    best ``limit`` read by row key. No revisions, namespaces, priors, pruning or trace.
    """

    def __init__(self, path: str, embedder: Any) -> None:
        import sqlite3

        self._conn = sqlite3.connect(path)
        self._embedder = embedder
        space = embedder.descriptor.key
        rows = self._conn.execute(
            "SELECT v.rid, v.vector FROM vectors v JOIN revisions r ON r.rid = v.rid "
            "WHERE v.space = ? AND r.live = 1",
            (space,),
        ).fetchall()
        self._rids = np.array([r for r, _v in rows], dtype=np.int64)
        dims = embedder.descriptor.dimensions
        self._matrix = np.frombuffer(b"".join(v for _r, v in rows), dtype="<f4").reshape(-1, dims)

    def search(self, query: str, k: int, limit: int) -> list[tuple[int, str]]:
        from rankseam.retrieval.lexical import match_expression

        scores = self._matrix @ self._embedder.embed([query])[0]
        top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
        top = top[np.argsort(-scores[top])]
        fused: dict[int, float] = {}
        for rank, rid in enumerate(self._rids[top].tolist(), 1):
            fused[rid] = 1.0 / (60 + rank)
        match = match_expression(query)
        if match:
            sql = "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?"
            for rank, (rid,) in enumerate(self._conn.execute(sql, (match, k)), 1):
                fused[rid] = fused.get(rid, 0.0) + 1.0 / (60 + rank)
        best = sorted(fused, key=lambda r: -fused[r])[:limit]
        marks = ",".join("?" * len(best))
        sql = f"SELECT rid, text FROM revisions WHERE rid IN ({marks})"
        texts = dict(self._conn.execute(sql, best).fetchall())
        return [(rid, texts[rid]) for rid in best]

    def close(self) -> None:
        self._conn.close()


def _ingest_child(path: str, size: int, corpus: str, progress: bool) -> dict[str, Any]:
    import rankseam

    # the records are made before the clock starts: the rate is the store's, not the corpus
    # generator's (which takes about 7 µs per LoCoMo-derived record)
    records = list(corpus_texts(corpus, size))
    memory = rankseam.open_memory(path)
    try:
        t0 = time.perf_counter()
        memory.ingest(records, batch_size=1000, progress=progress)
        elapsed = time.perf_counter() - t0
        t1 = time.perf_counter()
        manifest = memory.maintain_index()  # the ANN index, where the store is large enough
        indexed = time.perf_counter() - t1
    finally:
        close = getattr(memory, "close", None)
        if callable(close):
            close()
    return {
        "ingest_s": round(elapsed, 3),
        "ingest_per_s": round(size / elapsed, 1) if elapsed > 0 else None,
        "index_build_s": round(indexed, 1) if manifest is not None else None,
        "peak_rss_mib_ingest": _peak_rss_mib(),
    }


def warm_file_cache(path: str) -> float:
    """Read the store's files once (the database, its WAL, the ANN index folder), so that the
    timed searches meet the OS file cache of a store in use, whatever the runs before left in
    it (at a million memories, a partly cold cache doubled p95). Open and first search are
    measured before this. Seconds taken."""
    t0 = time.perf_counter()
    base = Path(path)
    files = [base, Path(f"{path}-wal")]
    folder = Path(f"{path}.ann")
    if folder.is_dir():
        files += sorted(p for p in folder.iterdir() if p.is_file())
    for file in files:
        try:
            with open(file, "rb", buffering=0) as f:
                while f.read(8 << 20):
                    pass
        except OSError:
            continue
    return time.perf_counter() - t0


def _search_child(
    path: str,
    policies: Sequence[str],
    count: int,
    limit: int,
    pool: int,
    progress: bool,
    config: Mapping[str, Any],
    corpus: str = "synthetic",
    floor: bool = False,
) -> dict[str, Any]:
    import rankseam
    from rankseam.bench.policies import parse_search
    from rankseam.retrieval.base import over_fetch

    qs = corpus_queries(corpus, count + 3)
    # imports and plugin loading are the process's, not the store's: pay them first
    rankseam.open_memory(":memory:", config=config).close()
    t0 = time.perf_counter()
    memory = rankseam.open_memory(path, config=config)
    t1 = time.perf_counter()
    # "NAME@VARIANT" searches a second Memory over the same store, assembled with the search
    # variant (e.g. none@fusion=rrf), so assemblies are compared query by query in one process.
    memories: dict[str, Any] = {"": memory}
    for name in policies:
        variant = name.partition("@")[2]
        if variant not in memories:
            memories[variant] = rankseam.open_memory(
                path, config=parse_search(variant).config(config)
            )
            memories[variant].search(qs[0], limit=limit, reranker=None, pool=pool)
    memory.search(qs[0], limit=limit, reranker=None, pool=pool)
    t2 = time.perf_counter()
    opened = {
        "open_ms": round((t1 - t0) * 1000, 1),
        "first_search_ms": round((t2 - t1) * 1000, 1),
        "warm_read_s": round(warm_file_cache(path), 2),
    }
    names = list(policies)
    floor_search = None
    if floor:
        floor_search = FloorSearch(path, memory.embedder)
        names.append("floor")
    times: dict[str, list[float]] = {p: [] for p in names}
    calls: dict[str, list[float]] = {p: [] for p in names}
    bar = _bar(len(qs), "search", progress)
    try:
        for i, q in enumerate(qs):
            rotated = names[i % len(names) :] + names[: i % len(names)]
            for name in rotated:
                gc.collect(1)
                t0 = time.perf_counter()
                if name == "floor":
                    assert floor_search is not None
                    floor_search.search(q, over_fetch(pool), limit)
                    result = None
                else:
                    base, _at, variant = name.partition("@")
                    reranker = None if base == "none" else base
                    result = memories[variant].search(q, limit=limit, reranker=reranker, pool=pool)
                if i >= 3:  # the first queries warm caches
                    times[name].append((time.perf_counter() - t0) * 1000.0)
                    if result is not None and result.trace.rerank is not None:
                        calls[name].append(result.trace.rerank.latency_ms)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if floor_search is not None:
            floor_search.close()
        for each in memories.values():
            each.close()
    out: dict[str, Any] = {p: _stats(t) for p, t in times.items()}
    out.update(opened)
    for p, c in calls.items():
        if c:
            out[p].update(_call_stats(c))
    out["peak_rss_mib_search"] = _peak_rss_mib()
    return out


def _ann_recall_child(path: str, corpus: str, count: int, pool: int) -> dict[str, Any]:
    """Recall of the vector channel through the ANN index against exact search, on the
    corpus's queries: recall@pool (the exact best ``pool`` found among the ANN's best
    ``pool``) and recall@k over the channel's whole list (``k = over_fetch(pool)``), with the
    channel's own p50 both ways."""
    import rankseam
    from rankseam.retrieval.base import over_fetch
    from rankseam.store.sqlite import SQLiteStore

    memory = rankseam.open_memory(path)
    try:
        descriptor = memory.embedder.descriptor
        namespace = memory.config.namespace
        store = memory.store
        if (
            not isinstance(store, SQLiteStore)
            or store.ann is None
            or store.ann.base(namespace, descriptor.key) is None
        ):
            return {}
        k = over_fetch(pool)
        at_pool: list[float] = []
        at_k: list[float] = []
        times: dict[str, list[float]] = {"ann": [], "exact": []}
        qvecs = memory.embedder.embed(corpus_queries(corpus, count))
        found: dict[str, list[list[int]]] = {"ann": [], "exact": []}
        for way in ("ann", "exact"):  # one pass each: the two keep different caches
            for qvec in qvecs:
                with store.read() as reader:
                    t0 = time.perf_counter()
                    hits = reader.vector(namespace, descriptor, qvec, k, exact=way == "exact")
                    times[way].append((time.perf_counter() - t0) * 1000)
                found[way].append([r for r, _s in hits])
        for a, e in zip(found["ann"], found["exact"], strict=True):
            at_pool.append(len(set(a[:pool]) & set(e[:pool])) / max(1, min(pool, len(e))))
            at_k.append(len(set(a) & set(e)) / max(1, len(e)))
        return {
            "recall_at_pool": round(float(np.mean(at_pool)), 4),
            "recall_at_k": round(float(np.mean(at_k)), 4),
            "pool": pool,
            "k": k,
            "queries": count,
            "ann_p50_ms": round(percentile(times["ann"][3:], 50), 3),
            "exact_p50_ms": round(percentile(times["exact"][3:], 50), 3),
            "exact_first_ms": round(times["exact"][0], 1),  # loads the float32 cache
        }
    finally:
        memory.close()


def _in_child(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def prepared_store(
    folder: Path, corpus: str, size: int, progress: bool
) -> tuple[str, dict[str, Any]]:
    """The store of ``size`` memories of ``corpus`` in ``folder``: ingested in a child process,
    or reused when an earlier run completed it (its ingest figures are kept next to it)."""
    path = folder / f"{corpus}-{size}.sqlite3"
    done = folder / f"{corpus}-{size}.ingest.json"
    if done.exists() and path.exists():
        row = json.loads(done.read_text())
        row["reused_store"] = True
        return str(path), row
    for stale in folder.glob(f"{corpus}-{size}.sqlite3*"):
        if stale.is_dir():
            shutil.rmtree(stale)
        else:
            stale.unlink()
    row = _in_child(_ingest_child, str(path), size, corpus, progress)
    done.write_text(json.dumps(row))
    return str(path), row


def time_whole_search(
    sizes: Sequence[int],
    *,
    policies: Sequence[str] = SEARCH_POLICIES,
    queries: int = 100,
    limit: int = 10,
    pool: int = 30,
    workdir: str | Path | None = None,
    progress: bool = False,
    config: Mapping[str, Any] | None = None,
    corpus: str = "synthetic",
    store_dir: str | Path | None = None,
    floor_max_size: int = FLOOR_MAX_SIZE,
) -> dict[str, dict[str, Any]]:
    """p50/p95 of ``Memory.search`` per policy (``none`` = no reranker, else a reranker name,
    built from ``config`` in the ``rankseam.toml`` layout) and of the floor
    (:class:`FloorSearch`, up to ``floor_max_size`` memories) at each store size,
    interleaved query by query; for a reranker also its call inside the search (``call_*``).
    ``store_dir`` keeps the stores (and reuses them in later runs); else they are temporary."""
    _check_corpus(corpus)
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="rankseam-latency-", dir=workdir) as tmp:
        folder = Path(store_dir) if store_dir is not None else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            path, row = prepared_store(folder, corpus, size, progress)
            row.update(
                _in_child(
                    _search_child,
                    path,
                    list(policies),
                    queries,
                    limit,
                    pool,
                    progress,
                    dict(config or {}),
                    corpus,
                    size <= floor_max_size,
                )
            )
            recall = _in_child(_ann_recall_child, path, corpus, queries, pool)
            if recall:
                row["ann_recall"] = recall
            floor = row.get("floor")
            if isinstance(floor, dict) and row.get("none") and floor["p50_ms"] > 0:
                row["none_to_floor"] = round(row["none"]["p50_ms"] / floor["p50_ms"], 3)
            base = row.get("none")
            for name in [*policies, "floor"]:
                m = row.get(name)
                if isinstance(m, dict) and base and base["p50_ms"] > 0:
                    m["ratio_to_none"] = round(m["p50_ms"] / base["p50_ms"], 3)
            out[str(size)] = row
    return out


# ------------------------------------------------------------------------------------ driver


def run_latency(
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    repeats: int = 200,
    queries: int = 100,
    limit: int = 10,
    pool: int = 30,
    workdir: str | Path | None = None,
    progress: bool = False,
    echo: Callable[[str], None] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    config: Mapping[str, Any] | None = None,
    search_policies: Sequence[str] = SEARCH_POLICIES,
    corpus: str | None = None,
    store_dir: str | Path | None = None,
) -> dict[str, Any]:
    """The whole latency benchmark; returns the report body. ``options`` maps a reranker name
    to the options it is built with; ``config`` holds other components' options
    (``{"decision_backends": {NAME: {...}}}``). ``search_policies``: ``none`` and reranker
    names timed in whole searches. ``corpus``: ``locomo`` or ``synthetic`` (default: locomo
    when its data is found). ``store_dir``: keep the stores there and reuse them."""
    from rankseam.plugins import get_registry

    say = echo or (lambda _msg: None)
    corpus = corpus or default_corpus()
    _check_corpus(corpus)
    reranker_options = {k: dict(v) for k, v in (options or {}).items()}
    names = get_registry().names("reranker")
    built, skipped = _build_rerankers(names, reranker_options, config)
    search_policies = list(dict.fromkeys(search_policies))  # each once, in the order given
    for policy in search_policies:
        policy, _at, variant = policy.partition("@")
        if variant:
            from rankseam.bench.policies import parse_search
            from rankseam.compose import Config

            Config.from_mapping(parse_search(variant).config(config), source=f"@{variant}")
        if policy != "none" and policy not in built:
            why = skipped.get(policy) or f"no reranker named {policy!r} is installed"
            raise ConfigurationError(
                f"whole-search policy {policy!r}: {why}; choose from {['none', *sorted(built)]}"
            )
    stage_rerankers: dict[str, Any | None] = {"none": None, **built}
    say(f"rerank stage: {', '.join(stage_rerankers)} at {list(CANDIDATE_COUNTS)} candidates")
    stage = time_rerank_stage(stage_rerankers, limit=limit, repeats=repeats, progress=progress)
    reference: dict[str, Any] | None = None
    if "mmr" in names:
        from rankseam.compose import ComponentContext, Config

        lam = float(reranker_options.get("mmr", {}).get("lambda", 0.7))
        say("reference MMR: mmr vs langchain-core")
        mmr = ComponentContext(Config()).reranker("mmr", {"lambda": lam, "relevance": "coarse"})
        reference = reference_mmr(mmr, lam=lam, k=limit, repeats=max(10, repeats // 4))
    search: dict[str, Any] = {}
    if sizes:
        say(
            f"whole search at {list(sizes)} {corpus} memories (ingest, then "
            f"{' vs '.join(search_policies)} vs floor)"
        )
        search_config = {**(config or {}), "rerankers": reranker_options}
        search = time_whole_search(
            sizes,
            policies=search_policies,
            queries=queries,
            limit=limit,
            pool=pool,
            workdir=workdir,
            progress=progress,
            config=search_config,
            corpus=corpus,
            store_dir=store_dir,
        )
    disabled: dict[str, Any] = {}
    for n, m in stage.get("none", {}).items():
        ident = stage.get("identity", {}).get(n)
        if ident and m["p50_ms"] > 0:
            disabled[f"stage@{n} identity/none"] = round(ident["p50_ms"] / m["p50_ms"], 3)
    for size, row in search.items():
        ident = row.get("identity")
        if isinstance(ident, dict) and "ratio_to_none" in ident:
            disabled[f"search@{size} identity/none"] = ident["ratio_to_none"]
    body: dict[str, Any] = {
        "kind": "latency",
        "configuration": {
            "sizes": list(sizes),
            "corpus": corpus,
            "store_dir": None if store_dir is None else str(store_dir),
            "candidates": list(CANDIDATE_COUNTS),
            "dimensions": DIMENSIONS,
            "limit": limit,
            "pool": pool,
            "repeats": repeats,
            "queries": queries,
            "search_policies": list(search_policies),
            "reranker_options": reranker_options,
            "components": {k: dict(v) for k, v in (config or {}).items()},
        },
        "rerank_stage": stage,
        "skipped_rerankers": skipped,
        "whole_search": search,
        "disabled_path": disabled,
    }
    if reference is not None:
        body["reference_mmr"] = reference
    largest = str(max(sizes)) if sizes else None
    if largest and largest in search:
        body["peak_rss_mib_largest_search"] = search[largest].get("peak_rss_mib_search")
    return body
