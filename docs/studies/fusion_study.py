"""Offline fusion study over the stores of `rankseam bench quality --stores DIR`.

It reads each query's channel lists once (lexical BM25 and vector cosine, top 120 each: what
the search fetches for a coarse pool of 30) and re-fuses them in Python, so dozens of
variants cost seconds. It also computes variants the library cannot select (BM25 with other
k1/b, phrase pairs, pseudo-relevance feedback, neighbouring turns, session dates in the text)
to say whether they would be worth building. docs/studies/fusion.md quotes its output.
Its `default` and `lexical-only` rows equal those of `rankseam bench quality` (checked in
each run: the figures are printed side by side with the reference ones in that section).

Usage, from the repository root, on the development data only::

    # 1. build the stores once (one query each is enough; the stores are kept)
    for ds in locomo beir:../shared/data/scifact-train@train; do
      rankseam bench quality --dataset $ds --rerank none --stores /tmp/stores --max-queries 1
      rankseam bench quality --dataset $ds --rerank none --stores /tmp/stores --max-queries 1 \\
          --embedder sentence-transformers
    done
    # 2. the study (prints one table; --embedder sentence-transformers for the model's stores)
    python docs/studies/fusion_study.py --stores /tmp/stores
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sqlite3
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

import rankseam
from rankseam.bench.datasets import find_locomo, load_dataset
from rankseam.bench.quality import _kept_store, score_query
from rankseam.embedding import embed_checked
from rankseam.search.channels.base import SourceRequest, over_fetch
from rankseam.search.channels.lexical import STOPWORDS, LexicalSource, query_terms
from rankseam.search.channels.vector import VectorSource
from rankseam.sqlite.reader import fts5_string as _fts5_string

DATASETS = {"locomo": "locomo", "scifact": "beir:../shared/data/scifact-train@train"}
K = over_fetch(30)  # 120: each channel's list for the default coarse pool of 30
TOKEN = re.compile(r"\w+")
Lists = list[tuple[str, float]]


# ---------------------------------------------------------------------------- reading lists


def _rows(store_dir: Path, ds: str, embedder: str, texts: Callable[[Any], Any] | None = None):
    """Per query: its relevance, collection, and the lexical/vector lists by memory id, plus
    the lists of lexical variants the library cannot select (phrase pairs, NEAR pairs, PRF)."""
    dataset = load_dataset(DATASETS[ds])
    key = "default" if embedder == "hashed" else embedder
    rows = []
    tmp = tempfile.mkdtemp(prefix="fusion-study-") if texts else None
    for coll in dataset.collections:
        kwargs = {} if embedder == "hashed" else {"embedder": embedder}
        if texts is None:
            memory = rankseam.open_memory(str(_kept_store(store_dir, dataset, coll, key)), **kwargs)
        else:  # the records rewritten (session dates): a fresh store
            memory = rankseam.open_memory(f"{tmp}/{coll.name}.sqlite3", **kwargs)
            memory.ingest(attrs.evolve(r, text=texts(coll, r)).to_ingest() for r in coll.records)
        lexical, vector = LexicalSource(), VectorSource()
        qvecs = embed_checked(memory.embedder, [q.text for q in coll.queries])
        with memory.store.read() as reader:
            n = reader.live_count("default")
            for q, qv in zip(coll.queries, qvecs, strict=True):
                req = SourceRequest(reader, "default", q.text, K, qv, memory.embedder.descriptor)
                lists = {
                    "lex": list(lexical.candidates(req))[:K],
                    "vec": list(vector.candidates(req)),
                }
                terms = query_terms(q.text)
                pairs = list(itertools.pairwise(terms))
                lists["phrase"] = _fts(reader, [_fts5_string(f"{a} {b}") for a, b in pairs])
                lists["near"] = _fts(
                    reader, [f"NEAR({_fts5_string(a)} {_fts5_string(b)}, 8)" for a, b in pairs]
                )
                expansion = _prf_terms(reader, lists["lex"][:10], set(terms), n)
                for m in (5, 10, 20):
                    lists[f"prf{m}"] = _fts(reader, [_fts5_string(t) for t in expansion[:m]])
                refs = reader.identities(tuple({k for lst in lists.values() for k, _ in lst}))
                rows.append(
                    {
                        "rel": dict(q.relevance),
                        "cat": q.category,
                        "coll": coll.name,
                        "qid": q.id,
                        **{
                            name: [(refs[k].memory_id, s) for k, s in lst if k in refs]
                            for name, lst in lists.items()
                        },
                    }
                )
        memory.close()
    groups = {c.name: c.group_of() for c in dataset.collections}
    return rows, groups


def _fts(reader: Any, parts: list[str]) -> list[tuple[int, float]]:
    return reader.fts(" OR ".join(parts), "default", K) if parts else []


def _prf_terms(reader: Any, top: list[tuple[int, float]], query: set[str], n: int) -> list[str]:
    """Expansion terms from the top lexical hits (relevance model: term share of each hit,
    weighted by its scaled BM25), times idf; the query's own terms excluded."""
    if not top:
        return []
    texts = reader.memories([k for k, _ in top])
    best = top[0][1] or 1.0
    weight: Counter[str] = Counter()
    for k, s in top:
        toks = [
            t
            for t in TOKEN.findall(texts[k].text.lower())
            if t not in STOPWORDS and len(t) > 1 and not t.isdigit()
        ]
        for t, c in Counter(toks).items():
            weight[t] += c / len(toks) * s / best
    scored = []
    for t, w in weight.most_common(60):
        if t in query:
            continue
        df = reader.document_frequency("default", t, n + 1)
        if df:
            scored.append((w * math.log(1 + (n - df + 0.5) / (df + 0.5)), t))
    return [t for _, t in sorted(scored, reverse=True)[:20]]


def _bm25_index(store_dir: Path, ds: str) -> dict[str, Any]:
    """Term frequencies from the FTS5 index itself (fts5vocab), so BM25 with any k1/b uses
    exactly the library's tokens (porter stems)."""
    dataset = load_dataset(DATASETS[ds])
    out = {}
    for coll in dataset.collections:
        path = _kept_store(store_dir, dataset, coll, "default")
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, fts, instance)")
        mid = dict(conn.execute("SELECT rid, memory_id FROM revisions WHERE live"))
        post: dict[str, dict[str, int]] = defaultdict(dict)
        length: Counter[str] = Counter()
        for term, doc in conn.execute("SELECT term, doc FROM temp.v"):
            if doc in mid:
                post[term][mid[doc]] = post[term].get(mid[doc], 0) + 1
                length[mid[doc]] += 1
        conn.execute(
            "CREATE VIRTUAL TABLE temp.q USING fts5(t, "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        conn.execute("CREATE VIRTUAL TABLE temp.qv USING fts5vocab(temp, q, instance)")
        stems = {}
        for q in coll.queries:
            found: list[str] = []
            for term in query_terms(q.text):
                conn.execute("DELETE FROM temp.q")
                conn.execute("INSERT INTO temp.q(t) VALUES (?)", (term,))
                found += [r[0] for r in conn.execute("SELECT term FROM temp.qv")]
            stems[q.id] = list(dict.fromkeys(found))
        conn.close()
        out[coll.name] = (post, length, sum(length.values()) / len(length), len(length), stems)
    return out


def _bm25(index: Any, row: dict[str, Any], k1: float, b: float, max_df: float = 0.2) -> Lists:
    post, length, avg, n, stems = index[row["coll"]]
    terms = stems[row["qid"]]
    if n >= 1000:  # the library's max_df pruning (applies from 1,000 memories)
        terms = [t for t in terms if len(post.get(t, {})) <= int(max_df * n)] or terms
    score: dict[str, float] = defaultdict(float)
    for t in terms:
        p = post.get(t, {})
        if p:
            idf = math.log((n - len(p) + 0.5) / (len(p) + 0.5))
            idf = idf if idf > 0 else 1e-6  # as FTS5's bm25()
            for m, c in p.items():
                score[m] += idf * c * (k1 + 1) / (c + k1 * (1 - b + b * length[m] / avg))
    return sorted(score.items(), key=lambda x: (-x[1], x[0]))[:K]


# ---------------------------------------------------------------------------------- fusion


def _scaled(lst: Lists, scale: str) -> dict[str, float]:
    if not lst:
        return {}
    scores = [s for _, s in lst]
    if scale == "unit":
        return {m: min(max(s, 0.0), 1.0) for m, s in lst}
    if scale == "max":
        best = max(scores)
        return {m: max(s, 0.0) / best if best > 0 else 0.0 for m, s in lst}
    lo, hi = min(scores), max(scores)
    return {m: (s - lo) / (hi - lo) if hi > lo else 1.0 for m, s in lst}


def convex(
    row: dict[str, Any],
    wv: float,
    vscale: str,
    lex: Lists | None = None,
    lscale: str = "max",
    extra: Iterable[tuple[str, float]] = (),
) -> dict[str, float]:
    """The library's convex fusion (importance is constant on these sets, so left out)."""
    out: dict[str, float] = defaultdict(float)
    for m, s in _scaled(row["lex"] if lex is None else lex, lscale).items():
        out[m] += s
    for name, w in extra:
        for m, s in _scaled(row[name], "max").items():
            out[m] += w * s
    if wv:
        for m, s in _scaled(row["vec"], vscale).items():
            out[m] += wv * s
    return out


def neighbours(scores: dict[str, float], gamma: float) -> dict[str, float]:
    """Each LoCoMo turn ``Dn:i`` lends ``gamma`` × its score to turns ``Dn:i±1``."""
    out = dict(scores)
    for m, v in scores.items():
        hit = re.fullmatch(r"D(\d+):(\d+)", m)
        if hit:
            for step in (-1, 1):
                other = f"D{hit[1]}:{int(hit[2]) + step}"
                if other not in scores:
                    out[other] = max(out.get(other, 0.0), gamma * v)
    return out


def evaluate(rows: list[dict[str, Any]], groups: Any, fuse: Callable, ds: str) -> dict[str, float]:
    metrics = []
    for row in rows:
        if ds == "locomo" and row["cat"] not in (1, 2, 3, 4):
            continue
        scores = fuse(row)
        order = sorted(scores, key=lambda m: (-scores[m], m))[:30]
        g = groups[row["coll"]]
        ranked = [g.get(m, m) for m in order]
        metrics.append(score_query(ranked[:10], ranked, row["rel"]))
    return {k: float(np.mean([r[k] for r in metrics])) for k in metrics[0]}


def _session_dates(coll: Any, record: Any) -> str:
    """A record's text with the date of its session appended: ``... (8 May, 2023)``."""
    dates = _DATES.get(coll.name, {})
    session = re.match(r"D(\d+):", record.group)
    date = dates.get(session[1], "") if session else ""
    return f"{record.text} ({date})" if date else record.text


_DATES: dict[str, dict[str, str]] = {}


def _load_dates() -> None:
    for sample in json.loads(find_locomo().read_text(encoding="utf-8")):
        for key, value in (sample.get("conversation") or {}).items():
            hit = re.fullmatch(r"session_(\d+)_date_time", key)
            if hit and isinstance(value, str):
                _DATES.setdefault(sample["sample_id"], {})[hit[1]] = re.sub(r"^.* on ", "", value)


# ---------------------------------------------------------------------------------- report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--embedder", default="hashed")
    args = parser.parse_args()
    emb = args.embedder
    wv, vs = (0.3, "unit") if emb == "hashed" else (0.7, "minmax")
    data = {ds: _rows(args.stores, ds, emb) for ds in DATASETS}

    def line(label: str, fuse: Callable, fuse_sci: Callable | None = None) -> None:
        a = evaluate(*data["locomo"], fuse, "locomo")
        b = evaluate(*data["scifact"], fuse_sci or fuse, "scifact")
        print(
            f"| {label} | {a['recall@5']:.3f} | {a['pool_recall']:.3f} | {b['ndcg@10']:.3f} |",
            flush=True,
        )

    print(f"embedder {emb}; default = convex, vector {vs} at {wv}")
    print("| variant | LoCoMo R@5 | LoCoMo pool recall | SciFact nDCG@10 |\n|---|---|---|---|")
    line("default", lambda r: convex(r, wv, vs))
    line("lexical-only", lambda r: convex(r, 0, vs))
    line("vector-only", lambda r: convex(r, wv, vs, lex=[]))
    for name in ("phrase", "near"):
        for w in (0.1, 0.25, 0.5):
            line(f"+ {name} pairs × {w}", lambda r, n=name, w=w: convex(r, wv, vs, extra=[(n, w)]))
    for m in (5, 10, 20):
        for w in (0.1, 0.25, 0.5):
            line(
                f"+ PRF {m} terms × {w}",
                lambda r, m=m, w=w: convex(r, wv, vs, extra=[(f"prf{m}", w)]),
            )
    for g in (0.5, 0.8, 0.95):
        line(f"neighbouring turns × {g}", lambda r, g=g: neighbours(convex(r, wv, vs), g))
    if emb == "hashed":
        index = {ds: _bm25_index(args.stores, ds) for ds in DATASETS}
        for k1 in (0.6, 0.9, 1.2, 1.6, 2.0):
            for b in (0.4, 0.6, 0.75, 0.9):
                for label, w in (("lexical alone", 0), ("default fusion", wv)):

                    def fuse(r: Any, ds: str, k1: float = k1, b: float = b, w: float = w) -> Any:
                        return convex(r, w, vs, lex=_bm25(index[ds], r, k1, b))

                    line(
                        f"BM25 k1={k1} b={b}, {label}",
                        lambda r, f=fuse: f(r, "locomo"),
                        lambda r, f=fuse: f(r, "scifact"),
                    )
        _load_dates()
        rows, groups = _rows(args.stores, "locomo", emb, texts=_session_dates)
        for label, fuse in (
            ("default", lambda r: convex(r, wv, vs)),
            ("lexical-only", lambda r: convex(r, 0, vs)),
        ):
            a = evaluate(rows, groups, fuse, "locomo")
            r5, pool = a["recall@5"], a["pool_recall"]
            print(f"| session dates in the text, {label} | {r5:.3f} | {pool:.3f} | – |")


if __name__ == "__main__":
    main()
