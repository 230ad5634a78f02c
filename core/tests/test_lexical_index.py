"""The SQLite store's lexical index answers the lexical channel exactly as FTS5 does: the same
row keys in the same order, the same BM25 scores to the bit, after any writes (docs/
performance.md, "The lexical index of a small store")."""

from __future__ import annotations

import os
import random
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rankseam
from rankseam.bench import synthetic
from rankseam.plugin.stores import LexicalQuery, ScoredKeys
from rankseam.sqlite import SQLiteStore, lexical_cache, lexical_index
from rankseam.sqlite.reader import SQLiteReader, or_joined
from rankseam.store.filters import parse_where

#: Words of the generated memories: porter's shared stems, diacritics (removed by the
#: tokenizer), non-Latin scripts, digits, a word FTS5 splits in two ("ab_cd") and one it
#: reads as no token at all ("__").
WORDS = (
    "ferry island noon run running runs runner café cafe naïve NAIVE über uber 東京 "
    "москва δέλτα 42 2024 ab_cd __ timetable tide harbour harbor the of apples apple"
).split()


@pytest.fixture
def _index_at_once(monkeypatch):
    # the index is built by the first query of a store (not after FTS5 has cost a build)
    monkeypatch.setattr(lexical_cache, "BUILD_S_PER_ROW", 0.0)


def by_fts5(reader: SQLiteReader, query: LexicalQuery) -> ScoredKeys:
    """FTS5's answer to ``query``: the query text ``SQLiteReader.lexical`` gives FTS5."""
    match = or_joined(query.terms)
    if query.scoring and query.require_scoring:
        required = f"({match}) AND ({or_joined(query.scoring)})"
        return reader.fts(required, query.namespace, query.k, where=query.where)
    scoring = or_joined(query.scoring) if query.scoring else None
    return reader.fts(match, query.namespace, query.k, scoring=scoring, where=query.where)


def assert_same(reader: SQLiteReader, query: LexicalQuery) -> ScoredKeys:
    got, want = reader.lexical(query), by_fts5(reader, query)
    assert got.row_keys.tolist() == want.row_keys.tolist(), query
    assert got.scores.tobytes() == want.scores.tobytes(), query  # to the bit
    return got


def held(memory) -> lexical_index.LexicalSnapshot | None:
    return memory.store.lexical.held()


text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map(" ".join)
record = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 40), text)
operation = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["a", "b"]), st.integers(0, 40), text),
    st.tuples(st.just("add"), st.sampled_from(["a", "b"]), st.integers(0, 40), text),
    st.tuples(st.just("update"), st.sampled_from(["a", "b"]), st.integers(0, 40), text),
    st.tuples(st.just("delete"), st.sampled_from(["a", "b"]), st.integers(0, 40), st.just("")),
    st.tuples(st.just("forget"), st.sampled_from(["a", "b"]), st.integers(0, 40), st.just("")),
    st.tuples(st.just("ingest"), st.sampled_from(["a", "b"]), st.integers(0, 40), text),
    st.tuples(st.just("search"), st.sampled_from(["a", "b", "c"]), st.integers(0, 40), text),
    st.tuples(st.just("search"), st.sampled_from(["a", "b"]), st.integers(0, 40), text),
)


def _apply(memory, op, namespace, n, words) -> None:
    memory_id = f"m{n}"
    try:
        if op == "add":
            memory.add(words or "empty", memory_id=memory_id, namespace=namespace,
                       metadata={"bucket": n % 3})  # fmt: skip
        elif op == "update":
            memory.update(memory_id, words or "empty", namespace=namespace)
        elif op == "delete":
            memory.delete(memory_id, namespace=namespace)
        elif op == "forget":
            memory.forget(memory_id, namespace=namespace)
        elif op == "ingest":  # a batch: new memories and new revisions
            records = [{"id": f"m{(n + i) % 41}", "text": f"{words} {WORDS[i]}"} for i in range(5)]
            memory.ingest(records, namespace=namespace)
    except rankseam.errors.RankseamError:
        pass  # an id that is not there (or already there)


def _queries(namespace: str, words: list[str], n: int) -> list[LexicalQuery]:
    terms = list(dict.fromkeys(w.lower() for w in words)) or ["ferry"]
    half = max(1, len(terms) // 2)
    where = parse_where({"bucket": n % 3})
    out = [
        LexicalQuery(namespace, k, terms, where=w) for k in (1, 3, 120, -1) for w in (None, where)
    ]
    out.append(LexicalQuery(namespace, 5, terms[:half], terms[half:]))
    out.append(LexicalQuery(namespace, 5, terms[:1], terms[1:], require_scoring=True))
    out.append(LexicalQuery(namespace, 5, terms[:half], terms[half:], require_scoring=True))
    return out


@settings(
    max_examples=int(os.environ.get("LEXI_EXAMPLES", 40)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    initial=st.lists(record, max_size=80),
    ops=st.lists(operation, min_size=1, max_size=40),
    tokenizer=st.sampled_from(["porter", "unicode61"]),
)
def test_the_index_answers_as_fts5_after_any_writes(tmp_path_factory, initial, ops, tokenizer):
    path = tmp_path_factory.mktemp("lexical") / "m.db"
    SQLiteStore(path, tokenizer=tokenizer).close()  # the tokenizer is the file's from now on
    memory = rankseam.open_memory(path)
    try:
        for namespace, n, words in initial:
            _apply(memory, "add", namespace, n, words)
        for op, namespace, n, words in ops:
            if op != "search":
                _apply(memory, op, namespace, n, words)
                continue
            with memory.store.read() as reader:
                for query in _queries(namespace, words.split(), n):
                    assert_same(reader, query)
                snapshot = held(memory)  # the index answered (a snapshot of this version)
                assert snapshot is not None and snapshot.version == reader.write_version()
                for word in {w.lower() for w in words.split()}:
                    # (a document frequency counts the rows of every namespace)
                    rows = sum(len(reader.fts(or_joined([word]), ns, -1)) for ns in "ab")
                    assert reader.document_frequency(namespace, word, 1000) == rows
                    assert reader.document_frequency(namespace, word, 1) == min(rows, 1)
    finally:
        memory.close()


@pytest.mark.usefixtures("_index_at_once")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_larger_store_through_writes(tmp_path, seed):
    rng = random.Random(seed)
    vocabulary = [*WORDS, *synthetic.vocabulary(300, seed=seed)]
    weights = [1 / (i + 1) for i in range(len(vocabulary))]  # frequent and rare words

    def words(n: int) -> str:
        return " ".join(rng.choices(vocabulary, weights, k=n))

    memory = rankseam.open_memory(tmp_path / "m.db")
    try:
        for namespace in ("a", "b"):
            records = [
                {"id": f"m{i}", "text": words(rng.randint(1, 30)), "metadata": {"bucket": i % 3}}
                for i in range(300)
            ]
            memory.ingest(records, namespace=namespace)
        for _step in range(40):
            namespace = rng.choice("ab")
            memory_id = f"m{rng.randrange(330)}"
            op = rng.choice(["add", "add", "update", "delete", "forget", "none"])
            _apply(memory, op, namespace, int(memory_id[1:]), words(rng.randint(1, 20)))
            with memory.store.read() as reader:
                for n in range(8):
                    for query in _queries(rng.choice("ab"), words(rng.randint(1, 6)).split(), n):
                        assert_same(reader, query)
                snapshot = held(memory)
                assert snapshot is not None and snapshot.version == reader.write_version()
    finally:
        memory.close()


def _store(tmp_path, count: int):
    memory = rankseam.open_memory(tmp_path / "m.db")
    rng = random.Random(count)
    vocabulary = synthetic.vocabulary(200)
    memory.ingest([{"text": " ".join(rng.choices(vocabulary, k=12))} for _ in range(count)])
    return memory, vocabulary


@pytest.fixture
def store300(tmp_path):
    """A store of 300 memories of a 200-word vocabulary (closed after the test), and the
    vocabulary."""
    memory, vocabulary = _store(tmp_path, 300)
    yield memory, vocabulary
    memory.close()


def test_a_store_searched_once_is_not_indexed_one_searched_often_is(store300):
    memory, vocabulary = store300
    memory.search(vocabulary[0], 10, reranker=None)
    assert held(memory) is None  # FTS5 answered: one search does not pay for a build
    for _ in range(50):  # until FTS5's answers have cost what a build costs
        for word in vocabulary:
            memory.search(word, 10, reranker=None)
        if held(memory) is not None:
            break
    assert held(memory) is not None


@pytest.mark.usefixtures("_index_at_once")
def test_a_write_advances_the_index_that_the_next_queries_use(store300):
    memory, vocabulary = store300
    memory.search(vocabulary[0], 10, reranker=None)
    base = held(memory)
    assert base is not None and base.added.rows == 0
    memory.add(f"{vocabulary[1]} harbour")
    for word in ("harbour", vocabulary[1]):  # the second query at least advances it
        with memory.store.read() as reader:
            assert_same(reader, LexicalQuery("default", 10, [word]))
    after = held(memory)
    assert after is not None and after.added.rows == 1
    assert after.docs is base.docs  # the base's postings are shared, not read again


@pytest.mark.usefixtures("_index_at_once")
def test_a_forget_leaves_nothing_of_the_erased_memory_in_the_process(store300):
    memory, vocabulary = store300
    secret = memory.add("zanzibar passcode", memory_id="secret").ref
    memory.search("zanzibar", 10, reranker=None)
    memory.search("zanzibar", 10, reranker=None)
    tokenizer = memory.store.lexical.tokenizer
    assert held(memory) is not None and tokenizer.known("zanzibar") is not None
    memory.forget(secret.memory_id)
    assert held(memory) is None  # its postings are gone with the snapshot
    assert tokenizer.known("zanzibar") is None  # and the words it taught the tokenizer
    hits = memory.search("zanzibar passcode", 10, reranker=None).hits
    assert "secret" not in [h.ref.memory_id for h in hits]
    with memory.store.read() as reader:  # FTS5 and a rebuilt index agree again
        assert len(assert_same(reader, LexicalQuery("default", 10, ["zanzibar"]))) == 0
        assert_same(reader, LexicalQuery("default", 10, [vocabulary[0], "passcode"]))
    memory.close()
    with pytest.raises(rankseam.ValidationError, match="closed"):
        memory.store.lexical  # noqa: B018 - a closed store holds no index


@pytest.mark.usefixtures("_index_at_once")
def test_a_store_over_the_bound_stays_with_fts5(store300, monkeypatch):
    monkeypatch.setattr(lexical_index, "MAX_ROWS", 100)
    memory, vocabulary = store300
    with memory.store.read() as reader:
        assert_same(reader, LexicalQuery("default", 10, vocabulary[:3]))
    assert held(memory) is None


@pytest.mark.usefixtures("_index_at_once")
def test_a_reader_of_an_older_snapshot_gets_its_own_answer(store300):
    memory, vocabulary = store300
    query = LexicalQuery("default", 10, [vocabulary[2], "harbour"])
    with memory.store.read() as older:
        before = assert_same(older, query)

        def write_and_search() -> None:  # another thread: its own connection
            memory.add(f"harbour {vocabulary[2]}")
            memory.search("harbour", 10, reranker=None)
            memory.search("harbour", 10, reranker=None)

        thread = threading.Thread(target=write_and_search)
        thread.start()
        thread.join()
        snapshot = held(memory)
        assert snapshot is not None and snapshot.version > older.write_version()
        # the snapshot held is newer than this reader's: FTS5 answers it, as before
        assert assert_same(older, query).row_keys.tolist() == before.row_keys.tolist()


@pytest.mark.usefixtures("_index_at_once")
def test_readers_in_threads_while_writing(tmp_path):
    memory, vocabulary = _store(tmp_path, 200)
    failures: list[BaseException] = []

    def search(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(40):
                with memory.store.read() as reader:
                    assert_same(reader, LexicalQuery("default", 20, rng.sample(vocabulary, 3)))
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=search, args=(seed,)) for seed in range(3)]
    for thread in threads:
        thread.start()
    for i in range(20):
        memory.add(" ".join(vocabulary[i : i + 5]))
    for thread in threads:
        thread.join()
    memory.close()
    assert not failures, failures[0]
