"""The PostgreSQL store through the public API: revisions, tombstones, namespaces, spaces,
bulk ingest, search with its own sources, bad input. (The host's store conformance kit runs in
test_conformance.py.)"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import rankseam
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.plugin.stores import MemoryNotFoundError
from rankseam.types import MemoryRef
from rankseam_postgres.schema import SCHEMA_VERSION


def test_revisions_tombstones_and_search(pg_url: str) -> None:
    with rankseam.open_memory(pg_url) as memory:
        ref = memory.add("Ada drinks green tea every morning", importance=0.8).ref
        assert ref is not None and ref.revision == 1
        ref2 = memory.update(ref.memory_id, "Ada switched to coffee")
        assert ref2 == MemoryRef("default", ref.memory_id, 2)
        assert memory.get(ref).text == "Ada drinks green tea every morning"
        assert memory.get(ref2).importance == 0.8  # importance carried over
        hits = memory.search("what does Ada drink?", 5, reranker=None).hits
        assert [h.ref for h in hits] == [ref2]  # only the live revision is searchable
        assert set(hits[0].matched_by) == {"lexical", "vector"}
        deleted = memory.delete(ref.memory_id)
        assert deleted == ref2
        assert memory.search("coffee", 5, reranker=None).hits == ()
        assert memory.get(ref2).deleted and memory.get(ref).text.startswith("Ada drinks")
        again = memory.add("Ada drinks water now", memory_id=ref.memory_id).ref
        assert again == MemoryRef("default", ref.memory_id, 3)  # the chain continues
        with pytest.raises(ValidationError, match="use update"):
            memory.add("something else", memory_id=ref.memory_id)
        same = memory.add("Ada drinks water now", memory_id=ref.memory_id, importance=0.5)
        assert same.unchanged and same.ref == again


def test_namespaces_are_separate(pg_url: str) -> None:
    with rankseam.open_memory(pg_url) as memory:
        memory.add("the blue kettle is in the cupboard", namespace="a", memory_id="k")
        memory.add("the red kettle is on the stove", namespace="b", memory_id="k")
        assert memory.namespaces() == ["a", "b"]
        for ns, word in (("a", "blue"), ("b", "red")):
            hits = memory.search("kettle", 5, namespace=ns, reranker=None).hits
            assert [h.ref.namespace for h in hits] == [ns]
            assert word in hits[0].text
        stats = memory.stats()
        assert stats["namespaces"]["a"] == {"memories": 1, "deleted": 0, "revisions": 1}
        assert stats["memories"] == 2


def test_ingest_is_idempotent_and_batches_are_counted(pg_url: str) -> None:
    records = [{"id": f"m{i}", "text": f"note {i} about the garden shed"} for i in range(120)]
    with rankseam.open_memory(pg_url) as memory:
        first = memory.ingest(records, batch_size=50)
        assert (first.added, first.batches) == (120, 3)
        second = memory.ingest(records, batch_size=50)
        assert (second.added, second.updated, second.unchanged) == (0, 0, 120)
        changed = [
            *records[1:3],
            {"id": "m0", "text": "note zero, rewritten"},
            {"id": "m0", "text": "note zero, rewritten twice"},  # one id twice in one batch
        ]
        third = memory.ingest(changed, batch_size=500)
        assert (third.updated, third.unchanged) == (2, 2)
        assert memory.get("m0").ref.revision == 3
        assert memory.get(rankseam.MemoryRef("default", "m0", 2)).text == "note zero, rewritten"
        assert memory.get("m0").text == "note zero, rewritten twice"
        assert len(list(memory.list())) == 120


def test_bad_records_leave_the_batch_unwritten(pg_url: str) -> None:
    with rankseam.open_memory(pg_url) as memory:
        bad = [{"id": "ok", "text": "fine"}, {"id": "bad", "text": ""}]
        with pytest.raises(ValidationError) as err:  # an IngestError: which record, what stayed
            memory.ingest(bad)
        assert err.value.index == 2 and err.value.committed == 0  # type: ignore[attr-defined]
        assert list(memory.list()) == []
        with pytest.raises(ValidationError):
            memory.add("nul \x00 inside")
        with pytest.raises(MemoryNotFoundError):
            memory.update("nobody", "text")


def test_mixed_space_guard(pg_url: str) -> None:
    """A vector of another embedder space is never compared with the active one's."""
    with rankseam.open_memory(pg_url) as memory:
        memory.add("a small grey cat sleeps on the sofa", memory_id="cat")
    with rankseam.open_memory(pg_url, config={"embedders": {"hashed": {"dimensions": 64}}}) as m64:
        hits = m64.search("grey cat", 5, reranker=None).hits
        assert [h.matched_by for h in hits] == [("lexical",)]  # no vector in the 64-d space
        assert m64.stats()["vector_coverage"] == 0.0
        assert m64.reembed().embedded == 1
        hits = m64.search("grey cat", 5, reranker=None).hits
        assert set(hits[0].matched_by) == {"lexical", "vector"}


def test_vectors_for_a_reranker_are_the_stored_ones(pg_url: str) -> None:
    with rankseam.open_memory(pg_url) as memory:
        ref = memory.add("vectors round trip through pgvector", memory_id="v").ref
        assert ref is not None
        stored = memory.store.vectors_of([None], memory.embedder.descriptor)
        assert stored == [None]
        expected = memory.embedder.embed(["vectors round trip through pgvector"])[0]
        with memory.store.read() as reader:
            key = reader.resolve(ref)
        got = memory.store.vectors_of([key], memory.embedder.descriptor)
        assert isinstance(got, np.ndarray) and not got.flags.writeable
        assert got.dtype == np.float32 and np.array_equal(got[0], expected.astype(np.float32))


def _index_scans(pg_server: Any, index: str) -> int:
    """How many scans the statistics count for ``index`` (a search's backend reports them
    about a second after its transaction ends)."""
    import psycopg

    with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname = %s",
            (index,),
        ).fetchone()
    return int(row[0]) if row else 0


def _index_search(
    memory: Any, q: np.ndarray, pg_server: Any, index: str
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """The vector channel through the index (any namespace size), and the exact scan's
    scores; waits until the statistics show that ``index`` was scanned."""
    memory.store.exact_below = 1
    scans = _index_scans(pg_server, index)
    with memory.store.read() as reader:
        approx = list(reader.vector("default", memory.embedder.descriptor, q, 10))
        exact = dict(reader.vector("default", memory.embedder.descriptor, q, 10, exact=True))
    deadline = time.monotonic() + 60  # the statistics' own delay, not the search's time
    while _index_scans(pg_server, index) == scans:
        assert time.monotonic() < deadline, f"the search did not walk {index}"
        time.sleep(0.2)
    return approx, exact


def _indexes(pg_server: Any, pg_url: str) -> dict[str, str]:
    """The HNSW indexes of the store's vectors table: name -> definition."""
    import psycopg

    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s "
            "AND tablename = 'vectors' AND indexdef LIKE '%%USING hnsw%%'",
            (schema,),
        ).fetchall()
    return {str(name): str(definition) for name, definition in rows}


def test_hnsw_index_answers_like_the_exact_scan(pg_server: Any, pg_url: str) -> None:
    """Once built, the half-precision HNSW index proposes candidates; the scores are the
    exact scan's, computed from the stored vectors."""
    texts = [f"record {i} mentions topic {i % 37} and colour {i % 11}" for i in range(400)]
    with rankseam.open_memory(pg_url) as memory:
        memory.ingest({"id": f"r{i}", "text": t} for i, t in enumerate(texts))
        store = memory.store
        assert store.maintain_index("default", memory.embedder.descriptor) is None  # small
        assert _indexes(pg_server, pg_url) == {}
        built = store.maintain_index("default", memory.embedder.descriptor, force=True)
        assert built is not None and built["kind"] == "hnsw"
        ((name, definition),) = _indexes(pg_server, pg_url).items()
        assert "halfvec(256)) halfvec_ip_ops" in definition
        assert "m='16'" in definition and "ef_construction='128'" in definition
        q = memory.embedder.embed(["topic 5 and colour 3"])[0]
        approx, exact = _index_search(memory, q, pg_server, name)
        assert len(approx) == 10
        overlap = [key for key, _s in approx if key in exact]
        assert len(overlap) >= 8
        for key in overlap:
            assert dict(approx)[key] == exact[key]  # not the half-precision distance


def test_an_earlier_full_precision_index_serves_until_maintain_index_replaces_it(
    pg_server: Any, pg_url: str
) -> None:
    """A store whose space was indexed by an earlier release (full-precision ``vector``
    HNSW index) is searched through that index; ``maintain_index`` builds the half-precision
    one and drops the old."""
    import hashlib

    import psycopg

    texts = [f"record {i} mentions topic {i % 37} and colour {i % 11}" for i in range(400)]
    with rankseam.open_memory(pg_url) as memory:
        memory.ingest({"id": f"r{i}", "text": t} for i, t in enumerate(texts))
        key = memory.embedder.descriptor.key
        schema = pg_url.rsplit("schema=", 1)[1]
        legacy = "vectors_hnsw_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
        with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
            conn.execute(
                f"CREATE INDEX {legacy} ON {schema}.vectors USING hnsw "
                "((vector::vector(256)) vector_ip_ops) WHERE space = %s AND live".replace(
                    "%s", "'" + key + "'"
                )
            )
            from rankseam_postgres.schema import space_index_kind

            assert space_index_kind(conn, schema, key) == "vector"
            q = memory.embedder.embed(["topic 5 and colour 3"])[0]
            approx, exact = _index_search(memory, q, pg_server, legacy)
            assert len(approx) == 10 and sum(k in exact for k, _s in approx) >= 8
            built = memory.store.maintain_index("default", memory.embedder.descriptor, force=True)
            assert built is not None
            assert space_index_kind(conn, schema, key) == "halfvec"
        ((name, _definition),) = _indexes(pg_server, pg_url).items()
        assert name == built["index"] != legacy
        approx, exact = _index_search(memory, q, pg_server, name)
        assert len(approx) == 10 and sum(k in exact for k, _s in approx) >= 8


def test_a_space_that_is_not_normalised_keeps_a_full_precision_index(
    pg_server: Any, pg_url: str
) -> None:
    """Half precision holds components up to 65 504: a space that is not L2-normalised gets
    a full-precision cosine index, so a vector with a large component is still written."""
    import psycopg

    from rankseam_postgres.schema import build_space_index, index_kind, space_index_kind

    assert (index_kind("ip"), index_kind("cosine")) == ("halfvec", "vector")
    with rankseam.open_memory(pg_url) as memory:
        memory.add("a store to hold the schema")
    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
        name = build_space_index(conn, schema, "raw-space", 3, "cosine")
        assert name is not None and name.startswith("vectors_hnsw_")
        assert space_index_kind(conn, schema, "raw-space") == "vector"
        conn.execute(
            f"INSERT INTO {schema}.vectors (namespace, space, rid, live, vector) "
            "VALUES ('default', 'raw-space', 424242, true, '[1e6, 0, 1]')"
        )
        assert build_space_index(conn, schema, "too-wide", 2001, "cosine") is None
    definition = _indexes(pg_server, pg_url)[name]
    assert "vector(3)) vector_cosine_ops" in definition


def test_schema_is_versioned_and_foreign_schemas_are_refused(pg_server, pg_url: str) -> None:
    import psycopg

    with rankseam.open_memory(pg_url) as memory:
        assert memory.stats()["schema_version"] == SCHEMA_VERSION
    schema = pg_url.rsplit("schema=", 1)[1]
    conninfo = pg_server.base_url
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"UPDATE {schema}.meta SET value = '99' WHERE key = 'schema_version'")
        conn.execute("CREATE SCHEMA foreign_app")
        conn.execute("CREATE TABLE foreign_app.users (id int)")
    with pytest.raises(ConfigurationError, match="newer than this"):
        rankseam.open_memory(pg_url)
    with pytest.raises(ConfigurationError, match="not a rankseam store"):
        rankseam.open_memory(pg_server.url("foreign_app"))


def test_url_options_are_checked(pg_server) -> None:
    with pytest.raises(ConfigurationError, match="pool_max"):
        rankseam.open_memory(pg_server.url(pool_max="0"))
    with pytest.raises(ConfigurationError, match="schema"):
        rankseam.open_memory(pg_server.url("Bad-Name"))
    with pytest.raises(ConfigurationError, match="text search configuration"):
        rankseam.open_memory(pg_server.url(text_search="klingon"))


def test_the_hosts_sources_run_on_this_store(pg_url: str) -> None:
    """The plugin registers no candidate source of its own: the host's lexical channel (its
    options too) runs through this store's reader."""
    with rankseam.open_memory(pg_url) as memory:
        memory.ingest(
            [
                {"id": "a", "text": "the lighthouse keeper paints the lighthouse"},
                {"id": "b", "text": "a keeper of bees"},
                {"id": "c", "text": "nothing relevant here"},
            ]
        )
    config = {"search": {"sources": ["lexical"]}, "sources": {"lexical": {"max_df": 0.5}}}
    with rankseam.open_memory(pg_url, config=config) as memory:
        hits = memory.search("lighthouse keeper", 5, reranker=None).hits
        assert [h.ref.memory_id for h in hits] == ["a", "b"]
    with pytest.raises(ConfigurationError, match="ranking"):
        rankseam.open_memory(pg_url, config={"sources": {"lexical": {"ranking": "ts_rank"}}})


def test_bm25_equals_the_formula_over_the_stored_tsvectors(pg_url: str) -> None:
    """The lexical channel's scores are Okapi BM25 (FTS5's constants), recomputed here from
    each revision's stored lexeme positions and token count."""
    import math

    import psycopg

    from rankseam_postgres.url import parse_url

    texts = [
        "the ferry to the island leaves at nine, the ferry back at six",
        "bring the blue umbrella to the ferry",
        "islands and ferries: a guide",
        "nothing about boats at all, only the weather and the island weather",
        "ferry ferry ferry",
    ]
    with rankseam.open_memory(pg_url) as memory:
        memory.ingest({"id": f"t{i}", "text": t} for i, t in enumerate(texts))
        memory.update("t1", "bring the red umbrella")  # a retired revision leaves the stats
        store = memory.store
        with store.read() as reader:
            got = dict(reader.bm25("default", {"ferri": 1.0, "island": 2.0}, 10))
            key_of = {reader.resolve(m.ref): m.ref.memory_id for m in memory.list()}
    parsed = parse_url(pg_url)
    with psycopg.connect(parsed.conninfo) as conn:
        rows = conn.execute(
            f"SELECT rid, tokens, (SELECT array_agg(lexeme || ':' || cardinality(positions)) "
            f"FROM unnest(tsv)) FROM {parsed.schema}.revisions WHERE live"
        ).fetchall()
    docs = {rid: (tokens, dict(x.split(":") for x in lex)) for rid, tokens, lex in rows}
    n_docs = len(docs)
    avgdl = sum(t for t, _ in docs.values()) / n_docs
    expected = {}
    for lex, weight in (("ferri", 1.0), ("island", 2.0)):
        df = sum(lex in tf for _t, tf in docs.values())
        idf = max(math.log((n_docs - df + 0.5) / (df + 0.5)), 1e-6) * weight
        for rid, (tokens, tf) in docs.items():
            if lex in tf:
                f = int(tf[lex])
                score = idf * f * 2.2 / (f + 1.2 * (1 - 0.75 + 0.75 * tokens / avgdl))
                expected[rid] = expected.get(rid, 0.0) + score
    assert set(got) == set(expected)
    for rid, score in expected.items():
        assert got[rid] == pytest.approx(score, rel=1e-9), key_of.get(rid)


def _lexical_tables(conninfo: str, schema: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``terms`` and ``postings`` tables, and both recomputed from the live revisions'
    ``tsvector``: ``(stored, expected)``."""
    import psycopg

    with psycopg.connect(conninfo) as conn:
        terms = dict(
            ((ns, lex), df)
            for ns, lex, df in conn.execute(
                f"SELECT namespace, lexeme, df FROM {schema}.terms WHERE df > 0"
            )
        )
        postings = {
            (ns, lex, rid): (tf, tokens)
            for ns, lex, rid, tf, tokens in conn.execute(
                f"SELECT namespace, lexeme, rid, tf, tokens FROM {schema}.postings"
            )
        }
        rows = conn.execute(
            f"SELECT r.namespace, u.lexeme, r.rid, cardinality(u.positions), r.tokens "
            f"FROM {schema}.revisions r, unnest(r.tsv) u WHERE r.live"
        ).fetchall()
    expected_postings = {(ns, lex, rid): (tf, tokens) for ns, lex, rid, tf, tokens in rows}
    expected_terms: dict[Any, int] = {}
    for ns, lex, _rid, _tf, _tokens in rows:
        expected_terms[(ns, lex)] = expected_terms.get((ns, lex), 0) + 1
    return (
        {"terms": terms, "postings": postings},
        {"terms": expected_terms, "postings": expected_postings},
    )


def test_postings_and_document_frequencies_follow_every_write_and_a_migration(
    pg_server, pg_url: str
) -> None:
    """The lexical tables (``terms``: document frequencies, ``postings``) equal what the live
    revisions' ``tsvector`` say after adds, updates, deletes and a re-add in two namespaces;
    a version 1 store (no lexical tables, a GIN index) is migrated to the same tables and
    searches the same."""
    import psycopg

    schema = pg_url.rsplit("schema=", 1)[1]
    with rankseam.open_memory(pg_url) as memory:
        memory.ingest(
            [
                {"id": "a", "text": "the ferry to the island leaves at nine"},
                {"id": "b", "text": "ferries and islands and ferries again"},
                {"id": "c", "text": "the weather on the island"},
                {"id": "a", "namespace": "other", "text": "an island ferry, elsewhere"},
            ]
        )
        memory.update("a", "the ferry now leaves at ten")
        memory.delete("c")
        memory.add("a ferry ferry ferry", memory_id="d")
        memory.delete("d")
        memory.add("the island ferry is back", memory_id="d")
        stored, expected = _lexical_tables(pg_server.base_url, schema)
        assert stored == expected
        assert stored["terms"][("default", "ferri")] == 3  # a, b, d
        before = [(h.ref, h.score) for h in memory.search("island ferry", 5, reranker=None).hits]
    with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {schema}.postings, {schema}.terms")
        conn.execute(f"CREATE INDEX revisions_tsv ON {schema}.revisions USING gin (tsv) WHERE live")
        conn.execute(f"UPDATE {schema}.meta SET value = '1' WHERE key = 'schema_version'")
    with rankseam.open_memory(pg_url) as memory:
        assert memory.stats()["schema_version"] == SCHEMA_VERSION
        assert _lexical_tables(pg_server.base_url, schema) == (stored, expected)
        after = [(h.ref, h.score) for h in memory.search("island ferry", 5, reranker=None).hits]
    assert after == before
