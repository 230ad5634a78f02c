"""Whole searches of the latency benchmark: ``Memory.search`` at several store sizes next to
the floor, plus ingest, store open, first search, peak RSS and the ANN index's recall.

Policies (``none`` = no reranker, the default search; else a reranker name, e.g.
``identity``) and the references (:data:`REFERENCES`: the **floor**, :class:`FloorSearch`, a
plain numpy cosine over the store's vectors plus the same FTS5 query, fused by RRF, the least
a search of that store can cost; and **bm25s**, :class:`Bm25sSearch`, the same with bm25s in
place of FTS5, where bm25s is installed) are interleaved query by query, so a swing in the
machine's load reaches all of them. Each timed search records its wall time and its CPU time
(:mod:`rankseam.bench.timing`); ratios are to ``none`` (``ratio_to_none``,
``cpu_ratio_to_none``) and ``none`` to each reference (``none_to_floor``,
``cpu_none_to_floor``, ``none_to_bm25s``, ...), all on p50s. The searches run with numpy's
BLAS pool held to one thread; with ``default_pool`` the default search and the references
run again with numpy's own pool (rows ``NAME [default pool]``).

Each size is ingested in one child process (throughput in memories/s) and searched in
another, each a fresh interpreter whose peak RSS is its own (``VmHWM``:
:func:`~rankseam.bench.timing.peak_rss_mib`; ``ru_maxrss`` would carry the parent's peak
across fork and exec), so that step's alone; the search child also times opening the store
and its first search. The corpus is ``locomo`` (LoCoMo dev memories, then memories spliced
from their turns; LoCoMo questions) or ``synthetic`` (pseudo-words).
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rankseam.bench import synthetic
from rankseam.bench.metrics import percentile
from rankseam.bench.timing import (
    Clock,
    blas_threads,
    call_stats,
    cpu_stats,
    peak_rss_mib,
    progress_bar,
    ratio,
    stats,
)
from rankseam.errors import ConfigurationError

__all__ = [
    "CORPORA",
    "DEFAULT_POOL",
    "FILTER_BUCKETS",
    "FLOOR_MAX_SIZE",
    "REFERENCES",
    "SEARCH_POLICIES",
    "Bm25sSearch",
    "FloorSearch",
    "bm25s_missing",
    "check_corpus",
    "corpus_queries",
    "corpus_texts",
    "default_corpus",
    "prepared_store",
    "time_whole_search",
    "warm_file_cache",
]

#: Corpora of the whole-search benchmark (:mod:`rankseam.bench.synthetic`).
CORPORA = ("locomo", "synthetic")
#: The floor loads every vector into one matrix: it is measured up to this size only.
FLOOR_MAX_SIZE = 300_000
#: Whole-search policies by default: no reranker, the identity reranker (the disabled path's
#: overhead), and the default search under a metadata-equality filter that 1 % of the
#: memories pass (``filtered``).
SEARCH_POLICIES = ("none", "identity", "filtered")
#: The searches a user could write instead (:class:`FloorSearch`, :class:`Bm25sSearch`).
REFERENCES = ("floor", "bm25s")
#: The suffix of the rows timed with numpy's default BLAS pool.
DEFAULT_POOL = " [default pool]"
#: Every memory of a benchmark store has the metadata ``{"bucket": n % FILTER_BUCKETS}``; the
#: ``filtered`` policy searches with ``where={"bucket": b}``, a different ``b`` each query.
FILTER_BUCKETS = 100


def default_corpus() -> str:
    """``locomo`` when the LoCoMo dev file can be found, else ``synthetic``."""
    from rankseam.bench.datasets import find_locomo

    try:
        find_locomo()
    except ConfigurationError:
        return "synthetic"
    return "locomo"


def check_corpus(corpus: str) -> None:
    if corpus not in CORPORA:
        raise ConfigurationError(f"unknown corpus {corpus!r}; choose one of {list(CORPORA)}")


def corpus_texts(corpus: str, size: int) -> Any:
    check_corpus(corpus)
    return synthetic.locomo_texts(size) if corpus == "locomo" else synthetic.texts(size)


def corpus_queries(corpus: str, count: int) -> list[str]:
    check_corpus(corpus)
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
        scores = self._matrix @ self._embedder.embed([query])[0]
        top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
        top = top[np.argsort(-scores[top])]
        fused: dict[int, float] = {}
        for rank, rid in enumerate(self._rids[top].tolist(), 1):
            fused[rid] = 1.0 / (60 + rank)
        for rank, rid in enumerate(self.lexical(query, k), 1):
            fused[rid] = fused.get(rid, 0.0) + 1.0 / (60 + rank)
        best = sorted(fused, key=lambda r: -fused[r])[:limit]
        marks = ",".join("?" * len(best))
        sql = f"SELECT rid, text FROM revisions WHERE rid IN ({marks})"
        texts = dict(self._conn.execute(sql, best).fetchall())
        return [(rid, texts[rid]) for rid in best]

    def lexical(self, query: str, k: int) -> list[int]:
        """The best ``k`` row keys for ``query`` by BM25: the lexical channel's FTS5 query."""
        from rankseam.search.terms import query_terms
        from rankseam.sqlite.reader import or_joined

        match = or_joined(query_terms(query))
        if not match:
            return []
        sql = "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?"
        return [rid for (rid,) in self._conn.execute(sql, (match, k))]

    def close(self) -> None:
        self._conn.close()


def bm25s_missing() -> str | None:
    """Why the ``bm25s`` reference cannot run here (None: it can)."""
    try:
        import bm25s  # noqa: F401
    except ImportError:
        return "bm25s is not installed (pip install 'rankseam[bench-reference]')"
    return None


class Bm25sSearch(FloorSearch):
    """The floor with bm25s (a BM25 over scipy sparse matrices, its own English stop words)
    in place of FTS5: the live texts indexed once (untimed), the question's best ``k`` by
    bm25s, fused by RRF with the same numpy cosine; what a user who picked bm25s + numpy
    would write."""

    def __init__(self, path: str, embedder: Any) -> None:
        import bm25s

        super().__init__(path, embedder)
        sql = "SELECT rid, text FROM revisions WHERE live = 1"
        texts = dict(self._conn.execute(sql).fetchall())
        self._bm25s = bm25s
        self._retriever = bm25s.BM25()
        self._retriever.index(
            bm25s.tokenize(
                [texts[r] for r in self._rids.tolist()], stopwords="en", show_progress=False
            ),
            show_progress=False,
        )

    def lexical(self, query: str, k: int) -> list[int]:
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.ids or not tokens.ids[0]:
            return []
        docs, scores = self._retriever.retrieve(
            tokens, k=min(k, len(self._rids)), show_progress=False
        )
        return [int(self._rids[i]) for i, s in zip(docs[0], scores[0], strict=True) if s > 0]


def _ingest_child(path: str, size: int, corpus: str, progress: bool) -> dict[str, Any]:
    import rankseam

    # the records are made before the clock starts: the rate is the store's, not the corpus
    # generator's (which takes about 7 µs per LoCoMo-derived record)
    records = [
        {**record, "metadata": {"bucket": n % FILTER_BUCKETS}}
        for n, record in enumerate(corpus_texts(corpus, size))
    ]
    memory = rankseam.open_memory(path, create=True)  # a new store, named by its size
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
        "peak_rss_mib_ingest": peak_rss_mib(),
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


def _search_child(blas: int | None, *args: Any) -> dict[str, Any]:
    """:func:`_timed_searches` with numpy's BLAS pool held to ``blas`` threads (``None``:
    numpy's own number)."""
    with blas_threads(blas):
        return _timed_searches(*args)


def _timed_searches(
    path: str,
    policies: Sequence[str],
    count: int,
    limit: int,
    pool: int,
    progress: bool,
    config: Mapping[str, Any],
    corpus: str = "synthetic",
    floor: bool = False,
    in_blocks: bool = False,
) -> dict[str, Any]:
    """Each policy, the floor and (where bm25s is installed) the bm25s reference, interleaved
    query by query; ``in_blocks``: each one's searches one after another instead (with
    numpy's default pool, where what BLAS threads spin after a search is billed to the next
    search, which is then one of the same kind)."""
    import rankseam
    from rankseam.bench.policies import parse_search
    from rankseam.search.channels.base import over_fetch

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
        if name == "filtered":
            continue
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
    references: dict[str, FloorSearch] = {}
    if floor:
        references["floor"] = FloorSearch(path, memory.embedder)
        if bm25s_missing() is None:
            references["bm25s"] = Bm25sSearch(path, memory.embedder)
        names += list(references)
    times: dict[str, list[float]] = {p: [] for p in names}
    cpu: dict[str, list[float]] = {p: [] for p in names}
    calls: dict[str, list[float]] = {p: [] for p in names}
    if in_blocks:  # each name's searches one after another
        schedule = [(i, q, name) for name in names for i, q in enumerate(qs)]
    else:  # query by query, the names rotated
        schedule = [
            (i, q, name)
            for i, q in enumerate(qs)
            for name in names[i % len(names) :] + names[: i % len(names)]
        ]
    bar = progress_bar(len(schedule), "search", progress)
    try:
        for i, q, name in schedule:
            gc.collect(1)
            clock = Clock.now()
            if name in references:
                references[name].search(q, over_fetch(pool), limit)
                result = None
            elif name == "filtered":
                result = memory.search(
                    q,
                    limit=limit,
                    reranker=None,
                    pool=pool,
                    where={"bucket": i % FILTER_BUCKETS},
                )
            else:
                base, _at, variant = name.partition("@")
                reranker = None if base == "none" else base
                result = memories[variant].search(q, limit=limit, reranker=reranker, pool=pool)
            wall_ms, cpu_ms = clock.since()
            if i >= 3:  # the first queries warm caches
                times[name].append(wall_ms)
                cpu[name].append(cpu_ms)
                if result is not None and result.trace.rerank is not None:
                    calls[name].append(result.trace.rerank.latency_ms)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        for reference in references.values():
            reference.close()
        for each in memories.values():
            each.close()
    out: dict[str, Any] = {p: {**stats(t), **cpu_stats(cpu[p])} for p, t in times.items()}
    out.update(opened)
    for p, c in calls.items():
        if c:
            out[p].update(call_stats(c))
    out["peak_rss_mib_search"] = peak_rss_mib()
    return out


def _ann_recall_child(path: str, corpus: str, count: int, pool: int) -> dict[str, Any]:
    """Recall of the vector channel through the ANN index against exact search, on the
    corpus's queries: recall@pool (the exact best ``pool`` found among the ANN's best
    ``pool``) and recall@k over the channel's whole list (``k = over_fetch(pool)``), with the
    channel's own p50 both ways."""
    import rankseam
    from rankseam.search.channels.base import over_fetch
    from rankseam.sqlite import SQLiteStore

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
    blas: int | None = 1,
    default_pool: bool = False,
) -> dict[str, dict[str, Any]]:
    """p50/p95 of ``Memory.search`` per policy (``none`` = no reranker, else a reranker name,
    built from ``config`` in the ``rankseam.toml`` layout) and of the floor
    (:class:`FloorSearch`, up to ``floor_max_size`` memories) at each store size,
    interleaved query by query, wall and CPU time; for a reranker also its call inside the
    search (``call_*``). ``store_dir`` keeps the stores (and reuses them in later runs); else
    they are temporary. ``blas``: numpy's BLAS threads while searching (``None``: numpy's own
    number; one by default, see :mod:`rankseam.bench.timing`). ``default_pool``: then the
    default search (``none``), the floor and the bm25s reference once more in a child with
    numpy's BLAS pool as numpy sets it, each one's searches in a block (rows ``NAME [default
    pool]``: the BLAS threads' spinning after a search is billed to the next of its kind)."""
    check_corpus(corpus)
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="rankseam-latency-", dir=workdir) as tmp:
        folder = Path(store_dir) if store_dir is not None else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            path, row = prepared_store(folder, corpus, size, progress)
            floor = size <= floor_max_size

            def searched(
                threads: int | None,
                names: list[str],
                in_blocks: bool,
                path: str = path,
                floor: bool = floor,
            ) -> Any:
                return _in_child(
                    _search_child,
                    threads,
                    path,
                    names,
                    queries,
                    limit,
                    pool,
                    progress,
                    dict(config or {}),
                    corpus,
                    floor,
                    in_blocks,
                )

            row.update(searched(blas, list(policies), False))
            if default_pool:
                pooled = searched(None, ["none"], True)
                for name in ("none", *REFERENCES):
                    if isinstance(pooled.get(name), dict):
                        row[f"{name}{DEFAULT_POOL}"] = pooled[name]
            recall = _in_child(_ann_recall_child, path, corpus, queries, pool)
            if recall:
                row["ann_recall"] = recall
            _add_ratios(row, policies)
            out[str(size)] = row
    return out


def _add_ratios(row: dict[str, Any], policies: Sequence[str]) -> None:
    """Wall and CPU ratios of one size's row, on p50s: ``none`` to the floor
    (``none_to_floor``, ``cpu_none_to_floor``) and to bm25s (``none_to_bm25s``,
    ``cpu_none_to_bm25s``), each policy and reference to ``none`` (``ratio_to_none``,
    ``cpu_ratio_to_none``), and a row of the default pool to ``none`` of the default pool.
    A ratio without its divisor is left out."""
    base = row.get("none")
    for ref in REFERENCES:
        other = row.get(ref)
        for key, field in ((f"none_to_{ref}", "p50_ms"), (f"cpu_none_to_{ref}", "cpu_p50_ms")):
            value = ratio(base, other if isinstance(other, dict) else None, field)
            if value is not None:
                row[key] = value
    pooled = row.get(f"none{DEFAULT_POOL}")
    for name in [*policies, *REFERENCES, *(f"{n}{DEFAULT_POOL}" for n in ("none", *REFERENCES))]:
        m = row.get(name)
        if not isinstance(m, dict):
            continue
        divisor = pooled if name.endswith(DEFAULT_POOL) else base
        for key, field in (("ratio_to_none", "p50_ms"), ("cpu_ratio_to_none", "cpu_p50_ms")):
            value = ratio(m, divisor, field)
            if value is not None:
                m[key] = value
