"""The latency benchmark: rerank stage, whole search, ingest, disabled path, reference MMR.

Everything is measured side by side in one run and reported with ratios, because absolute
times on a small shared machine are noisy:

- **rerank stage** — :func:`rankseam.seam.rerank_pool` over synthetic candidates (384-dim unit
  vectors) for every installed reranker that can be built with its default options (others are
  listed as skipped, with the reason), plus ``none`` (the disabled path). Ratio: to identity.
- **whole search** — ``Memory.search`` at several store sizes, policies ``none`` and
  ``identity`` interleaved query by query. Ratio: to none. Each size is ingested in one child
  process (throughput in memories/s) and searched in another, so that each peak RSS
  (``resource.getrusage``) belongs to that step alone.
- **reference MMR** — when the ``mmr`` reranker is installed and ``langchain-core`` importable,
  ``maximal_marginal_relevance`` on identical inputs: selections compared, time ratio.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import resource
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


def _ingest_child(path: str, size: int, progress: bool) -> dict[str, Any]:
    import rankseam

    memory = rankseam.open_memory(path)
    try:
        t0 = time.perf_counter()
        memory.ingest(synthetic.texts(size), batch_size=1000, progress=progress)
        elapsed = time.perf_counter() - t0
    finally:
        close = getattr(memory, "close", None)
        if callable(close):
            close()
    return {
        "ingest_s": round(elapsed, 3),
        "ingest_per_s": round(size / elapsed, 1) if elapsed > 0 else None,
        "peak_rss_mib_ingest": _peak_rss_mib(),
    }


def _search_child(
    path: str,
    policies: Sequence[str],
    count: int,
    limit: int,
    pool: int,
    progress: bool,
    config: Mapping[str, Any],
) -> dict[str, Any]:
    import rankseam
    from rankseam.bench.policies import parse_search

    # "NAME@VARIANT" searches a second Memory over the same store, assembled with the search
    # variant (e.g. none@fusion=rrf), so assemblies are compared query by query in one process.
    memories: dict[str, Any] = {}
    for name in policies:
        _reranker, _at, variant = name.partition("@")
        if variant not in memories:
            memories[variant] = rankseam.open_memory(
                path, config=parse_search(variant).config(config) if variant else config
            )
    times: dict[str, list[float]] = {p: [] for p in policies}
    calls: dict[str, list[float]] = {p: [] for p in policies}
    qs = synthetic.queries(count + 3)
    bar = _bar(len(qs), "search", progress)
    try:
        for i, q in enumerate(qs):
            rotated = list(policies[i % len(policies) :]) + list(policies[: i % len(policies)])
            for name in rotated:
                base, _at, variant = name.partition("@")
                reranker = None if base == "none" else base
                memory = memories[variant]
                t0 = time.perf_counter()
                result = memory.search(q, limit=limit, reranker=reranker, pool=pool)
                if i >= 3:  # the first queries warm caches
                    times[name].append((time.perf_counter() - t0) * 1000.0)
                    if result.trace.rerank is not None:
                        calls[name].append(result.trace.rerank.latency_ms)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        for memory in memories.values():
            memory.close()
    out: dict[str, Any] = {p: _stats(t) for p, t in times.items()}
    for p, c in calls.items():
        if c:
            out[p].update(_call_stats(c))
    out["peak_rss_mib_search"] = _peak_rss_mib()
    return out


def _in_child(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


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
) -> dict[str, dict[str, Any]]:
    """p50/p95 of ``Memory.search`` per policy (``none`` = no reranker, else a reranker name,
    built from ``config`` in the ``rankseam.toml`` layout) at each store size, interleaved
    query by query; for a reranker also its call inside the search (``call_*``)."""
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="rankseam-latency-", dir=workdir) as tmp:
        for size in sizes:
            path = str(Path(tmp) / f"store-{size}.sqlite3")
            row = _in_child(_ingest_child, path, size, progress)
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
                )
            )
            base = row.get("none")
            for name in policies:
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
) -> dict[str, Any]:
    """The whole latency benchmark; returns the report body. ``options`` maps a reranker name
    to the options it is built with; ``config`` holds other components' options
    (``{"decision_backends": {NAME: {...}}}``). ``search_policies``: ``none`` and reranker
    names timed in whole searches."""
    from rankseam.plugins import get_registry

    say = echo or (lambda _msg: None)
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
        say(f"whole search at {list(sizes)} memories (ingest, then {' vs '.join(search_policies)})")
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
