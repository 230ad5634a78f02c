"""Study of the SQLite store's lexical index against FTS5 (#40, "small stores at the floor").

Does the in-process lexical index (``rankseam.sqlite.lexical_index``) answer the lexical
channel's queries exactly as FTS5 does, and for how much less CPU? For each corpus and size a
store is made as the bench makes it (``rankseam bench latency``: the corpus's records with
``{"bucket": n % 100}``), and each of the corpus's first ``--queries`` questions is asked in
four forms, each of them of both paths:

- ``plain``: the channel's query (its terms, those above ``max_df = 0.2`` pruned), k = 120
  (the lexical channel's ``over_fetch(30)``);
- ``scoring``: the same terms, the rarer half finding and the others only scoring;
- ``require``: the rarest term finding, the others scoring and required (the budgets' shape
  when the rarest term alone is over them);
- ``filtered``: ``plain`` among the revisions of one bucket (``where={"bucket": b}``).

The index's answer (``SQLiteReader.lexical``, once the index is built) is compared with FTS5's
(``SQLiteReader.fts`` with the query text ``lexical`` gives FTS5): the same row keys in the
same order, and the scores' largest difference (0.0 means equal to the bit). The CPU time
(``time.process_time``) and wall time of each call are measured with the two paths
interleaved query by query, the first one alternating, since the machine is shared; numpy's
BLAS pool is held to one thread.

Usage, from the repository root, with the development data (LoCoMo dev)::

    OPENBLAS_NUM_THREADS=1 python docs/studies/lexical_index_study.py \\
        --sizes 1000,10000 --corpora locomo,synthetic --queries 200 --rounds 5
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import time
from functools import partial
from pathlib import Path

import numpy as np

import rankseam
from rankseam.bench.whole_search import FILTER_BUCKETS, corpus_queries, corpus_texts
from rankseam.search.terms import query_terms
from rankseam.sqlite import lexical_cache, lexical_index
from rankseam.sqlite.reader import SQLiteReader, or_joined
from rankseam.sqlite.store import SQLiteStore
from rankseam.store.filters import parse_where
from rankseam.store.readers import LexicalQuery, ScoredKeys

NAMESPACE = "default"
K = 120
FORMS = ("plain", "scoring", "require", "filtered")


def store_path(folder: Path, corpus: str, size: int) -> Path:
    """The bench's store of ``size`` records of ``corpus`` (made when missing)."""
    path = folder / f"{corpus}-{size}.sqlite3"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        records = [
            {**r, "metadata": {"bucket": n % FILTER_BUCKETS}}
            for n, r in enumerate(corpus_texts(corpus, size))
        ]
        memory = rankseam.open_memory(str(path), create=True)
        try:
            memory.ingest(records, batch_size=1000)
        finally:
            memory.close()
    return path


def forms(reader: SQLiteReader, question: str, n: int) -> dict[str, LexicalQuery]:
    """The four forms of ``question`` (the n-th), as the lexical channel builds them."""
    terms = query_terms(question)
    rows = reader.live_count(NAMESPACE)
    cap = int(0.2 * rows)
    terms = [t for t in terms if reader.document_frequency(NAMESPACE, t, cap + 1) <= cap]
    if not terms:
        return {}
    rare = sorted(terms, key=lambda t: (reader.document_frequency(NAMESPACE, t, rows), t))
    half = rare[: max(1, len(rare) // 2)]
    where = parse_where({"bucket": n % FILTER_BUCKETS})
    out = {
        "plain": LexicalQuery(NAMESPACE, K, terms),
        "scoring": LexicalQuery(
            NAMESPACE, K, [t for t in terms if t in half], [t for t in terms if t not in half]
        ),
        "filtered": LexicalQuery(NAMESPACE, K, terms, where=where),
    }
    if len(rare) > 1:
        out["require"] = LexicalQuery(
            NAMESPACE, K, rare[:1], [t for t in terms if t != rare[0]], require_scoring=True
        )
    return out


def by_fts5(reader: SQLiteReader, query: LexicalQuery) -> ScoredKeys:
    """FTS5's answer: the query text ``SQLiteReader.lexical`` gives FTS5."""
    match = or_joined(query.terms)
    if query.scoring and query.require_scoring:
        return reader.fts(
            f"({match}) AND ({or_joined(query.scoring)})", query.namespace, query.k,
            where=query.where,
        )  # fmt: skip
    scoring = or_joined(query.scoring) if query.scoring else None
    return reader.fts(match, query.namespace, query.k, scoring=scoring, where=query.where)


def timed(fn, *args):  # type: ignore[no-untyped-def]
    c, w = time.process_time(), time.perf_counter()
    out = fn(*args)
    return out, (time.process_time() - c) * 1e3, (time.perf_counter() - w) * 1e3


def study(path: Path, count: int, rounds: int, corpus: str) -> None:
    store = SQLiteStore(path)
    questions = corpus_queries(corpus, count)
    try:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN")
        (version,) = conn.execute("SELECT total(version) FROM namespaces").fetchone()
        _, build_cpu, build_wall = timed(lexical_index.build, conn, int(version))
        snapshot = lexical_index.build(conn, int(version))
        conn.close()
        if snapshot is not None:
            print(
                f"{path.name}: {snapshot.rows} rows, {snapshot.docs.shape[0]} postings, "
                f"{len(snapshot.vocabulary)} tokens, {snapshot.nbytes / 2**20:.1f} MiB; "
                f"build {build_cpu:.1f} ms CPU ({build_wall:.1f} ms wall)"
            )
        lexical_cache.BUILD_S_PER_ROW = 0.0  # the study's reader builds the index at once
        cpu = {f: {"index": [], "fts5": []} for f in FORMS}
        wall = {f: {"index": [], "fts5": []} for f in FORMS}
        checked = {f: 0 for f in FORMS}
        worst = {f: 0.0 for f in FORMS}
        unequal = {f: 0 for f in FORMS}
        for r in range(rounds):
            for n, question in enumerate(questions):
                with store.read() as reader:
                    for form, query in forms(reader, question, n).items():
                        paths = [("index", reader.lexical), ("fts5", partial(by_fts5, reader))]
                        if (n + r) % 2:
                            paths.reverse()
                        got = {}
                        for name, fn in paths:
                            got[name], c, w = timed(fn, query)
                            if r or n >= 3:  # the first queries warm caches
                                cpu[form][name].append(c)
                                wall[form][name].append(w)
                        a, b = got["index"], got["fts5"]
                        checked[form] += 1
                        if not np.array_equal(a.row_keys, b.row_keys):
                            unequal[form] += 1
                        else:
                            diff = np.abs(a.scores - b.scores)
                            worst[form] = max(worst[form], float(diff.max()) if diff.size else 0.0)
        for form in FORMS:
            if not checked[form]:
                continue
            ci, cf = (statistics.median(cpu[form][p]) for p in ("index", "fts5"))
            wi, wf = (statistics.median(wall[form][p]) for p in ("index", "fts5"))
            print(
                f"  {form:9s} {checked[form]:5d} queries, keys/order differ in {unequal[form]}, "
                f"largest score difference {worst[form]:.3g}; CPU p50 index {ci:.3f} ms, "
                f"FTS5 {cf:.3f} ms ({cf / ci:.1f}x); wall p50 {wi:.3f} / {wf:.3f} ms"
            )
    finally:
        store.close()


def loop(path: Path, count: int, corpus: str, folder: Path) -> None:
    """The agent's loop (add a memory, then search) on two copies of the store, one with the
    lexical index and one without, interleaved step by step: CPU and wall time per step."""
    import shutil

    lexical_cache.BUILD_S_PER_ROW = 1e-5  # the library's rule: build once FTS5 has cost one
    copies = {}
    for name in ("index", "fts5"):
        copy = folder / f"loop-{name}-{path.name}"
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{copy}{suffix}").exists():
                Path(f"{copy}{suffix}").unlink()
        shutil.copy(path, copy)
        copies[name] = rankseam.open_memory(str(copy))
    # the copy without the index never builds one (as for a store too large to hold)
    copies["fts5"].store.lexical.refuse()
    questions = corpus_queries(corpus, count)
    for question in corpus_queries(corpus, 150):  # searched before: the index is built
        for memory in copies.values():
            memory.search(question, 10, reranker=None)
    texts = [r["text"] for r in corpus_texts(corpus, count)]
    cpu = {name: {"add": [], "search": []} for name in copies}
    try:
        for n, question in enumerate(questions):
            names = list(copies) if n % 2 else list(copies)[::-1]
            for name in names:
                memory = copies[name]
                _, c_add, _w = timed(memory.add, f"{texts[n]} (loop {n})")
                _, c_search, _w = timed(partial(memory.search, question, 10, reranker=None))
                if n >= 3:
                    cpu[name]["add"].append(c_add)
                    cpu[name]["search"].append(c_search)
        for name, by in cpu.items():
            snapshot = copies[name].store.lexical.held()
            state = "no index" if snapshot is None else f"index, {snapshot.added.rows} added"
            print(
                f"  loop {name:5s} ({state}): add p50 {statistics.median(by['add']):.3f} ms, "
                f"search p50 {statistics.median(by['search']):.3f} ms CPU, "
                f"add+search mean {statistics.mean(by['add'] + by['search']) * 2:.3f} ms"
            )
    finally:
        for memory in copies.values():
            memory.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--corpora", default="locomo,synthetic")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store-dir", default="/tmp/lexical_index_study")
    parser.add_argument("--loop", action="store_true", help="the add-then-search loop only")
    args = parser.parse_args()
    for corpus in args.corpora.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            path = store_path(Path(args.store_dir), corpus, size)
            if args.loop:
                print(path.name)
                loop(path, args.queries, corpus, Path(args.store_dir))
            else:
                study(path, args.queries, args.rounds, corpus)


if __name__ == "__main__":
    main()
