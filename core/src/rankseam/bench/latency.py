"""The latency benchmark: rerank stage, whole search, ingest, disabled path, reference MMR.

Everything is measured side by side in one run and reported with ratios, because absolute
times on a small shared machine are noisy:

- **rerank stage** (:mod:`rankseam.bench.rerank_stage`): ``rerank_pool`` over synthetic
  candidates for every installed reranker that can be built, plus ``none`` (the disabled
  path). Ratio: to identity.
- **whole search** (:mod:`rankseam.bench.whole_search`): ``Memory.search`` at several store
  sizes, policies ``none`` and ``identity`` interleaved query by query with the **floor** (a
  plain numpy cosine plus the same FTS5 query, fused by RRF), wall time and CPU time per
  search. Ratios: to none, and none to the floor.
- **reference MMR**: ``mmr`` against langchain-core's ``maximal_marginal_relevance``.

This module assembles the report; the names it used to hold are still importable from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rankseam.bench.rerank_stage import (
    CANDIDATE_COUNTS,
    DIMENSIONS,
    build_rerankers,
    reference_mmr,
    time_rerank_stage,
)
from rankseam.bench.whole_search import (
    CORPORA,
    FLOOR_MAX_SIZE,
    SEARCH_POLICIES,
    FloorSearch,
    check_corpus,
    corpus_queries,
    corpus_texts,
    default_corpus,
    prepared_store,
    time_whole_search,
    warm_file_cache,
)
from rankseam.errors import ConfigurationError

__all__ = [
    "CANDIDATE_COUNTS",
    "CORPORA",
    "DEFAULT_SIZES",
    "DIMENSIONS",
    "FLOOR_MAX_SIZE",
    "QUICK_SIZES",
    "SEARCH_POLICIES",
    "FloorSearch",
    "check_corpus",
    "corpus_queries",
    "corpus_texts",
    "default_corpus",
    "prepared_store",
    "reference_mmr",
    "run_latency",
    "time_rerank_stage",
    "time_whole_search",
    "warm_file_cache",
]

DEFAULT_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (300, 1_000)


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
    blas: int | None = 1,
    default_pool: bool = False,
) -> dict[str, Any]:
    """The whole latency benchmark; returns the report body. ``options`` maps a reranker name
    to the options it is built with; ``config`` holds other components' options
    (``{"decision_backends": {NAME: {...}}}``). ``search_policies``: ``none`` and reranker
    names timed in whole searches. ``corpus``: ``locomo`` or ``synthetic`` (default: locomo
    when its data is found). ``store_dir``: keep the stores there and reuse them. ``blas``:
    numpy's BLAS threads during whole searches (``None``: numpy's own number);
    ``default_pool``: the default search and the references timed again with numpy's own
    pool."""
    from rankseam.plugins import get_registry

    say = echo or (lambda _msg: None)
    corpus = corpus or default_corpus()
    check_corpus(corpus)
    reranker_options = {k: dict(v) for k, v in (options or {}).items()}
    names = get_registry().names("reranker")
    built, skipped = build_rerankers(names, reranker_options, config)
    search_policies = list(dict.fromkeys(search_policies))  # each once, in the order given
    for policy in search_policies:
        policy, _at, variant = policy.partition("@")
        if variant:
            from rankseam.bench.policies import parse_search
            from rankseam.config import Config

            Config.from_mapping(parse_search(variant).config(config), source=f"@{variant}")
        if policy not in ("none", "filtered") and policy not in built:
            why = skipped.get(policy) or f"no reranker named {policy!r} is installed"
            raise ConfigurationError(
                f"whole-search policy {policy!r}: {why}; choose from {['none', *sorted(built)]}"
            )
    stage_rerankers: dict[str, Any | None] = {"none": None, **built}
    say(f"rerank stage: {', '.join(stage_rerankers)} at {list(CANDIDATE_COUNTS)} candidates")
    stage = time_rerank_stage(stage_rerankers, limit=limit, repeats=repeats, progress=progress)
    reference: dict[str, Any] | None = None
    if "mmr" in names:
        from rankseam.assembly import ComponentContext
        from rankseam.config import Config

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
            blas=blas,
            default_pool=default_pool,
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
        if isinstance(ident, dict) and "cpu_ratio_to_none" in ident:
            disabled[f"search@{size} identity/none cpu"] = ident["cpu_ratio_to_none"]
    to_floor: dict[str, Any] = {}
    for size, row in search.items():
        for key, label in (
            ("none_to_floor", "none/floor"),
            ("cpu_none_to_floor", "none/floor cpu"),
            ("none_to_bm25s", "none/bm25s"),
            ("cpu_none_to_bm25s", "none/bm25s cpu"),
        ):
            if key in row:
                to_floor[f"search@{size} {label}"] = row[key]
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
            "blas_threads": blas,
            "default_pool": default_pool,
            "search_policies": list(search_policies),
            "reranker_options": reranker_options,
            "components": {k: dict(v) for k, v in (config or {}).items()},
        },
        "rerank_stage": stage,
        "skipped_rerankers": skipped,
        "whole_search": search,
        "disabled_path": disabled,
        "floor_ratios": to_floor,
    }
    if reference is not None:
        body["reference_mmr"] = reference
    largest = str(max(sizes)) if sizes else None
    if largest and largest in search:
        body["peak_rss_mib_largest_search"] = search[largest].get("peak_rss_mib_search")
    return body
