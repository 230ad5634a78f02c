"""The quality benchmark: every policy over the same stores and queries, side by side.

One store per collection is built in a scratch folder; each query is searched once per policy
through the public API (``Memory.search``); the hits and the whole coarse pool are mapped to
groups and scored with :mod:`rankseam.bench.metrics`.

Per query and policy (``limit`` hits requested, coarse pool ``pool``):

- ``recall@5``, ``recall@10``, ``ndcg@10``, ``mrr`` (over the returned hits), ``dup_slot@5``;
- ``pool_recall``: recall over the whole coarse pool — the ceiling no reranker can pass;
- ``calls_per_query``: model calls of the rerank stage (0 without one), tokens in the details;
- ``kept_share`` (details): hits returned over ``min(limit, pool)``; below 1 where a policy
  drops candidates (the ``decision`` reranker keeps what its backend does not answer NO);
- BEIR runs also report ``recall@100`` in the details.

``mmr_gate``: HotMem's entry gate for MMR (diversify only where the coarse top 5 repeats a
group in more than 20 % of its slots), read off each column without a reranker: its
``dup_slot@5`` and whether MMR's use is advised (see docs/plugins/mmr.md).

Headline figures average the queries of categories 1–4 (LoCoMo); category 5 has its own line;
BEIR queries have no category and all count.

Several embedders (``embedders=("hashed", "sentence-transformers")``) run side by side in one
call: each embedder builds its own stores (``open_memory(path, embedder=NAME)``) and every policy
runs on each; columns are then labelled ``NAME/policy`` (one embedder: just ``policy``).
``config`` holds component options in the ``rankseam.toml`` layout (e.g.
``{"decision_backends": {"similarity": {"no_threshold": 0.4}}}``) for every store of the run.
"""

from __future__ import annotations

import inspect
import logging
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from rankseam.bench.datasets import HEADLINE_CATEGORIES, Collection, Dataset, Query
from rankseam.bench.kept_stores import check_kept_store, kept_store_path, mark_kept_store
from rankseam.bench.metrics import dup_slot_at_k, mean, mrr, ndcg_at_k, percentile, recall_at_k
from rankseam.bench.paired import paired
from rankseam.bench.policies import PolicySpec, SearchVariant
from rankseam.errors import ConfigurationError

#: The name under which the studies in docs/studies/ import the kept store's path.
_kept_store = kept_store_path

__all__ = [
    "MMR_GATE_DUP_SLOT",
    "POLICY_KEYS",
    "Column",
    "check_policies",
    "columns_for",
    "mmr_gate",
    "run_quality",
    "score_query",
]

log = logging.getLogger("rankseam.bench")

#: The stable keys of ``policies.<label>`` in report.json (do not rename).
POLICY_KEYS = (
    "recall@5",
    "recall@10",
    "ndcg@10",
    "mrr",
    "dup_slot@5",
    "pool_recall",
    "calls_per_query",
)
#: HotMem's entry gate for MMR: advised where the coarse dup-slot@5 is above this share.
MMR_GATE_DUP_SLOT = 0.2
_DETAIL_KEYS = ("input_tokens_per_query", "output_tokens_per_query", "recall@100", "kept_share")


@attrs.frozen
class Column:
    """One column of the report: a policy run with one search variant on the stores of one
    embedder."""

    label: str
    spec: PolicySpec
    embedder: str | None
    variant: SearchVariant = attrs.field(factory=SearchVariant)


def columns_for(
    policies: Sequence[PolicySpec],
    embedders: Sequence[str] = (),
    variants: Sequence[SearchVariant] = (),
) -> list[Column]:
    """The columns of a run, embedder by embedder, then search variant by variant. A column
    is labelled ``EMBEDDER/VARIANT/policy``, where the embedder appears only when there are
    several and the variant only when ``variants`` is given."""
    if len(set(embedders)) != len(embedders):
        raise ConfigurationError(f"--embedder lists an embedder twice: {list(embedders)}")
    names: list[str | None] = list(embedders) if embedders else [None]
    out = []
    for e in names:
        for v in variants or [SearchVariant()]:
            for p in policies:
                parts = [e] if len(embedders) > 1 and e else []
                parts += [v.label] if variants else []
                out.append(Column("/".join([*parts, p.label]), p, e, v))
    return out


def check_policies(
    policies: Sequence[PolicySpec],
    config: Mapping[str, Any] | None = None,
    embedders: Sequence[str] = (),
    variants: Sequence[SearchVariant] = (),
    store_url: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Build every embedder and reranker once, before any store is built, so that a missing
    plugin or a bad option fails in a second, not after ingest; so does every search
    variant's assembly (with the sources of ``store_url``'s store, when given). Returns
    ``label -> {policy_id, descriptor}``."""
    from rankseam.assembly import ComponentContext
    from rankseam.config import Config
    from rankseam.registry import TABLE_FOR_KIND

    def with_store(mapping: Mapping[str, Any] | None) -> dict[str, Any]:
        out = dict(mapping or {})
        if store_url is not None:
            out["db"] = store_url.replace("{name}", "check")  # only its scheme is read
        return out

    for variant in variants:
        vcfg = Config.from_mapping(
            with_store(variant.config(config)), source=f"--search {variant.label}"
        )
        vcontext = ComponentContext(vcfg)
        for name in vcfg.search.sources:
            vcontext.build("candidate_source", name)
    cfg = Config.from_mapping(with_store(config), source="bench --option")
    context = ComponentContext(cfg)
    for name in embedders:
        context.build("embedder", name)
    kinds = {table: kind for kind, table in TABLE_FOR_KIND.items()}
    for table, named in cfg.components.items():
        # rerankers are built below, once per column; stores when each store is opened
        if table not in ("rerankers", "stores"):
            for name in named:
                context.build(kinds[table], name)  # a typo in --option fails here
    out: dict[str, dict[str, Any]] = {}
    for spec in policies:
        if spec.reranker is None:
            out[spec.label] = {"policy_id": None, "descriptor": {}}
            continue
        reranker = context.reranker(spec.reranker, dict(spec.options))
        descriptor = getattr(reranker, "descriptor", None)
        out[spec.label] = {
            "policy_id": getattr(reranker, "policy_id", None),
            "descriptor": dict(descriptor) if isinstance(descriptor, Mapping) else {},
        }
    return out


def score_query(
    hit_groups: Sequence[str],
    pool_groups: Sequence[str],
    relevance: Mapping[str, float],
) -> dict[str, float]:
    """The per-query metrics of one policy from the groups of its hits and of its pool."""
    return {
        "recall@5": recall_at_k(hit_groups, relevance, 5),
        "recall@10": recall_at_k(hit_groups, relevance, 10),
        "ndcg@10": ndcg_at_k(hit_groups, relevance, 10),
        "mrr": mrr(hit_groups, relevance),
        "dup_slot@5": dup_slot_at_k(hit_groups, 5),
        "pool_recall": recall_at_k(pool_groups, relevance, max(len(pool_groups), 1)),
        "recall@100": recall_at_k(hit_groups, relevance, 100),
    }


def _resolve(value: Any) -> Any:
    if inspect.isawaitable(value):
        import asyncio

        async def wait() -> Any:
            return await value

        return asyncio.run(wait())
    return value


def _usage_of(result: Any) -> tuple[int, int, int]:
    rerank = result.trace.rerank
    if rerank is None:
        return 0, 0, 0
    usage = rerank.usage
    return usage.calls, usage.input_tokens or 0, usage.output_tokens or 0


def _aggregate(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    keys = (*POLICY_KEYS, *_DETAIL_KEYS, "search_ms")
    return {k: mean([r[k] for r in rows]) for k in keys if not rows or k in rows[0]}


def _flat(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    agg = _aggregate(rows)
    return {k: round(agg.get(k, 0.0), 6) for k in POLICY_KEYS}


def run_quality(
    dataset: Dataset,
    policies: Sequence[PolicySpec],
    *,
    limit: int = 10,
    pool: int = 30,
    workdir: str | Path | None = None,
    progress: bool = False,
    open_memory: Callable[..., Any] | None = None,
    embedders: Sequence[str] = (),
    config: Mapping[str, Any] | None = None,
    variants: Sequence[SearchVariant] = (),
    stores: str | Path | None = None,
    store_url: str | None = None,
) -> dict[str, Any]:
    """Run every policy over ``dataset`` (on the stores of each of ``embedders``; none given:
    the configured default embedder), with each search variant (``variants``; none given: the
    configured search); return the report body (see :mod:`reports`). Every variant searches
    the same stores: each store is ingested once per embedder.

    ``stores`` keeps the stores in that folder instead of a scratch one, and a later run
    with the same collection and embedder reuses them without ingesting again (a store whose
    marker names other records or another embedding space is refused).

    ``store_url`` puts each store at that URL instead of a scratch SQLite file (another store
    backend, e.g. ``postgresql://me@/bench?schema={name}``): ``{name}`` is replaced by a name
    of this run and store, so every store starts empty."""
    if not policies:
        raise ConfigurationError("no policy to benchmark; pass e.g. --rerank none,identity")
    if store_url is not None and (stores is not None or "{name}" not in store_url):
        raise ConfigurationError(
            "--store-url needs a {name} placeholder (each store gets its own, e.g. "
            "postgresql://me@/bench?schema={name}) and cannot be combined with --stores"
        )
    run_id = uuid.uuid4().hex[:8]
    if open_memory is None:
        import rankseam

        open_memory = rankseam.open_memory
    embedders = list(embedders)
    variants = list(variants)
    columns = columns_for(policies, embedders, variants)
    described = check_policies(policies, config, embedders, variants, store_url)
    rows: dict[str, list[tuple[Query, dict[str, float]]]] = {c.label: [] for c in columns}
    status_counts: dict[str, dict[str, int]] = {c.label: {} for c in columns}
    started = time.perf_counter()
    ingest_by: dict[str, float] = {}
    assembly: dict[str, dict[str, Any]] = {}
    bar = _progress(dataset.query_count * len(columns), progress)
    with tempfile.TemporaryDirectory(prefix="rankseam-bench-", dir=workdir) as tmp:
        for e_index, embedder in enumerate(embedders or [None]):
            key = embedder or "default"
            these = [c for c in columns if c.embedder == embedder]
            kwargs: dict[str, Any] = {}
            if embedder is not None:
                kwargs["embedder"] = embedder
            if config:
                kwargs["config"] = dict(config)
            ingest_by[key] = 0.0
            for index, collection in enumerate(dataset.collections):
                kept = None
                if store_url is not None:
                    target = store_url.replace("{name}", f"q{run_id}_{e_index}_{index}")
                elif stores is None:
                    target = str(Path(tmp) / f"store-{e_index}-{index}.sqlite3")
                else:
                    kept = kept_store_path(Path(stores), dataset, collection, key)
                    target = str(kept)
                reuse = kept is not None and kept.exists()
                # a new store of this run: created as asked, without open_memory's check for a
                # mistyped name (the stores of a run are named alike on purpose)
                fresh: dict[str, Any] = {"create": True} if store_url is None and not reuse else {}
                memory = open_memory(target, **kwargs, **fresh)
                try:
                    if key not in assembly:
                        assembly[key] = _assembly(memory)
                    t0 = time.perf_counter()
                    if reuse and kept is not None:
                        check_kept_store(memory, kept, collection)
                    else:
                        _resolve(memory.ingest(r.to_ingest() for r in collection.records))
                        if kept is not None:
                            mark_kept_store(memory, kept, collection)
                    ingest_by[key] += time.perf_counter() - t0
                    for variant in variants or [SearchVariant()]:
                        mine = [c for c in these if c.variant == variant]
                        if not variant.search and not variant.sources:
                            _search_collection(
                                memory, collection, mine, limit, pool, rows, status_counts, bar
                            )
                            continue
                        other = open_memory(target, **{**kwargs, "config": variant.config(config)})
                        try:
                            if f"{key}/{variant.label}" not in assembly:
                                assembly[f"{key}/{variant.label}"] = _assembly(other)
                            _search_collection(
                                other, collection, mine, limit, pool, rows, status_counts, bar
                            )
                        finally:
                            close = getattr(other, "close", None)
                            if callable(close):
                                close()
                finally:
                    close = getattr(memory, "close", None)
                    if callable(close):
                        close()
    if bar is not None:
        bar.close()
    elapsed = time.perf_counter() - started
    body = _summarise(
        dataset,
        columns,
        described,
        rows,
        status_counts,
        limit,
        pool,
        elapsed,
        sum(ingest_by.values()),
    )
    body["configuration"]["search"] = next(iter(assembly.values()), {})
    body["configuration"]["embedders"] = embedders or None
    if variants:
        body["configuration"]["search_variants"] = [v.to_dict() for v in variants]
        body["configuration"]["search_by_variant"] = {k: v for k, v in assembly.items() if "/" in k}
    body["configuration"]["components"] = {k: dict(v) for k, v in (config or {}).items()}
    if len(embedders) > 1:
        body["configuration"]["search_by_embedder"] = assembly
        body["timing"]["ingest_s_by_embedder"] = {k: round(v, 3) for k, v in ingest_by.items()}
    return body


def _assembly(memory: Any) -> dict[str, Any]:
    """What the stores searched with: embedder space, sources, fusion (best effort)."""
    out: dict[str, Any] = {}
    config = getattr(memory, "config", None)
    search = getattr(config, "search", None)
    if search is not None:
        out.update(sources=list(search.sources), fusion=search.fusion, max_chars=search.max_chars)
        out["weights"] = dict(search.weights)
        out["scales"] = dict(getattr(search, "scales", {}))
    embedder = getattr(memory, "embedder", None)
    descriptor = getattr(embedder, "descriptor", None)
    if descriptor is not None and hasattr(descriptor, "to_dict"):
        out["embedder"] = descriptor.to_dict()
        out["embedder"]["fusion_weight"] = getattr(descriptor, "fusion_weight", None)
        out["embedder"]["fusion_scale"] = getattr(descriptor, "fusion_scale", None)
    return out


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # progress bars are a convenience of the bench extra
        return None
    return tqdm(total=total, unit="search", desc="quality", leave=False, disable=None)


def _search_collection(
    memory: Any,
    collection: Collection,
    columns: Sequence[Column],
    limit: int,
    pool: int,
    rows: dict[str, list[tuple[Query, dict[str, float]]]],
    status_counts: dict[str, dict[str, int]],
    bar: Any,
) -> None:
    group_of = collection.group_of()

    def group(memory_id: str, metadata: Mapping[str, Any] | None = None) -> str:
        found = group_of.get(memory_id)
        if found is None and metadata:
            found = metadata.get("group")
        return str(found if found is not None else memory_id)

    for query in collection.queries:
        for column in columns:
            spec = column.spec
            t0 = time.perf_counter()
            result = _resolve(
                memory.search(
                    query.text,
                    limit=limit,
                    reranker=spec.reranker,
                    reranker_options=dict(spec.options) or None,
                    pool=pool,
                )
            )
            search_ms = (time.perf_counter() - t0) * 1000.0
            hit_groups = [group(h.ref.memory_id, h.metadata) for h in result.hits]
            pool_groups = [group(c.ref.memory_id) for c in result.trace.coarse]
            row = score_query(hit_groups, pool_groups, query.relevance)
            calls, tin, tout = _usage_of(result)
            row.update(
                calls_per_query=float(calls),
                input_tokens_per_query=float(tin),
                output_tokens_per_query=float(tout),
                search_ms=search_ms,
                kept_share=(
                    len(result.hits) / min(limit, len(result.trace.coarse))
                    if result.trace.coarse
                    else 1.0
                ),
            )
            rows[column.label].append((query, row))
            status = result.trace.status.value
            counts = status_counts[column.label]
            counts[status] = counts.get(status, 0) + 1
            if bar is not None:
                bar.update(1)


def mmr_gate(
    columns: Sequence[Column], headline: Mapping[str, Mapping[str, float]]
) -> dict[str, Any]:
    """HotMem's MMR gate per column without a reranker (the coarse order): its ``dup_slot@5``
    and ``mmr_advised`` (above :data:`MMR_GATE_DUP_SLOT`); ``coarse`` is empty when the run
    has no such column."""
    coarse = {
        c.label: {
            "dup_slot@5": headline[c.label]["dup_slot@5"],
            "mmr_advised": headline[c.label]["dup_slot@5"] > MMR_GATE_DUP_SLOT,
        }
        for c in columns
        if c.spec.reranker is None
    }
    return {"metric": "dup_slot@5", "threshold": MMR_GATE_DUP_SLOT, "coarse": coarse}


def _summarise(
    dataset: Dataset,
    columns: Sequence[Column],
    described: Mapping[str, Mapping[str, Any]],
    rows: Mapping[str, Sequence[tuple[Query, dict[str, float]]]],
    status_counts: Mapping[str, Mapping[str, int]],
    limit: int,
    pool: int,
    elapsed: float,
    ingest_s: float,
) -> dict[str, Any]:
    has_categories = dataset.kind == "locomo"
    heads: dict[str, list[dict[str, float]]] = {}
    headline: dict[str, Any] = {}
    category_5: dict[str, Any] = {}
    by_category: dict[str, Any] = {}
    details: dict[str, Any] = {}
    for column in columns:
        spec, label = column.spec, column.label
        all_rows = rows[label]
        if has_categories:
            head = [r for q, r in all_rows if q.category in HEADLINE_CATEGORIES]
            adversarial = [r for q, r in all_rows if q.category == 5]
            category_5[label] = {**_flat(adversarial), "queries": len(adversarial)}
            cats: dict[str, Any] = {}
            for cat in sorted({q.category for q, _ in all_rows if q.category is not None}):
                these = [r for q, r in all_rows if q.category == cat]
                cats[str(cat)] = {**_flat(these), "queries": len(these)}
            by_category[label] = cats
        else:
            head = [r for _, r in all_rows]
        headline[label] = _flat(head)
        heads[label] = head
        agg = _aggregate(head)
        times = [r["search_ms"] for _, r in all_rows]
        details[label] = {
            **described[spec.label],
            "embedder": column.embedder,
            "search": column.variant.label,
            "policy": spec.label,
            "reranker": spec.reranker,
            "options": dict(spec.options),
            "queries": len(head),
            "input_tokens_per_query": round(agg.get("input_tokens_per_query", 0.0), 3),
            "output_tokens_per_query": round(agg.get("output_tokens_per_query", 0.0), 3),
            "kept_share": round(agg.get("kept_share", 1.0), 4),
            "search_ms_p50": round(percentile(times, 50), 3) if times else None,
            "search_ms_p95": round(percentile(times, 95), 3) if times else None,
            "status_counts": dict(status_counts[label]),
        }
        if dataset.kind == "beir":
            details[label]["recall@100"] = round(agg.get("recall@100", 0.0), 6)
    body: dict[str, Any] = {
        "kind": "quality",
        "dataset": {"name": dataset.name, "source": dataset.source, **dict(dataset.stats)},
        "configuration": {
            "dataset": dataset.name,
            "limit": limit,
            "pool": pool,
            "policies": list({c.spec.label: c.spec.to_dict() for c in columns}.values()),
            "headline_categories": list(HEADLINE_CATEGORIES) if has_categories else None,
        },
        "policies": headline,
        "mmr_gate": mmr_gate(columns, headline),
        "paired": paired([c.label for c in columns], heads),
        "details": details,
        "timing": {"elapsed_s": round(elapsed, 3), "ingest_s": round(ingest_s, 3)},
    }
    if has_categories:
        body["category_5"] = category_5
        body["by_category"] = by_category
    return body
