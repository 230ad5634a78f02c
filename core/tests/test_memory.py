"""Memory.search and assembly through the public API, on real SQLite files."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rankseam
from rankseam import ConfigurationError, MemoryRef, RerankDecision, ValidationError
from rankseam.memory import default_db_path

_ENV = (
    "RANKSEAM_DB",
    "RANKSEAM_RERANK",
    "RANKSEAM_NAMESPACE",
    "RANKSEAM_EMBEDDER",
    "RANKSEAM_POOL",
    "RANKSEAM_ON_ERROR",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in _ENV:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def mem(tmp_path):
    memory = rankseam.open_memory(tmp_path / "m.sqlite3")
    memory.ingest(
        [
            {"id": "tea", "text": "Ada drinks green tea every morning", "importance": 0.9},
            {"id": "tea2", "text": "Every morning Ada has a cup of green tea"},
            {"id": "bike", "text": "Ada rides her bicycle to work"},
            {"id": "cat", "text": "The cat is called Pixel"},
            {"id": "rain", "text": "It rained all weekend in Lisbon", "importance": 0.1},
        ]
    )
    yield memory
    memory.close()


class Recorder:
    """A reranker that reverses the pool and records what it saw."""

    policy_id = "test.reverse.v1"
    descriptor = {"name": "reverse"}
    deterministic = True

    def __init__(self, needs_embeddings=False):
        self.needs_embeddings = needs_embeddings
        self.seen = []

    async def rerank(self, query, candidates, limit, /):
        self.seen.append(list(candidates))
        return RerankDecision(tuple(c.rank for c in reversed(candidates))[:limit])


def test_search_returns_hits_with_identity_scores_and_channels(mem):
    result = mem.search("green tea morning", 3, reranker=None)
    assert [h.ref.memory_id for h in result][:2] == ["tea", "tea2"]
    top = result[0]
    assert top.ref == MemoryRef("default", "tea", 1)
    assert set(top.matched_by) == {"lexical", "vector"}
    assert set(top.channel_scores) == {"lexical", "vector", "importance"}
    assert result.status.value == "skipped"
    trace = result.trace
    assert trace.channels == ("lexical", "vector", "importance", "context")
    assert trace.pool_size == 30
    assert len(trace.coarse) == 5  # the whole coarse pool, not just the hits
    assert trace.coarse[0].text == top.text
    assert trace.to_dict()["rerank"] is None


def test_no_reranker_is_exactly_the_coarse_order(mem):
    plain = mem.search("Ada", 10, reranker=None)
    assert [h.ref for h in plain] == [c.ref for c in plain.trace.coarse][:10]
    ident = mem.search("Ada", 10, reranker="identity")
    assert [h.ref for h in ident] == [h.ref for h in plain]
    assert ident.trace.rerank.policy_id == "rankseam.rerank.identity.v1"
    assert ident.status.value == "ok"


def test_reranker_object_sees_pool_and_vectors(mem):
    rec = Recorder(needs_embeddings=True)
    result = mem.search("Ada tea", 2, reranker=rec, pool=4)
    seen = rec.seen[0]
    assert len(seen) == 4
    assert [h.ref for h in result] == [seen[3].ref, seen[2].ref]
    assert all(c.embedding is not None and c.embedding.shape == (256,) for c in seen)
    assert seen[0].embedding_space == mem.embedder.descriptor.key
    assert result.trace.rerank.selected_ranks == (4, 3)


def test_search_options_validation(mem):
    with pytest.raises(ValidationError):
        mem.search("x", 0)
    with pytest.raises(ValidationError, match="pool"):
        mem.search("x", pool=201)
    with pytest.raises(ValidationError, match="on_error"):
        mem.search("x", on_error="ignore")
    with pytest.raises(ValidationError, match="reranker_options"):
        mem.search("x", reranker=None, reranker_options={"a": 1})
    with pytest.raises(ConfigurationError, match="no reranker named 'nope'"):
        mem.search("x", reranker="nope")


class Boom:
    policy_id = "test.boom.v1"

    async def rerank(self, query, candidates, limit, /):
        raise TimeoutError("backend too slow")


def test_failing_reranker_fails_closed_or_degrades_visibly(mem):
    with pytest.raises(rankseam.RerankError):
        mem.search("Ada", reranker=Boom())
    result = mem.search("Ada", 3, reranker=Boom(), on_error="coarse")
    assert result.status.value == "degraded"
    assert [h.ref for h in result] == [c.ref for c in result.trace.coarse][:3]


HOSTILE = [
    '"',
    '""',
    "NEAR(a b)",
    "a NEAR/2 b",
    "*",
    "ab*",
    "-x",
    "- -",
    "((",
    ")",
    "a AND",
    "OR",
    "AND OR NOT",
    "text:foo",
    "^start",
    "{a b}: c",
    "'",
    "a' OR 1=1 --",
    "\\",
    "🙂 emoji ☕",
    "日本語のテキスト",
    "ǅ Ⅻ ß ﬁ",
    "  tabs\tand\nnewlines ",
    "x" * 60000,
    "%_%",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_are_just_text(mem, query):
    result = mem.search(query, reranker=None)
    assert isinstance(result, rankseam.SearchResult)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "empty"),
        ("   \n\t", "empty"),
        ("a\x00b", "NUL"),
        ("x" * 100_000, "64 kB"),
        ("é" * 40_000, "64 kB"),
        ("bad \ud800", "Unicode"),
        (None, "string"),
        (b"bytes", "string"),
    ],
)
def test_invalid_queries_raise_a_clear_validation_error(mem, query, message):
    with pytest.raises(ValidationError, match=message):
        mem.search(query)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=200))
def test_any_text_query_searches_or_raises_validation_error(mem, query):
    try:
        mem.search(query, reranker=None)
    except ValidationError:
        pass


def test_concurrent_writes_never_mix_text_and_identity(tmp_path):
    memory = rankseam.open_memory(tmp_path / "c.sqlite3")
    ids = [f"w{i}" for i in range(12)]
    for mid in ids:
        memory.add(f"item {mid} revision 1 apple banana", memory_id=mid)
    stop = threading.Event()
    errors: list[str] = []

    def writer(mine):
        rev = {m: 1 for m in mine}
        while not stop.is_set():
            for m in mine:
                rev[m] += 1
                memory.update(m, f"item {m} revision {rev[m]} apple banana")

    searches = [0]

    def searcher():
        while not stop.is_set():
            searches[0] += 1
            for hit in memory.search("apple banana item", 12, reranker=None, pool=12):
                r = hit.ref
                if f"item {r.memory_id} revision {r.revision} " not in hit.text + " ":
                    errors.append(f"{r} has text {hit.text!r}")
                if memory.get(r).text != hit.text:
                    errors.append(f"{r} differs from its stored revision")

    threads = [
        threading.Thread(target=writer, args=(ids[:6],)),
        threading.Thread(target=writer, args=(ids[6:],)),
        threading.Thread(target=searcher),
        threading.Thread(target=searcher),
    ]
    for t in threads:
        t.start()
    time.sleep(2.0)
    stop.set()
    for t in threads:
        t.join()
    memory.close()
    assert not errors, errors[:5]
    assert searches[0] > 5, "the searchers barely ran"


class Slow:
    policy_id = "test.slow.v1"

    def __init__(self):
        self.started = threading.Event()

    async def rerank(self, query, candidates, limit, /):
        self.started.set()
        await asyncio.sleep(0.8)
        return RerankDecision((1,))


def test_reranking_holds_no_lock_writes_and_searches_proceed(mem):
    slow = Slow()
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", mem.search("Ada", reranker=slow)))
    t.start()
    assert slow.started.wait(10)
    began = time.perf_counter()
    mem.add("written while a rerank runs", memory_id="during")
    mem.update("cat", "The cat is now called Byte")
    other = mem.search("cat", reranker=None)
    elapsed = time.perf_counter() - began
    t.join()
    assert elapsed < 0.6, f"a write or search waited {elapsed:.2f}s for a running rerank"
    assert other[0].ref == MemoryRef("default", "cat", 2)
    assert len(out["r"]) == 1


def test_asearch_matches_search(mem):
    sync = mem.search("bicycle work", 3, reranker="identity")
    async_ = asyncio.run(mem.asearch("bicycle work", 3, reranker="identity"))
    assert [h.ref for h in sync] == [h.ref for h in async_]

    async def inside_a_loop():
        return mem.search("bicycle", 1, reranker="identity")  # sync call inside a running loop

    assert asyncio.run(inside_a_loop())[0].ref.memory_id == "bike"


def test_mixed_embedder_spaces_never_mix(tmp_path):
    path = tmp_path / "mixed.sqlite3"
    with rankseam.open_memory(path) as first:
        first.add("orange juice with breakfast", memory_id="old")
    small = {"embedders": {"hashed": {"dimensions": 64}}, "search": {"sources": ["vector"]}}
    with rankseam.open_memory(path, config=small) as second:
        assert second.embedder.descriptor.key != first.embedder.descriptor.key
        assert second.stats()["vector_coverage"] == 0.0
        assert len(second.search("orange juice breakfast", reranker=None)) == 0
        second.add("orange juice at lunch", memory_id="new")
        rec = Recorder(needs_embeddings=True)
        hits = second.search("orange juice", reranker=rec)
        assert [h.ref.memory_id for h in hits] == ["new"]
        assert rec.seen[0][0].embedding.shape == (64,)
        report = second.reembed()
        assert report.embedded == 1
        assert {h.ref.memory_id for h in second.search("orange juice", reranker=None)} == {
            "old",
            "new",
        }
    with rankseam.open_memory(path, sources=["lexical", "vector"]) as third:
        rec = Recorder(needs_embeddings=True)
        third.search("orange juice", reranker=rec)
        # "new" was written in the 64-d space only: no 256-d vector is invented for it
        by_id = {c.ref.memory_id: c.embedding for c in rec.seen[0]}
        assert by_id["old"].shape == (256,)
        assert by_id["new"] is None


def test_open_memory_path_resolution(tmp_path, monkeypatch):
    env_db = tmp_path / "env.sqlite3"
    monkeypatch.setenv("RANKSEAM_DB", str(env_db))
    with rankseam.open_memory() as m:
        assert m.path == str(env_db)
    cfg_db = tmp_path / "cfg.sqlite3"
    with rankseam.open_memory(config={"db": str(cfg_db)}) as m:
        assert m.path == str(cfg_db)
    with rankseam.open_memory(tmp_path / "arg.sqlite3", config={"db": str(cfg_db)}) as m:
        assert m.path == str(tmp_path / "arg.sqlite3")
    monkeypatch.delenv("RANKSEAM_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if default_db_path().parts[-3:] == ("xdg", "rankseam", "memory.sqlite3"):
        with rankseam.open_memory() as m:
            assert m.path == str(tmp_path / "xdg" / "rankseam" / "memory.sqlite3")


def test_config_file_and_env_overrides(tmp_path, monkeypatch):
    toml = tmp_path / "rankseam.toml"
    toml.write_text(
        f'db = "{tmp_path / "t.sqlite3"}"\nnamespace = "notes"\n[search]\npool = 12\n'
        'reranker = "identity"\nfusion = "rrf"\n'
    )
    monkeypatch.setenv("RANKSEAM_POOL", "7")
    with rankseam.open_memory(config_file=toml) as m:
        assert m.config.namespace == "notes"
        assert m.config.search.pool == 7
        m.add("hello notes")
        result = m.search("hello", limit=5)
        assert result.trace.namespace == "notes"
        assert result.trace.pool_size == 7
        assert result.trace.rerank.policy_id == "rankseam.rerank.identity.v1"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reranker": "no-such-reranker"}, "no reranker named"),
        ({"embedder": "no-such-embedder"}, "no embedder named"),
        ({"sources": ["lexical", "nope"]}, "no candidate source named"),
        ({"sources": ["importance"]}, "admits"),
        ({"sources": ["lexical", "lexical"]}, "twice"),
        ({"pool": 500}, "pool"),
        ({"colour": "blue"}, "unknown option"),
        ({"config": {"search": {"fusion": "max"}}}, "fusion"),
        ({"config": {"search": {"fusion": "weighted"}}}, "now called 'convex'"),
        ({"config": {"search": {"scales": {"vector": "log"}}}}, "scales.vector"),
        ({"config": {"embedders": {"hashed": {"dimensions": 3}}}}, "dimensions"),
        ({"config": {"sources": {"lexical": {"stem": True}}}}, "stem"),
        ({"write_gate": True}, "write_gate role needs a decision backend"),
    ],
)
def test_misconfiguration_fails_at_open(tmp_path, kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        rankseam.open_memory(tmp_path / "x.sqlite3", **kwargs)


def test_write_gate(tmp_path):
    with rankseam.open_memory(
        tmp_path / "g.sqlite3", write_gate=True, write_gate_backend="heuristic"
    ) as m:
        no = m.add("... !!! ...")
        assert not no.stored and no.ref is None and no.gate.outcome.value == "no"
        yes = m.add("Ada prefers window seats on long flights")
        assert yes.stored and yes.ref is not None and not yes.gate.degraded
        skipped = m.add("... ?", gate=False)
        assert skipped.stored and skipped.gate is None
        assert m.stats()["memories"] == 2


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
def test_fusion_and_importance_prior(tmp_path, fusion):
    with rankseam.open_memory(tmp_path / "w.sqlite3", fusion=fusion) as m:
        m.add("blue whale facts", memory_id="low", importance=0.0)
        m.add("blue whale facts", memory_id="high", importance=1.0)
        hits = m.search("blue whale", reranker=None)
        assert [h.ref.memory_id for h in hits] == ["high", "low"]
        assert hits[0].matched_by == ("lexical", "vector")  # the prior admits nothing


def test_equal_scores_tie_break_by_identity(tmp_path):
    with rankseam.open_memory(tmp_path / "t.sqlite3") as m:
        for mid in ["b", "c", "a"]:
            m.add("identical text", memory_id=mid)
        assert [h.ref.memory_id for h in m.search("identical", reranker=None)] == ["a", "b", "c"]


def test_cached_vectors_follow_writes_exactly(tmp_path):
    """A long-lived Memory (incrementally refreshed vector cache) answers exactly like a
    freshly opened one (full load) after adds, updates and deletes."""
    path = tmp_path / "v.sqlite3"
    words = ["river", "stone", "cloud", "ember", "maple", "harbor", "violet", "copper"]
    live = rankseam.open_memory(path, sources=["vector"])
    for i in range(40):
        live.add(f"{words[i % 8]} {words[(i * 3) % 8]} note {i}", memory_id=f"n{i}")
    assert len(live.search("river stone", reranker=None)) > 0  # the cache is loaded now
    for i in range(0, 40, 3):
        live.update(f"n{i}", f"{words[(i + 5) % 8]} changed {i}")
    for i in range(1, 40, 7):
        live.delete(f"n{i}")
    live.add("a brand new ember harbor note", memory_id="fresh")
    for query in ["river stone", "ember harbor", "violet copper maple", "changed"]:
        cached = live.search(query, 20, reranker=None, pool=50)
        with rankseam.open_memory(path, sources=["vector"]) as fresh:
            loaded = fresh.search(query, 20, reranker=None, pool=50)
        assert [(h.ref, round(h.score, 9)) for h in cached] == [
            (h.ref, round(h.score, 9)) for h in loaded
        ]
        deleted = {f"n{i}" for i in range(1, 40, 7)}
        assert not deleted & {h.ref.memory_id for h in cached}
    live.close()


def test_cached_facts_follow_writes_exactly(tmp_path):
    """What a long-lived Memory keeps between searches (each revision's importance and
    liveness, whether the namespace is the store's only one) follows every write: it answers
    like a freshly opened one."""
    path = tmp_path / "f.sqlite3"
    live = rankseam.open_memory(path)
    for i in range(30):
        live.add(f"harbor note {i} about maple {i % 4}", memory_id=f"n{i}")

    def answers(memory, query):
        hits = memory.search(query, 40, reranker=None, pool=50)
        # (to 6 decimals: a cached vector matrix that grew by writes and a freshly loaded
        # one may differ in a cosine's last float32 bits)
        return [
            (h.ref, round(h.score, 6), h.importance, h.to_dict()["channel_scores"]) for h in hits
        ]

    def same_as_fresh():
        for query in ["harbor maple", "note 7", "maple 2 harbor"]:
            cached = answers(live, query)
            with rankseam.open_memory(path) as fresh:
                assert cached == answers(fresh, query)
        return {ref.memory_id for ref, *_rest in answers(live, "harbor maple")}

    assert {"n3", "n5"} <= same_as_fresh()  # the facts are cached now
    live.update("n3", "harbor note 3 about maple 3, revised", importance=1.0)
    live.delete("n5")
    live.add("harbor maple in another namespace", memory_id="o1", namespace="other")
    found = same_as_fresh()
    assert "n3" in found and not {"n5", "o1"} & found
    live.close()


def test_in_memory_store_works_across_threads():
    with rankseam.open_memory(":memory:") as m:
        m.add("in memory only", memory_id="x")
        hits = asyncio.run(m.asearch("memory", reranker=None))  # read in a worker thread
        assert [h.ref.memory_id for h in hits] == ["x"]
        path = m.path
    import os

    assert not os.path.exists(path)


def test_configuration_doc_example_is_valid(tmp_path):
    import re
    import tomllib
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    if not doc.is_file():
        pytest.skip("docs/configuration.md is not part of this checkout")
    block = re.search(r"```toml\n(.*?)```", doc.read_text(encoding="utf-8"), re.S).group(1)
    data = tomllib.loads(block)
    data["db"] = str(tmp_path / "doc.sqlite3")
    with rankseam.open_memory(config=data) as m:
        assert m.config.search.pool == 30
        assert m.config.search.reranker is None
        assert m.config.options("reranker", "mmr") == {"lambda": 0.7}
        m.add("configured from the documentation")
        assert len(m.search("documentation")) == 1


def test_cached_vectors_follow_interleaved_writes(tmp_path):
    """Refresh after every write (appends in place, retired rows masked, then compacted)."""
    path = tmp_path / "iv.sqlite3"
    words = ["river", "stone", "cloud", "ember", "maple", "harbor", "violet", "copper"]
    live = rankseam.open_memory(path, sources=["vector"])
    for i in range(30):
        live.add(f"{words[i % 8]} {words[(i * 5) % 8]} entry {i}", memory_id=f"e{i}")
    live.search("river", reranker=None)
    for step in range(24):
        if step % 3 == 0:
            live.delete(f"e{step}")
        elif step % 3 == 1:
            live.update(f"e{step}", f"{words[step % 8]} rewritten {step}")
        else:
            live.add(f"{words[(step + 3) % 8]} added {step}", memory_id=f"new{step}")
        query = f"{words[step % 8]} {words[(step + 1) % 8]}"
        cached = live.search(query, 30, reranker=None, pool=60)
        if step % 6 == 5:
            with rankseam.open_memory(path, sources=["vector"]) as fresh:
                loaded = fresh.search(query, 30, reranker=None, pool=60)
            assert [(h.ref, round(h.score, 9)) for h in cached] == [
                (h.ref, round(h.score, 9)) for h in loaded
            ]
        for hit in cached:
            assert not live.get(hit.ref).deleted
            assert live.get(hit.ref.memory_id).ref == hit.ref  # only current revisions
    live.close()


def test_none_means_no_reranker_in_every_entry_point(tmp_path, monkeypatch):
    """'none' is the coarse order wherever a reranker is named: search, asearch, open_memory,
    the configuration and RANKSEAM_RERANK (one translation, rankseam.seam.reranker_choice)."""
    path = tmp_path / "none.sqlite3"
    with rankseam.open_memory(path, reranker="identity") as m:
        m.add("Ada rides her bicycle to work")
        m.add("Ada drinks green tea")
        plain = m.search("Ada", 5, reranker=None)
        assert plain.trace.rerank is None
        for choice in ("none", ""):
            named = m.search("Ada", 5, reranker=choice)
            assert named.trace.rerank is None
            assert [(h.ref, h.score) for h in named] == [(h.ref, h.score) for h in plain]
            named = asyncio.run(m.asearch("Ada", 5, reranker=choice))
            assert named.trace.rerank is None and [h.ref for h in named] == [h.ref for h in plain]
        assert m.search("Ada", 5).trace.rerank is not None  # the configured default: identity
        with pytest.raises(ValidationError, match="no reranker is chosen"):
            m.search("Ada", 5, reranker="none", reranker_options={"x": 1})
    for kwargs in ({"reranker": "none"}, {"config": {"search": {"reranker": "none"}}}):
        with rankseam.open_memory(path, **kwargs) as m:
            assert m.config.search.reranker is None
            assert m.search("Ada", 5).trace.rerank is None
    monkeypatch.setenv("RANKSEAM_RERANK", "none")
    toml = tmp_path / "rankseam.toml"
    toml.write_text('[search]\nreranker = "identity"\n')
    with rankseam.open_memory(path, config_file=toml) as m:  # the environment beats a file
        result = m.search("Ada", 5)
        assert result.trace.rerank is None
        assert any("RANKSEAM_RERANK" in note for note in result.trace.notes)
    with rankseam.open_memory(path) as m:
        assert m.search("Ada", 5).trace.rerank is None
