"""Offline study of the hashed embedder's vector space and of fusion score shapes (#15).

The `hashed` channel is weak and lexical-like (vector alone 0.40 LoCoMo R@5, 0.35 SciFact
nDCG@10). This script asks whether a different hashed space (binary or sublinear term counts,
char-only or word-only, other n-gram ranges, stop words on both sides or on the query only)
or a different score shape in the convex fusion (BM25 scaled by the query's largest possible
BM25 instead of its best hit; the cosine counted only above its list's median) lifts the
default above the better single channel by 0.01 on both development sets.

Every space keeps 256 dimensions unless ``--dims`` says otherwise. The vectors are computed
here in memory with scikit-learn's `FeatureHasher` over the same features as the library
(`_word_features`, `_char_wb_features` of `rankseam.default_plugins.hashed_embedder`), each
feature valued ``f(tf)`` (``tf``: its count in the text; the library's space is ``f(tf) =
tf``), each part L2-normalised, mixed with ``char_weight`` and normalised again; the vector
list is the exact top 120 by cosine. The lexical lists are read from the stores of `rankseam
bench quality --stores` (as `fusion_study.py` does). The `baseline` space must reproduce the
library's vectors and the `default`, `lexical-only` and `vector-only` rows the bench's figures
(checked when it runs).

Usage, from the repository root, on the development data only::

    for ds in locomo beir:../shared/data/scifact-train@train; do
      rankseam bench quality --dataset $ds --rerank none --stores /tmp/stores --max-queries 1
    done
    python docs/studies/hashed_space_study.py --stores /tmp/stores
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from fusion_study import DATASETS, K, _bm25_index, _scaled, evaluate

import rankseam
from rankseam.bench.datasets import load_dataset
from rankseam.bench.quality import _kept_store, score_query
from rankseam.default_plugins.hashed_embedder import (
    HashedEmbedder,
    _char_wb_features,
    _word_features,
)
from rankseam.search.channels.base import SourceRequest
from rankseam.search.channels.lexical import LexicalSource


@attrs.frozen
class Space:
    """One hashed vector space."""

    label: str
    dims: int = 256  # the library's default ``dimensions``
    tf: str = "raw"  # raw | binary | log (1 + ln tf)
    char_weight: float = 0.5
    char_ngrams: tuple[int, int] = (3, 5)
    word_ngrams: tuple[int, int] = (1, 1)
    stop_docs: bool = False  # drop stop words from memories before hashing
    stop_query: bool = False  # ... from queries


_TF: dict[str, Callable[[int], float]] = {
    "raw": float,
    "binary": lambda c: 1.0,
    "log": lambda c: 1.0 + math.log(c),
}


def _drop_stop(text: str) -> str:
    """As ``[embedders.hashed] stop_words = true`` does (scikit-learn's English list)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    words = [w for w in re.findall(r"\w+", text.lower()) if w not in ENGLISH_STOP_WORDS]
    return " ".join(words) if words else text


def embed(space: Space, texts: Sequence[str], *, query: bool) -> np.ndarray:
    from sklearn.feature_extraction import FeatureHasher

    hasher = FeatureHasher(n_features=space.dims, input_type="pair", alternate_sign=True)
    if space.stop_query if query else space.stop_docs:
        texts = [_drop_stop(t) for t in texts]
    f = _TF[space.tf]

    def part(features: Callable[[str], list[str]]) -> np.ndarray:
        rows = hasher.transform(
            [(k, f(c)) for k, c in Counter(features(t)).items()] for t in texts
        ).toarray()
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)

    words = part(lambda t: _word_features(t, space.word_ngrams))
    chars = part(lambda t: _char_wb_features(t, space.char_ngrams))
    w = space.char_weight
    mixed = words * (1 - w) + chars * w
    norms = np.linalg.norm(mixed, axis=1, keepdims=True)
    return np.divide(mixed, norms, out=np.zeros_like(mixed), where=norms > 0).astype(np.float32)


def read(store_dir: Path, ds: str) -> tuple[list[dict[str, Any]], dict[str, Any], Any]:
    """Per query: relevance, collection and its lexical list (as the library's channel
    returns it); the dataset for embedding."""
    dataset = load_dataset(DATASETS[ds])
    rows = []
    lexical = LexicalSource()
    for coll in dataset.collections:
        memory = rankseam.open_memory(str(_kept_store(store_dir, dataset, coll, "default")))
        with memory.store.read() as reader:
            for q in coll.queries:
                req = SourceRequest(reader, "default", q.text, K, None, None)
                lst = list(lexical.candidates(req))[:K]
                refs = reader.identities(tuple(k for k, _ in lst))
                rows.append(
                    {
                        "rel": dict(q.relevance),
                        "cat": q.category,
                        "coll": coll.name,
                        "qid": q.id,
                        "text": q.text,
                        "lex": [(refs[k].memory_id, s) for k, s in lst if k in refs],
                    }
                )
        memory.close()
    groups = {c.name: c.group_of() for c in dataset.collections}
    return rows, groups, dataset


def vector_lists(
    space: Space,
    rows: list[dict[str, Any]],
    dataset: Any,
    prf: tuple[int, float] | None = None,
    *,
    passages: bool = False,
) -> list[list]:
    """The exact top ``K`` by cosine in ``space`` of each row's query. With ``prf = (m,
    beta)`` the query vector is first moved towards its top ``m`` lexical hits (Rocchio:
    ``q + beta × mean of their vectors``, normalised)."""
    out: list[list] = [[] for _ in rows]
    for coll in dataset.collections:
        ids = [r.id for r in coll.records]
        at = {m: j for j, m in enumerate(ids)}
        docs = embed(space, [r.text for r in coll.records], query=False)
        mine = [i for i, r in enumerate(rows) if r["coll"] == coll.name]
        queries = embed(space, [rows[i]["text"] for i in mine], query=True)
        if prf is not None:
            m, beta = prf
            for n, i in enumerate(mine):
                top = [at[k] for k, _ in rows[i]["lex"][:m] if k in at]
                if top:
                    q = queries[n] + beta * docs[top].mean(axis=0)
                    queries[n] = q / (np.linalg.norm(q) or 1.0)
        sims = queries @ docs.T
        if passages:  # a memory's score: the best cosine of its sentences (MaxP)
            pieces = [(j, p) for j, r in enumerate(coll.records) for p in _sentences(r.text)]
            owner = np.array([j for j, _ in pieces])
            pv = embed(space, [p for _, p in pieces], query=False)
            psims = queries @ pv.T
            best = np.full((len(mine), len(ids)), -1.0, dtype=np.float32)
            for n in range(len(mine)):
                np.maximum.at(best[n], owner, psims[n])
            sims = best
        for i, s in zip(mine, sims, strict=True):
            top = np.argsort(-s, kind="stable")[:K]
            out[i] = [(ids[j], float(s[j])) for j in top]
    return out


def _sentences(text: str) -> list[str]:
    """Sentences of a text, short ones joined to the next (at least 12 words a piece)."""
    out: list[str] = []
    for part in re.split(r"(?<=[.!?])\s+", text):
        if out and len(out[-1].split()) < 12:
            out[-1] += " " + part
        else:
            out.append(part)
    return [p for p in out if p.strip()] or [text]


def idf_ceiling(index: Any, row: dict[str, Any]) -> float:
    """The largest BM25 any memory could get for the row's query: (k1 + 1) × Σ idf over its
    terms (FTS5's idf, k1 = 1.2, after the library's max_df pruning)."""
    post, _length, _avg, n, stems = index[row["coll"]]
    terms = stems[row["qid"]]
    if n >= 1000:
        terms = [t for t in terms if len(post.get(t, {})) <= int(0.2 * n)] or terms
    total = 0.0
    for t in terms:
        df = len(post.get(t, {}))
        if df:
            idf = math.log((n - df + 0.5) / (df + 0.5))
            total += idf if idf > 0 else 1e-6
    return 2.2 * total


def _z(lst: list) -> tuple[dict[str, float], float]:
    if not lst:
        return {}, 0.0
    v = np.array([s for _, s in lst])
    sd = float(v.std()) or 1.0
    z = {m: (s - float(v.mean())) / sd for m, s in lst}
    return z, min(z.values())


def _zscore(lex: list, vec: list, wv: float) -> dict[str, float]:
    """z-scores over each list; a memory a channel did not return gets that list's lowest."""
    zl, fl = _z(lex)
    zv, fv = _z(vec)
    return {m: zl.get(m, fl) + wv * zv.get(m, fv) for m in set(zl) | set(zv)}


def _plus(scores: dict[str, float], extra: list, w: float) -> dict[str, float]:
    out = dict(scores)
    for m, s in extra:
        out[m] = out.get(m, 0.0) + w * s
    return out


def combmnz(row: dict[str, Any], vec: list, wv: float) -> dict[str, float]:
    """The convex sum times the number of channels that found the memory (CombMNZ)."""
    base = fuse(row, vec, wv)
    lex = {m for m, _ in row["lex"]}
    vs = {m for m, _ in vec}
    return {m: s * ((m in lex) + (m in vs)) for m, s in base.items()}


def coverage(index: Any, row: dict[str, Any]) -> list:
    """Each lexical hit's share of the query's idf mass it matches (Σ idf of the query terms
    it contains / Σ idf of all): coordination-level matching, without BM25's tf part."""
    post, _length, _avg, n, stems = index[row["coll"]]
    idf = {}
    for t in stems[row["qid"]]:
        df = len(post.get(t, {}))
        if df:
            idf[t] = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
    total = sum(idf.values()) or 1.0
    return [(m, sum(v for t, v in idf.items() if m in post[t]) / total) for m, _ in row["lex"]]


def fuse(
    row: dict[str, Any],
    vec: list,
    wv: float,
    *,
    lex_scale: str = "max",
    ceiling: float | None = None,
    vec_shape: str = "unit",
) -> dict[str, float]:
    out: dict[str, float] = {}
    if lex_scale == "none":  # the vector channel alone
        lex = {}
    elif lex_scale == "zscore":  # both channels z-scored over their lists (Montague-Aslam)
        return _zscore(row["lex"], vec, wv)
    elif lex_scale == "ceiling":
        lex = {m: (s / ceiling if ceiling else 0.0) for m, s in row["lex"]}
    else:
        lex = _scaled(row["lex"], lex_scale)
    for m, s in lex.items():
        out[m] = out.get(m, 0.0) + s
    if wv and vec:
        if vec_shape == "median":  # the cosine only where it beats its list's median
            med = float(np.median([s for _, s in vec]))
            vs = {m: max(s, 0.0) if s > med else 0.0 for m, s in vec}
        elif vec_shape == "above-median":  # the cosine's excess over the median
            med = float(np.median([s for _, s in vec]))
            vs = {m: max(s - med, 0.0) for m, s in vec}
        else:
            vs = _scaled(vec, vec_shape)
        for m, s in vs.items():
            out[m] = out.get(m, 0.0) + wv * s
    return out


def per_query(rows: list[dict[str, Any]], groups: Any, fused: Callable, ds: str) -> np.ndarray:
    """The headline metric (LoCoMo Recall@5, SciFact nDCG@10) of each scored query."""
    metric = "recall@5" if ds == "locomo" else "ndcg@10"
    out = []
    for row in rows:
        if ds == "locomo" and row["cat"] not in (1, 2, 3, 4):
            continue
        scores = fused(row)
        order = sorted(scores, key=lambda m: (-scores[m], m))[:30]
        ranked = [groups[row["coll"]].get(m, m) for m in order]
        out.append(score_query(ranked[:10], ranked, row["rel"])[metric])
    return np.array(out)


def paired(label: str, data: Any, a: Callable, b: Callable) -> None:
    """Mean difference a - b per query and its standard error (paired over queries)."""
    cells = []
    for ds in DATASETS:
        rows, groups, _ = data[ds]
        d = per_query(rows, groups, a, ds) - per_query(rows, groups, b, ds)
        cells.append(f"{d.mean():+.4f} ± {d.std(ddof=1) / math.sqrt(len(d)):.4f}")
    print(f"| {label} | {' | '.join(cells)} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--only", default="", help="comma-separated space labels")
    parser.add_argument("--weights", default="0.2,0.3,0.5")
    parser.add_argument("--shapes", action="store_true", help="also the fusion shapes")
    parser.add_argument(
        "--dims", type=int, default=256, help="dimensions of every space (the library's: 256)"
    )
    args = parser.parse_args()
    data = {ds: read(args.stores, ds) for ds in DATASETS}

    # the baseline space is the library's (at --dims): check it on a sample of texts
    sample = [r.text for r in data["locomo"][2].collections[0].records[:300]]
    ours = embed(Space("baseline", dims=args.dims), sample, query=False)
    theirs = HashedEmbedder(dimensions=args.dims).embed(sample)
    assert np.allclose(ours, theirs, atol=1e-5), "baseline space differs from the library's"

    spaces = [
        Space("baseline"),
        Space("binary tf", tf="binary"),
        Space("sublinear tf", tf="log"),
        Space("char only", char_weight=1.0),
        Space("word only", char_weight=0.0),
        Space("char_weight 0.3", char_weight=0.3),
        Space("char_weight 0.7", char_weight=0.7),
        Space("char 2-4", char_ngrams=(2, 4)),
        Space("char 3-4", char_ngrams=(3, 4)),
        Space("char 4-5", char_ngrams=(4, 5)),
        Space("char 4-6", char_ngrams=(4, 6)),
        Space("word 1-2-grams", word_ngrams=(1, 2)),
        Space("stop words", stop_docs=True, stop_query=True),
        Space("stop words (query only)", stop_query=True),
        Space("stop words + sublinear tf", tf="log", stop_docs=True, stop_query=True),
        Space("stop words + binary tf", tf="binary", stop_docs=True, stop_query=True),
        Space(
            "stop words + binary, cw 0.3",
            tf="binary",
            stop_docs=True,
            stop_query=True,
            char_weight=0.3,
        ),
    ]
    spaces = [attrs.evolve(s, dims=args.dims) for s in spaces]
    if args.only:
        keep = set(args.only.split(","))
        spaces = [s for s in spaces if s.label in keep]
    weights = [float(w) for w in args.weights.split(",")]

    def line(
        label: str,
        fused: dict[str, Callable[[dict[str, Any], list], dict]],
        vecs: dict[str, list[list]],
    ) -> dict[str, float]:
        got = {}
        for ds in DATASETS:
            rows, groups, _ = data[ds]
            for row, vec in zip(rows, vecs[ds], strict=True):
                row["vec"] = vec
            got[ds] = evaluate(rows, groups, lambda r, f=fused[ds]: f(r, r["vec"]), ds)
        a, b = got["locomo"], got["scifact"]
        print(
            f"| {label} | {a['recall@5']:.3f} | {a['pool_recall']:.3f} | {b['ndcg@10']:.3f} |",
            flush=True,
        )
        return {"locomo": a["recall@5"], "scifact": b["ndcg@10"]}

    print("| space / fusion | LoCoMo R@5 | LoCoMo pool recall | SciFact nDCG@10 |")
    print("|---|---|---|---|")
    empty = {ds: [[] for _ in data[ds][0]] for ds in DATASETS}
    line("lexical-only", {ds: lambda r, v: fuse(r, v, 0.0) for ds in DATASETS}, empty)
    kept: dict[str, dict[str, list[list]]] = {}
    for space in spaces:
        t0 = time.perf_counter()
        vecs = {ds: vector_lists(space, data[ds][0], data[ds][2]) for ds in DATASETS}
        kept[space.label] = vecs
        secs = time.perf_counter() - t0
        line(
            f"{space.label}: vector-only ({secs:.0f} s)",
            {ds: lambda r, v: fuse(r, v, 1.0, lex_scale="none") for ds in DATASETS},
            vecs,
        )
        for w in weights:
            line(
                f"{space.label}: w {w}",
                {ds: lambda r, v, w=w: fuse(r, v, w) for ds in DATASETS},
                vecs,
            )
        if args.shapes and space.label == "baseline":
            index = {ds: _bm25_index(args.stores, ds) for ds in DATASETS}
            for w in (0.1, 0.2, 0.3, 0.5):
                line(
                    f"BM25 / (k1+1)Σidf, w {w}",
                    {
                        ds: lambda r, v, w=w, ix=index[ds]: fuse(
                            r, v, w, lex_scale="ceiling", ceiling=idf_ceiling(ix, r)
                        )
                        for ds in DATASETS
                    },
                    vecs,
                )
            for wc in (0.1, 0.3, 0.5):
                line(
                    f"+ idf coverage × {wc}, w 0.3",
                    {
                        ds: lambda r, v, wc=wc, ix=index[ds]: _plus(
                            fuse(r, v, 0.3), coverage(ix, r), wc
                        )
                        for ds in DATASETS
                    },
                    vecs,
                )
            mp = {
                ds: vector_lists(space, data[ds][0], data[ds][2], passages=True) for ds in DATASETS
            }
            line(
                "sentence MaxP: vector-only",
                {ds: lambda r, v: fuse(r, v, 1.0, lex_scale="none") for ds in DATASETS},
                mp,
            )
            for w in (0.2, 0.3, 0.5):
                line(
                    f"sentence MaxP, w {w}",
                    {ds: lambda r, v, w=w: fuse(r, v, w) for ds in DATASETS},
                    mp,
                )
            for w in (0.3, 0.5, 1.0):
                line(
                    f"z-scores, w {w}",
                    {ds: lambda r, v, w=w: fuse(r, v, w, lex_scale="zscore") for ds in DATASETS},
                    vecs,
                )
            for w in (0.3, 0.5):
                line(
                    f"CombMNZ, w {w}",
                    {ds: lambda r, v, w=w: combmnz(r, v, w) for ds in DATASETS},
                    vecs,
                )
            for m, beta in ((3, 0.5), (3, 1.0), (5, 1.0), (10, 1.0)):
                pv = {
                    ds: vector_lists(space, data[ds][0], data[ds][2], (m, beta)) for ds in DATASETS
                }
                for w in (0.3, 0.5):
                    line(
                        f"vector PRF top {m} × {beta}, w {w}",
                        {ds: lambda r, v, w=w: fuse(r, v, w) for ds in DATASETS},
                        pv,
                    )
            for shape in ("median", "above-median"):
                for w in (0.3, 0.5, 1.0):
                    line(
                        f"cosine {shape}, w {w}",
                        {
                            ds: lambda r, v, w=w, s=shape: fuse(r, v, w, vec_shape=s)
                            for ds in DATASETS
                        },
                        vecs,
                    )

    if "baseline" not in kept:
        return
    # paired differences over queries (mean ± standard error): the margins and the closest calls
    print("\n| difference (paired over queries) | LoCoMo R@5 | SciFact nDCG@10 |\n|---|---|---|")

    def with_vec(label: str, f: Callable) -> Callable:
        def run(row: dict[str, Any]) -> dict[str, float]:
            return f(row, row["vecs"][label])

        return run

    for ds in DATASETS:
        for i, row in enumerate(data[ds][0]):
            row["vecs"] = {label: v[ds][i] for label, v in kept.items()}
    default = with_vec("baseline", lambda r, v: fuse(r, v, 0.3))
    paired("default − lexical-only", data, default, lambda r: fuse(r, [], 0.0))
    for label in ("char_weight 0.7", "char 2-4", "binary tf", "sublinear tf"):
        if label in kept:
            paired(
                f"{label}, w 0.3 − default",
                data,
                with_vec(label, lambda r, v: fuse(r, v, 0.3)),
                default,
            )


if __name__ == "__main__":
    main()
