"""The rerank stage of the latency benchmark, and the reference MMR comparison.

- **rerank stage**: :func:`rankseam.seam.rerank_pool` over synthetic candidates (384-dim unit
  vectors) for every installed reranker that can be built with its default options (others are
  listed as skipped, with the reason), plus ``none`` (the disabled path). Ratio: to identity.
- **reference MMR**: when the ``mmr`` reranker is installed and ``langchain-core`` importable,
  ``maximal_marginal_relevance`` on identical inputs: selections compared, time ratio.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rankseam.bench import synthetic
from rankseam.bench.metrics import percentile
from rankseam.bench.timing import call_stats, progress_bar, stats
from rankseam.errors import ConfigurationError

__all__ = [
    "CANDIDATE_COUNTS",
    "DIMENSIONS",
    "build_rerankers",
    "reference_mmr",
    "time_rerank_stage",
]

DIMENSIONS = 384
CANDIDATE_COUNTS = (20, 50)


def build_rerankers(
    names: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    config: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Build each reranker with its ``options`` (default: none) in a context configured with
    ``config`` (other components' options, ``rankseam.toml`` layout); list the ones that cannot
    be built (typically: a backend must be chosen) with the reason."""
    from rankseam.assembly import ComponentContext
    from rankseam.config import Config

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
    from rankseam.sqlite.vector_cache import decode_vectors, encode_vector

    query = synthetic.queries(1)[0]
    out: dict[str, dict[str, dict[str, float]]] = {name: {} for name in rerankers}
    bar = progress_bar(len(counts) * (repeats + warmup), "rerank stage", progress)

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
                out[name][str(n)] = stats(times[name])
                if calls[name]:
                    out[name][str(n)].update(call_stats(calls[name]))

    asyncio.run(run())
    if bar is not None:
        bar.close()
    base = out.get("identity")
    for per_n in out.values():
        for n, m in per_n.items():
            if base and n in base and base[n]["p50_ms"] > 0:
                m["ratio_to_identity"] = round(m["p50_ms"] / base[n]["p50_ms"], 3)
    return out


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
