"""The store at scale: the ANN index of the vector channel, the lexical posting budget, the
batched write path, the vector table's layout and the fast hashed embedder."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rankseam
from rankseam.bench import synthetic
from rankseam.default_plugins.hashed_embedder import HashedEmbedder
from rankseam.sqlite import SCHEMA_VERSION, SQLiteStore
from rankseam.sqlite.ann import setting_from_env
from rankseam.sqlite.rows import vector_state

# ------------------------------------------------------------------------- hashed embedder

_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=80
) | st.lists(
    st.sampled_from(["Ada", "tea", "ΣΟΦΙΑ", "naïve", "x", "  ", "\t", "\n", "don't", "a-b", "ab"]),
    max_size=12,
).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=20))
def test_hashed_embedder_equals_scikit_learn_bit_for_bit(texts):
    embedder = HashedEmbedder()
    assert np.array_equal(embedder.embed(texts), embedder.reference_embed(texts))
    # small batches take another path (one bincount per text)
    for text in texts[:3]:
        assert np.array_equal(embedder.embed([text]), embedder.reference_embed([text]))


def test_hashed_embedder_cache_refills_when_full(monkeypatch):
    from rankseam.default_plugins import hashed_embedder

    monkeypatch.setattr(hashed_embedder, "_CACHE_WORDS", 5)
    embedder = HashedEmbedder(dimensions=64)
    texts = [f"word{i} other{i} third{i}" for i in range(30)]
    for _ in range(2):
        assert np.array_equal(embedder.embed(texts), embedder.reference_embed(texts))


# ------------------------------------------------------------------------------ the schema


def _vectors_ddl(path: Path) -> str:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'").fetchone()[0]
    finally:
        con.close()


def test_a_version_1_store_is_migrated_and_answers_the_same(tmp_path):
    path = tmp_path / "v1.sqlite3"
    with rankseam.open_memory(path) as memory:
        memory.ingest(synthetic.texts(300))
        before = [(h.ref, round(h.score, 9)) for h in memory.search("kalo mine ruvo", 10)]
    # turn it into a version-1 store: vectors WITHOUT ROWID, schema_version 1
    con = sqlite3.connect(path)
    con.executescript(
        """
        BEGIN;
        CREATE TABLE v1 (space TEXT NOT NULL, rid INTEGER NOT NULL, vector BLOB NOT NULL,
                         PRIMARY KEY (space, rid)) WITHOUT ROWID;
        INSERT INTO v1 SELECT space, rid, vector FROM vectors;
        DROP TABLE vectors;
        ALTER TABLE v1 RENAME TO vectors;
        UPDATE meta SET value = '1' WHERE key = 'schema_version';
        COMMIT;
        """
    )
    con.close()
    assert "WITHOUT ROWID" in _vectors_ddl(path)
    with rankseam.open_memory(path) as memory:
        after = [(h.ref, round(h.score, 9)) for h in memory.search("kalo mine ruvo", 10)]
        assert memory.stats()["vectors_by_space"] == {memory.embedder.descriptor.key: 300}
    assert after == before
    assert "WITHOUT ROWID" not in _vectors_ddl(path)
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(
        SCHEMA_VERSION
    )
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_a_vector_takes_little_more_than_its_bytes_on_disk(tmp_path):
    path = tmp_path / "size.sqlite3"
    with rankseam.open_memory(path) as memory:
        memory.ingest(synthetic.texts(2000))
    con = sqlite3.connect(path)
    try:
        pages = con.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name IN ('vectors', "
            "(SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'vectors'))"
        ).fetchone()[0]
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table")
    finally:
        con.close()
    per_vector = pages / 2000
    # 256 float32 = 1024 bytes; version 1 took about 4.7 kB (an overflow page per vector)
    assert 1024 < per_vector < 1400, per_vector


# ------------------------------------------------------------------------ the write path


def test_one_batch_may_write_the_same_id_twice(tmp_path):
    with rankseam.open_memory(tmp_path / "b.sqlite3") as memory:
        report = memory.ingest(
            [
                {"id": "a", "text": "first words about tea"},
                {"id": "b", "text": "unrelated"},
                {"id": "a", "text": "second words about coffee"},
                {"id": "a", "text": "second words about coffee"},
            ]
        )
        assert (report.added, report.updated, report.unchanged) == (2, 1, 1)
        assert memory.get("a").ref.revision == 2
        assert memory.get(rankseam.MemoryRef("default", "a", 1)).text == "first words about tea"
        hits = memory.search("tea coffee", 5, pool=5)
        assert [h.ref for h in hits if h.ref.memory_id == "a"] == [
            rankseam.MemoryRef("default", "a", 2)
        ]
    con = sqlite3.connect(tmp_path / "b.sqlite3")
    assert con.execute("SELECT count(*) FROM fts WHERE fts MATCH 'tea'").fetchone()[0] == 0
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


# --------------------------------------------------------------------------- the ANN index


def test_ann_setting_from_the_environment():
    assert setting_from_env({}) is True
    assert setting_from_env({"RANKSEAM_ANN": "off"}) is False
    assert setting_from_env({"RANKSEAM_ANN": "500"}) == 500
    with pytest.raises(rankseam.ConfigurationError, match="RANKSEAM_ANN"):
        setting_from_env({"RANKSEAM_ANN": "sometimes"})


@pytest.fixture
def big(tmp_path, monkeypatch):
    """A memory of 3000 memories whose namespace is searched through an ANN index."""
    monkeypatch.setenv("RANKSEAM_ANN", "1000")
    for var in ("RANKSEAM_DB", "RANKSEAM_RERANK", "RANKSEAM_NAMESPACE", "RANKSEAM_EMBEDDER"):
        monkeypatch.delenv(var, raising=False)
    memory = rankseam.open_memory(tmp_path / "big.sqlite3")
    memory.ingest(synthetic.texts(3000))
    manifest = memory.maintain_index()
    assert manifest is not None and manifest.count == 3000
    yield memory
    memory.close()


def _channel(memory, query, k=40, exact=False):
    qvec = memory.embedder.embed([query])[0]
    with memory.store.read() as reader:
        return reader.vector("default", memory.embedder.descriptor, qvec, k, exact=exact)


def test_ann_finds_what_exact_search_finds_with_the_same_scores(big):
    recalls = []
    for query in synthetic.queries(20):
        approx, exact = _channel(big, query), _channel(big, query, exact=True)
        scores = dict(exact)
        recalls.append(len(set(scores) & {r for r, _s in approx}) / len(exact))
        for rid, score in approx:  # every score is the stored vector's exact cosine
            if rid in scores:
                assert score == pytest.approx(scores[rid], abs=1e-6)
    assert np.mean(recalls) >= 0.95


def test_ann_follows_writes_without_a_rebuild(big):
    manifest = big.maintain_index()
    assert manifest is not None
    assert big.maintain_index() == manifest  # nothing written: nothing to do
    words = "zebulon quixotic marmalade"
    new = big.add(words, memory_id="new").ref
    big.update("m5", words + " again")
    big.delete("m7")
    hits = dict(_channel(big, words, k=5))
    assert len(hits) == 5
    refs = big.store.read
    with refs() as reader:
        idents = reader.identities(list(hits))
    found = {ref.memory_id: ref for ref in idents.values()}
    assert found["new"] == new and found["m5"].revision == 2
    assert len(idents) == 5, "a retired revision came back"
    # exact and ANN agree on the best hits after the writes, and the base was not rebuilt
    assert [r for r, _ in _channel(big, words, k=3)] == [
        r for r, _ in _channel(big, words, k=3, exact=True)
    ]
    assert big.store.ann is not None
    base = big.store.ann.base("default", big.embedder.descriptor.key)
    assert base is not None and base.manifest.file == manifest.file
    # maintenance merges the delta: a new base that holds the new revisions
    merged = big.maintain_index()
    # 3000 + the new memory + m5's revision 2 - m5's revision 1 - m7
    assert merged is not None and merged.file != manifest.file and merged.count == 3000
    assert not (big.store.ann.folder / manifest.file).exists()
    assert {r for r, _ in _channel(big, words, k=3)} == {
        r for r, _ in _channel(big, words, k=3, exact=True)
    }


def test_a_damaged_index_is_ignored_then_rebuilt(big, caplog):
    folder = big.store.ann.folder
    manifest = json.loads(next(folder.glob("*.json")).read_text())
    file = folder / manifest["file"]
    file.write_bytes(file.read_bytes()[: manifest["bytes"] // 2])
    # a fresh store object (another process) finds the damage and searches exactly
    store = SQLiteStore(big.path, ann=1000)
    try:
        qvec = big.embedder.embed(["kalo mine"])[0]
        with store.read() as reader:
            got = reader.vector("default", big.embedder.descriptor, qvec, 10)
            want = reader.vector("default", big.embedder.descriptor, qvec, 10, exact=True)
        assert got == want
        assert "ignoring the ANN index" in caplog.text
        rebuilt = store.maintain_ann("default", big.embedder.descriptor)
        assert rebuilt is not None and rebuilt.count == 3000
    finally:
        store.close()


def test_maintenances_at_the_same_time_all_publish_a_whole_index(big):
    # two maintenances of one store object (a background one and the caller's) and one of
    # another store object (another process) rebuild the same index at once
    import threading

    for path in big.store.ann.folder.iterdir():
        path.unlink()
    other = SQLiteStore(big.path, ann=1000)
    stores = [big.store, big.store, other]
    results: dict[int, object] = {}

    def rebuild(n: int) -> None:
        try:
            results[n] = stores[n].maintain_ann("default", big.embedder.descriptor, force=True)
        except Exception as exc:  # reported by the assertion below
            results[n] = exc

    threads = [threading.Thread(target=rebuild, args=(n,)) for n in range(3)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        other.close()
    assert [type(results[n]).__name__ for n in range(3)] == ["AnnManifest"] * 3
    # one store object builds once: its second caller waited and found nothing new to merge,
    # so it returns the base its first caller published, or the other store's if that one
    # published in between; never one of its own
    files = [results[n].file for n in range(3)]  # type: ignore[attr-defined]
    assert files[1] in (files[0], files[2])
    assert not list(big.store.ann.folder.glob("*.tmp"))
    base = big.store.ann.base("default", big.embedder.descriptor.key)
    assert base is not None and base.manifest.count == 3000
    words = "kalo mine"
    assert {r for r, _ in _channel(big, words, k=3)} == {
        r for r, _ in _channel(big, words, k=3, exact=True)
    }


def test_ann_index_never_serves_another_space(big, tmp_path):
    # reembed into another space: that space has no index (exact), the old index is untouched
    small = HashedEmbedder(dimensions=64)
    big.reembed(small)
    with big.store.read() as reader:
        hits = reader.vector("default", small.descriptor, small.embed(["kalo"])[0], 10)
    assert len(hits) == 10
    assert big.store.ann.base("default", small.descriptor.key) is None
    # vector epochs are per space: the re-embed into another space leaves the active space's
    # base valid (searches keep using it; no rebuild), and moves the other space's epoch
    base = big.store.ann.base("default", big.embedder.descriptor.key)
    assert base is not None
    con = sqlite3.connect(big.path)
    try:
        assert vector_state(con, "default", big.embedder.descriptor.key)[1] == base.manifest.epoch
        assert vector_state(con, "default", small.descriptor.key)[1] > base.manifest.epoch
    finally:
        con.close()
    after = big.maintain_index()
    assert after is not None and (after.epoch, after.count) == (base.manifest.epoch, 3000)
    words = "kalo mine"
    assert {r for r, _ in _channel(big, words, k=3)} == {
        r for r, _ in _channel(big, words, k=3, exact=True)
    }


_MAINTAIN_CHILD = textwrap.dedent(
    """
    import os, sys, rankseam
    from rankseam.bench import synthetic
    os.environ["RANKSEAM_ANN"] = "1000"
    m = rankseam.open_memory(sys.argv[1])
    print("start", flush=True)
    # build or merge, write, merge again ... until killed, so that the kill always lands in
    # the middle of the work, wherever a machine's speed puts it. The texts are drawn like the
    # store's: "round R item I" texts tie by the hundred for a query (same score), and among
    # such ties the exact top 10 is one arbitrary pick, so overlap with it measures nothing.
    for round in range(1_000_000):
        m.maintain_index(force=True)
        batch = synthetic.texts(300, seed=1000 + round)
        m.ingest({"id": f"k{round}-{i}", "text": r["text"]} for i, r in enumerate(batch))
    """
)


@pytest.mark.parametrize("with_base", [False, True])
def test_sigkill_during_index_maintenance_leaves_a_store_that_searches_exactly(
    tmp_path, monkeypatch, with_base
):
    monkeypatch.setenv("RANKSEAM_ANN", "1000")
    path = tmp_path / "kill.sqlite3"
    with rankseam.open_memory(path) as memory:
        memory.ingest(synthetic.texts(10_000), batch_size=2000)
        if with_base:
            memory.maintain_index()
            memory.ingest(
                ({"id": f"m{i}", "text": f"rewritten {i}"} for i in range(0, 10_000, 7)),
                batch_size=2000,
            )
    killed_in = []
    for delay in (0.2, 0.5, 1.0):
        proc = subprocess.Popen(
            [sys.executable, "-c", _MAINTAIN_CHILD, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "start"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed_in.append(proc.returncode == -signal.SIGKILL)
    assert all(killed_in), "the maintenance loop ended before its kill"
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    with rankseam.open_memory(path) as memory:
        for query in [*synthetic.queries(10), "rewritten 70"]:
            approx = _channel(memory, query, k=10)
            exact = _channel(memory, query, k=10, exact=True)
            scores = dict(exact)
            with memory.store.read() as reader:
                live = reader.identities([r for r, _s in approx])
            assert len(live) == len(approx), "a retired revision came back"
            for rid, score in approx:
                assert rid not in scores or score == pytest.approx(scores[rid], abs=1e-6)
            assert len(set(scores) & {r for r, _s in approx}) >= 8
        # a committed memory is found by its text, at its current revision
        current = memory.get("m70")
        hit = memory.search(current.text, 3).hits[0]
        assert hit.ref == current.ref and hit.ref.revision == (2 if with_base else 1)


# ----------------------------------------------------------------------- lexical budget


def test_the_live_count_follows_adds_updates_and_deletes(tmp_path):
    with rankseam.open_memory(tmp_path / "count.sqlite3") as memory:

        def counted() -> tuple[int, int]:
            with memory.store.read() as reader:
                live = reader.live_count("default")
            con = sqlite3.connect(tmp_path / "count.sqlite3")
            rows = con.execute("SELECT count(*) FROM revisions WHERE live = 1").fetchone()[0]
            con.close()
            return live, rows

        assert counted() == (0, 0)
        memory.ingest([{"id": f"m{i}", "text": f"text number {i}"} for i in range(300)])
        assert counted() == (300, 300)
        memory.update("m1", "a new text")
        memory.delete("m2")
        memory.add("one more", memory_id="m300", namespace="other")
        assert counted() == (300, 300)


def _lexical_store(tmp_path):
    records = [{"id": f"f{i}", "text": f"alpha filler{i}"} for i in range(250)]
    records += [{"id": f"b{i}", "text": f"beta other{i}"} for i in range(20)]
    records += [{"id": f"a{i}", "text": f"alpha beta pair{i} " + "x " * i} for i in range(5)]
    records += [{"id": f"z{i}", "text": f"zzz{i}"} for i in range(1000)]
    with rankseam.open_memory(tmp_path / "lex.sqlite3") as memory:
        memory.ingest(records)
    # df: alpha 255, beta 25 (of 1275 live memories)

    def hits(**options):
        config = {"search": {"sources": ["lexical"]}, "sources": {"lexical": options}}
        with rankseam.open_memory(tmp_path / "lex.sqlite3", config=config) as memory:
            found = memory.search("alpha beta", 50, pool=50).hits
        return {h.ref.memory_id: h.channel_scores["lexical"] for h in found}

    return hits


def test_the_posting_budgets_drop_the_most_frequent_terms_first(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKSEAM_ANN", "off")
    hits = _lexical_store(tmp_path)

    def kinds(**options):
        return {mid[0] for mid in hits(**options)}

    assert kinds() == {"f", "b", "a"}  # a store under budget_from: every term under max_df
    budgeted = {"budget_from": 0, "max_scoring_postings": 0}
    assert kinds(**budgeted, max_postings=100) == {"b", "a"}  # alpha (255) is over the budget
    assert kinds(**budgeted, max_postings=10) == {"b", "a"}  # the rarest term is always kept
    assert kinds(**budgeted, max_postings=300) == {"f", "b", "a"}
    # max_df still applies first: alpha is in over 10 % of the memories
    assert kinds(budget_from=0, max_postings=300, max_df=0.1) == {"b", "a"}


def test_frequent_terms_only_score_the_memories_rarer_terms_find(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKSEAM_ANN", "off")
    hits = _lexical_store(tmp_path)
    full = hits(max_df=1.0)  # every term finds: the plain OR query
    assert {mid[0] for mid in full} == {"f", "b", "a"}
    # beta finds (25 postings), alpha (255) only scores: the alpha-only memories are not
    # found, and each memory found has exactly the BM25 of the full OR query
    split = hits(budget_from=0, max_postings=100, max_scoring_postings=1000, max_df=1.0)
    assert {mid[0] for mid in split} == {"b", "a"}
    for mid, score in split.items():
        assert score == pytest.approx(full[mid], rel=1e-12)
    assert split["a0"] > max(split[f"b{i}"] for i in range(20))  # alpha counts
    # the scoring budget bounds the frequent terms too: over it, alpha is dropped
    alone = hits(budget_from=0, max_postings=100, max_scoring_postings=200, max_df=1.0)
    assert {mid[0] for mid in alone} == {"b", "a"}
    assert alone["a0"] < split["a0"]
    # even the rarest term is over max_postings: a memory must hold a scoring term too
    both = hits(budget_from=0, max_postings=10, max_scoring_postings=1000, max_df=1.0)
    assert set(both) == {f"a{i}" for i in range(5)}
    for mid, score in both.items():
        assert score == pytest.approx(full[mid], rel=1e-12)


def test_budgeted_lexical_search_keeps_to_its_namespace(tmp_path, monkeypatch):
    monkeypatch.setenv("RANKSEAM_ANN", "off")
    path = tmp_path / "ns.sqlite3"
    records = [{"id": f"f{i}", "text": f"alpha filler{i}"} for i in range(300)]
    records += [{"id": f"a{i}", "text": f"alpha beta pair{i}"} for i in range(5)]
    records += [{"id": f"b{i}", "text": f"beta other{i}"} for i in range(5)]
    with rankseam.open_memory(path) as memory:
        memory.ingest(records, namespace="one")
        memory.ingest(records, namespace="two")
    options = {"budget_from": 0, "max_postings": 100, "max_scoring_postings": 10_000, "max_df": 1.0}
    config = {"search": {"sources": ["lexical"]}, "sources": {"lexical": options}}
    with rankseam.open_memory(path, config=config) as memory:
        for ns in ("one", "two"):
            hits = memory.search("alpha beta", 50, pool=50, namespace=ns).hits
            assert {h.ref.namespace for h in hits} == {ns}
            assert {h.ref.memory_id[0] for h in hits} == {"a", "b"}  # beta finds, alpha scores


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_postings", 0),
        ("max_scoring_postings", -1),
        ("budget_from", 1.5),
        ("budget_from", True),
    ],
)
def test_posting_budget_options_are_checked(tmp_path, option, value):
    config = {"sources": {"lexical": {option: value}}}
    with pytest.raises(rankseam.ConfigurationError, match=option):
        rankseam.open_memory(tmp_path / "x.sqlite3", config=config)


def test_bench_latency_reports_the_floor_and_reuses_its_stores(tmp_path):
    from click.testing import CliRunner

    from rankseam.bench.latency import prepared_store
    from rankseam.cli import cli

    args = ["bench", "latency", "--sizes", "150", "--repeats", "2", "--queries", "4"]
    args += ["--corpus", "synthetic", "--store-dir", str(tmp_path / "stores"), "--no-plot"]
    result = CliRunner().invoke(cli, [*args, "--no-progress", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    first = json.loads((tmp_path / "out" / "report.json").read_text())["whole_search"]["150"]
    assert first["floor"]["runs"] == 4 and first["none_to_floor"] > 0
    assert "reused_store" not in first
    assert first["open_ms"] > 0 and first["first_search_ms"] > 0 and first["warm_read_s"] >= 0
    # a later run finds the store and its ingest figures instead of ingesting again
    path, again = prepared_store(tmp_path / "stores", "synthetic", 150, False)
    assert again["reused_store"] is True and again["ingest_per_s"] == first["ingest_per_s"]
    assert Path(path).name == "synthetic-150.sqlite3"
    assert sorted(os.listdir(tmp_path / "stores"))[0].startswith("synthetic-150")


# --------------------------------------------------------------------- the rerank hop


class _Recorder:
    policy_id = "test.recorder.v1"

    def __init__(self, inline: bool, suspend: bool = False) -> None:
        if inline:
            self.needs_event_loop = False
        self.suspend = suspend
        self.threads: list[object] = []

    async def rerank(self, query, candidates, limit, /):
        import asyncio
        import threading

        self.threads.append(threading.current_thread())
        if self.suspend:
            await asyncio.sleep(0)
        return rankseam.RerankDecision(tuple(range(1, min(limit, len(candidates)) + 1)))


def test_a_loop_free_reranker_runs_inline_in_a_synchronous_search(tmp_path):
    import threading

    from rankseam.seam import runs_inline

    with rankseam.open_memory(tmp_path / "hop.sqlite3") as memory:
        memory.ingest(synthetic.texts(50))
        inline, hopping = _Recorder(inline=True), _Recorder(inline=False)
        first = memory.search("kalo mine", 5, reranker=inline)
        second = memory.search("kalo mine", 5, reranker=hopping)
        assert [h.ref for h in first] == [h.ref for h in second]
        assert inline.threads == [threading.current_thread()]
        assert hopping.threads[0] is not threading.current_thread()
        # the built-in identity reranker declares it; a wrong declaration is a clear error
        assert runs_inline(memory.context.reranker("identity"))
        # (a plugin error like any other: fail closed with a typed error, or degrade)
        with pytest.raises(rankseam.RerankError, match="needs_event_loop = False, but its"):
            memory.search("kalo mine", 5, reranker=_Recorder(inline=True, suspend=True))
