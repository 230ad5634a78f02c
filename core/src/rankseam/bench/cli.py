"""``rankseam bench``: quality, latency, re-embedding and start-up benchmarks (install
``rankseam[bench]``)."""

from __future__ import annotations

from pathlib import Path

import click

from rankseam.bench.cli_common import (
    POLICY_HELP,
    command_record,
    default_out,
    plot_option,
    progress_option,
)
from rankseam.bench.cli_reembed import reembed_bench
from rankseam.bench.cli_startup import cli_startup
from rankseam.errors import ConfigurationError

__all__ = ["bench"]


@click.group()
def bench() -> None:
    """Benchmarks: retrieval quality per policy and latency of the search path.

    Each command prints a summary and writes report.json, report.md and report.png to --out.
    """


@bench.command()
@click.option(
    "--dataset",
    default="locomo",
    show_default=True,
    help="'locomo', 'locomo:PATH' (LoCoMo-schema JSON), 'beir:PATH' (BEIR folder, split "
    "'test') or 'beir:PATH@SPLIT' (qrels/SPLIT.tsv, e.g. beir:../shared/data/scifact-train@train).",
)
@click.option(
    "--split",
    default=None,
    metavar="NAME",
    help="BEIR split whose queries and qrels are used (qrels/NAME.tsv) [default: test]; the "
    "same as beir:PATH@NAME.",
)
@click.option("--rerank", "rerank", default="none,identity", show_default=True, help=POLICY_HELP)
@click.option(
    "--policy",
    "policy",
    multiple=True,
    metavar="SPEC",
    help="One more policy spec (repeatable), e.g. --policy mmr:lambda=0.3.",
)
@click.option(
    "--search",
    "search",
    multiple=True,
    metavar="VARIANT",
    help="A search assembly to compare (repeatable; columns VARIANT/policy), over the same "
    "stores: 'default', or KEY=VALUE[:KEY=VALUE...] with KEY fusion, sources (a+b), "
    "weights.NAME or sources.NAME.OPTION, e.g. --search fusion=rrf --search sources=lexical; "
    "LABEL==VARIANT names the column.",
)
@click.option(
    "--embedder",
    "embedder",
    default=None,
    metavar="NAME[,NAME...]",
    help="Embedder(s) whose stores are searched [default: the configured one, 'hashed']. "
    "Several run side by side, each with its own stores; columns are then NAME/policy.",
)
@click.option(
    "--option",
    "option",
    multiple=True,
    metavar="[TABLE.]NAME.KEY=VALUE",
    help="NAME.KEY=VALUE: default option for every column of reranker NAME, e.g. "
    "--option mmr.lambda=0.7. TABLE.NAME.KEY=VALUE: an option of any component for the whole "
    "run, TABLE as in rankseam.toml (rerankers, decision_backends, generation_backends, "
    "embedders, sources), e.g. --option decision_backends.similarity.no_threshold=0.4.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 200),
    default=None,
    help="Hits requested per search [default: 10; 100 for BEIR].",
)
@click.option(
    "--pool",
    type=click.IntRange(1, 200),
    default=30,
    show_default=True,
    help="Coarse pool size (raised to --limit when smaller).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Report folder [default: bench-out/quality-<time>].",
)
@click.option(
    "--stores",
    "stores",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the stores in this folder and reuse them in later runs (no ingest; useful "
    "with a slow embedder) [default: a scratch folder, removed afterwards].",
)
@click.option(
    "--store-url",
    "store_url",
    default=None,
    metavar="URL",
    help="Build the stores at this URL (another store backend) instead of scratch SQLite "
    "files; {name} is replaced by a fresh name per store, e.g. "
    "'postgresql://me@/bench?schema={name}' with rankseam-postgres.",
)
@click.option(
    "--max-queries",
    type=click.IntRange(1),
    default=None,
    help="Use only the first N queries of each collection (smoke runs).",
)
@progress_option
@plot_option
def quality(
    dataset: str,
    split: str | None,
    rerank: str,
    policy: tuple[str, ...],
    search: tuple[str, ...],
    embedder: str | None,
    option: tuple[str, ...],
    limit: int | None,
    pool: int,
    out: Path | None,
    stores: Path | None,
    store_url: str | None,
    max_queries: int | None,
    progress: bool,
    plot: bool,
) -> None:
    """Recall@5/10, nDCG@10, MRR, dup-slot@5, pool recall and calls per query, per policy."""
    import attrs

    from rankseam.bench.datasets import load_dataset
    from rankseam.bench.policies import component_options, parse_policies, parse_searches
    from rankseam.bench.quality import run_quality
    from rankseam.bench.reports import (
        check_plotting,
        finish_report,
        quality_markdown,
        write_report,
    )

    if plot:
        check_plotting()
    tables = component_options(option)
    policies = parse_policies(rerank, policy, tables.pop("rerankers", {}))
    embedders = _names(embedder, "--embedder")
    variants = parse_searches(search) if search else []
    data = load_dataset(dataset, split=split)
    if max_queries is not None:
        data = attrs.evolve(
            data,
            collections=tuple(
                attrs.evolve(c, queries=c.queries[:max_queries]) for c in data.collections
            ),
        )
    if limit is None:
        limit = 100 if data.kind == "beir" else 10
    pool = max(pool, limit)
    click.echo(
        f"{data.name}: {data.record_count} memories in {len(data.collections)} store(s), "
        f"{data.query_count} queries; policies: {', '.join(p.label for p in policies)}"
        + (f"; embedders: {', '.join(embedders)}" if embedders else "")
        + (f"; search: {', '.join(v.label for v in variants)}" if variants else ""),
        err=True,
    )
    body = run_quality(
        data,
        policies,
        limit=limit,
        pool=pool,
        progress=progress,
        embedders=embedders,
        config=tables,
        variants=variants,
        stores=stores,
        store_url=store_url,
    )
    if store_url is not None:
        from rankseam.store.target import redact

        body["configuration"]["store_url"] = redact(store_url)
    if max_queries is not None:
        body["configuration"]["max_queries"] = max_queries
    report = finish_report(body, command=command_record())
    paths = write_report(report, out or default_out("quality"), plot=plot)
    click.echo(quality_markdown(report))
    click.echo(f"wrote {', '.join(str(p) for p in paths.values())}", err=True)


def _names(value: str | None, flag: str) -> list[str]:
    if value is None:
        return []
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise ConfigurationError(
            f"{flag} needs at least one name, e.g. {flag} hashed,sentence-transformers"
        )
    return names


def _sizes(value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        sizes = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise ConfigurationError(
            f"--sizes must be comma-separated integers, e.g. 1000,10000, got {value!r}"
        ) from None
    if any(s < 1 for s in sizes):
        raise ConfigurationError(f"--sizes must be positive, got {value!r}")
    return sizes


@bench.command()
@click.option(
    "--quick", is_flag=True, help="Small sizes and few repetitions (the nox bench session)."
)
@click.option(
    "--sizes",
    default=None,
    metavar="N,N,...",
    help="Store sizes for whole searches [default: 1000,10000,100000; --quick: 300,1000]; "
    "'' skips them.",
)
@click.option(
    "--repeats",
    type=click.IntRange(1),
    default=None,
    help="Rerank-stage repetitions per reranker and pool size [default: 300; --quick: 30].",
)
@click.option(
    "--queries",
    type=click.IntRange(1),
    default=None,
    help="Queries per store size and policy [default: 200; --quick: 30].",
)
@click.option(
    "--option",
    "option",
    multiple=True,
    metavar="[TABLE.]NAME.KEY=VALUE",
    help="Option for reranker NAME in the rerank-stage timing, e.g. --option "
    "decision.backend=heuristic --option listwise.backend=local; TABLE.NAME.KEY=VALUE sets "
    "another component's option, e.g. --option decision_backends.similarity.no_threshold=0.4.",
)
@click.option(
    "--search-rerank",
    "search_rerank",
    default="none,identity,filtered",
    show_default=True,
    metavar="NAME,NAME,...",
    help="Policies timed in whole searches, interleaved query by query: 'none' (no "
    "reranker), 'filtered' (no reranker, where= a metadata value 1% of the memories hold) "
    "and reranker names, built with the --option values, e.g. none,identity,mmr; "
    "NAME@VARIANT searches with a search variant as in `bench quality --search`, e.g. "
    "none,none@fusion=rrf compares the default fusion with RRF.",
)
@click.option(
    "--corpus",
    type=click.Choice(["locomo", "synthetic"]),
    default=None,
    help="Whole-search corpus: 'locomo' (LoCoMo dev memories, then memories spliced from "
    "their turns; LoCoMo questions) or 'synthetic' (pseudo-words) [default: locomo when its "
    "data is found, else synthetic].",
)
@click.option(
    "--store-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the ingested stores in this folder and reuse them in later runs (a 1M store "
    "takes minutes to build) [default: temporary].",
)
@click.option(
    "--blas-threads",
    "blas_threads",
    type=click.IntRange(0),
    default=1,
    show_default=True,
    help="numpy's BLAS threads while timing whole searches; 0 leaves numpy's own number. "
    "One by default: idle BLAS threads spin and their CPU time swamps the per-search CPU "
    "figures on a busy machine.",
)
@click.option(
    "--default-pool/--no-default-pool",
    "default_pool",
    default=False,
    show_default=True,
    help="Also time the default search, the floor and bm25s with numpy's own BLAS pool (rows "
    "'NAME [default pool]'; each one's searches in a block, so that what idle BLAS threads "
    "spin after a search is billed to the next of its kind).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Report folder [default: bench-out/latency-<time>].",
)
@progress_option
@plot_option
def latency(
    quick: bool,
    sizes: str | None,
    repeats: int | None,
    queries: int | None,
    option: tuple[str, ...],
    search_rerank: str,
    corpus: str | None,
    store_dir: Path | None,
    blas_threads: int,
    default_pool: bool,
    out: Path | None,
    progress: bool,
    plot: bool,
) -> None:
    """Rerank-stage and whole-search p50/p95, whole searches in wall and CPU time (next to a
    numpy + FTS5 floor and bm25s + numpy), ingest throughput, store open and first search, peak RSS,
    disabled-path ratio."""
    from rankseam.bench.latency import DEFAULT_SIZES, QUICK_SIZES, run_latency
    from rankseam.bench.policies import component_options
    from rankseam.bench.reports import (
        check_plotting,
        finish_report,
        latency_markdown,
        write_report,
    )

    if plot:
        check_plotting()
    tables = component_options(option)
    chosen = _sizes(sizes)
    if chosen is None:
        chosen = list(QUICK_SIZES if quick else DEFAULT_SIZES)
    body = run_latency(
        sizes=chosen,
        repeats=repeats or (30 if quick else 300),
        queries=queries or (30 if quick else 200),
        progress=progress,
        echo=lambda msg: click.echo(msg, err=True),
        options=tables.pop("rerankers", {}),
        config=tables,
        search_policies=_names(search_rerank, "--search-rerank"),
        corpus=corpus,
        store_dir=store_dir,
        blas=blas_threads or None,
        default_pool=default_pool,
    )
    body["configuration"]["quick"] = quick
    report = finish_report(body, command=command_record())
    paths = write_report(report, out or default_out("latency"), plot=plot)
    click.echo(latency_markdown(report))
    click.echo(f"wrote {', '.join(str(p) for p in paths.values())}", err=True)


bench.add_command(reembed_bench)
bench.add_command(cli_startup)
