"""Stores as a plugin role: a store plugin found through its entry point, chosen by the target's
URL scheme, with its own candidate sources; the conformance kit run against it (and failing for
broken stores); passwords in targets never shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import rankseam
from rankseam.cli import cli
from rankseam.compose import Config
from rankseam.errors import ConfigurationError
from rankseam.plugins import get_plugins
from rankseam.store.target import parse_target, redact, scrub
from rankseam.testing import StoreContract

#: The ``install`` fixture (conftest.py) takes ``(entry_point_name, module_source)``.
Install = Callable[..., None]

#: A store plugin: the SQLite store behind the scheme ``mirror://USER:PASSWORD@localhost/PATH``,
#: with candidate sources of its own that record that they ran. ``?broken=NAME`` breaks one
#: part of the contract on purpose (the kit must notice).
MIRROR = """
import threading
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit

import rankseam
from rankseam.plugin.stores import ConcurrentReader, LexicalQuery
from rankseam.sqlite import SQLiteStore

CALLS = []
THREADS = {}  # source -> the name of the thread it ran in
FAIL = set()  # sources that raise


class Lending:
    # the SQLite reader lent to other threads (?lend=1): siblings of one snapshot, its one
    # connection taking one call at a time

    def __init__(self, reader, lock, fresh=None):
        self._reader, self._lock, self._fresh = reader, lock, fresh

    def __getattr__(self, name):
        value = getattr(self._reader, name)

        def locked(*args, **kwargs):
            with self._lock:
                return value(*args, **kwargs)

        return locked if callable(value) else value

    def neighbours(self, keys, before, after, /):
        # written out, not through __getattr__: Python 3.12's protocol checks look methods up
        # statically
        with self._lock:
            return self._reader.neighbours(keys, before, after)

    @contextmanager
    def siblings(self, n, /):
        if self._fresh is not None:  # ?broken=siblings: each call in a new snapshot
            yield [Fresh(self._fresh) for _ in range(n)]
            return
        yield [Lending(self._reader, self._lock) for _ in range(n)]
        CALLS.append("siblings closed")


class Fresh:
    def __init__(self, read):
        self._read = read

    def __getattr__(self, name):
        def fresh(*args, **kwargs):
            with self._read() as reader:
                return getattr(reader, name)(*args, **kwargs)

        return fresh


class MirrorStore(SQLiteStore):
    kind = "mirror"
    broken = ""
    url = ""
    lend = False

    @contextmanager
    def read(self):
        with super().read() as reader:
            if not self.lend:
                yield reader
                return
            fresh = super().read if self.broken == "siblings" else None
            yield Lending(reader, threading.RLock(), fresh)

    def get_ref(self, ref):
        if self.broken == "get_ref":  # answers the head, whatever revision is asked for
            return self.get(ref.namespace, ref.memory_id)
        return super().get_ref(ref)

    @property
    def location(self):
        return self.url if self.broken == "location" else self.path

    @property
    def reader_type(self):
        return Lending if self.lend else SQLiteStore.reader_type


def open_mirror(target, options, context):
    parts = urlsplit(target.url)
    if parts.path.endswith("refuse-me.sqlite3"):
        raise RuntimeError(f"could not connect to {target.url} (password rejected)")
    store = MirrorStore(parts.path)
    store.broken = parse_qs(parts.query).get("broken", [""])[0]
    store.lend = parse_qs(parts.query).get("lend", [""])[0] == "1"
    store.url = target.url
    return store


class Lexical:
    admits, needs_query_vector = True, False

    def candidates(self, request, /):
        CALLS.append("lexical")
        THREADS["lexical"] = threading.current_thread().name
        if "lexical" in FAIL:
            raise RuntimeError("the lexical channel broke")
        terms = [t for t in request.query.lower().split() if t.isalnum()]
        query = LexicalQuery(request.namespace, request.k, terms, where=request.where)
        return request.reader.lexical(query) if terms else []


class Vector:
    admits, needs_query_vector = True, True

    def candidates(self, request, /):
        CALLS.append("vector")
        THREADS["vector"] = threading.current_thread().name
        if "vector" in FAIL:
            raise RuntimeError("the vector channel broke")
        return request.reader.vector(
            request.namespace, request.embedder, request.query_vector, request.k,
            where=request.where,
        )


class Importance:
    admits, needs_query_vector = False, False

    def candidates(self, request, /):
        CALLS.append("importance")
        scores = request.reader.importance(request.admitted)
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


@rankseam.hookimpl
def register_stores(register):
    register("mirror", open_mirror, schemes=("mirror",), summary="SQLite behind a URL")


class SideBySide(Lexical):
    # a channel that reads a capability outside the whole read contract: the lent snapshot
    reads = (ConcurrentReader,)

    def candidates(self, request, /):
        with request.reader.siblings(1) as (sibling,):
            CALLS.append("side_by_side")
        return super().candidates(request)


@rankseam.hookimpl
def register_candidate_sources(register):
    register("lexical", lambda o, c: Lexical(), store="mirror")
    register("vector", lambda o, c: Vector(), store="mirror")
    register("importance", lambda o, c: Importance(), store="mirror")
    register("mirror_only", lambda o, c: Lexical(), store="mirror")
    register("side_by_side", lambda o, c: SideBySide())
"""

SECRET = "hunter2-s3cret"


def mirror_url(path: Path, query: str = "") -> str:
    return f"mirror://kit:{SECRET}@localhost{path}" + (f"?{query}" if query else "")


@pytest.fixture
def mirror(install: Install) -> Any:
    install("mirror", MIRROR)
    import rs_test_mirror  # type: ignore[import-not-found]

    rs_test_mirror.CALLS.clear()
    rs_test_mirror.THREADS.clear()
    rs_test_mirror.FAIL.clear()
    return rs_test_mirror


# -- choosing a store ----------------------------------------------------------------------


def test_a_store_plugin_opens_its_scheme_with_its_own_sources(mirror: Any, tmp_path: Path) -> None:
    url = mirror_url(tmp_path / "m.sqlite3")
    with rankseam.open_memory(url) as memory:
        assert memory.store.kind == "mirror"
        ref = memory.add("the mirror store keeps a walrus").ref
        hits = memory.search("walrus", 5).hits
        assert [h.ref for h in hits] == [ref]
        assert set(mirror.CALLS) == {"lexical", "vector", "importance"}
        shown = [repr(memory), memory.path, json.dumps(memory.stats()), repr(memory.config)]
        assert all(SECRET not in text for text in shown), shown
        assert memory.path == str(tmp_path / "m.sqlite3")
    listed = {p.name: p.to_dict() for p in get_plugins()}
    assert listed["mirror"]["components"] == {
        "store": ["mirror"],
        "candidate_source": ["lexical", "vector", "importance", "mirror_only", "side_by_side"],
    }


def test_a_reader_that_lends_its_snapshot_gets_its_channels_side_by_side(
    mirror: Any, tmp_path: Path
) -> None:
    """On a reader with ``siblings`` (rankseam.plugin.stores.ConcurrentReader) the second admitting
    channel runs in a thread of its own on a sibling, which is released only after it
    answered; the answers are those of the same channels one after another, and an error in
    either thread is the search's error."""
    path = tmp_path / "lend.sqlite3"
    with rankseam.open_memory(mirror_url(path), reranker=None) as memory:
        memory.ingest(
            {"id": f"h{i}", "text": f"harbour log {i}: tide {'high' if i % 2 else 'low'}"}
            for i in range(40)
        )
        serial = memory.search("harbour high tide", 8)
    assert mirror.THREADS == {"lexical": "MainThread", "vector": "MainThread"}
    mirror.CALLS.clear()
    with rankseam.open_memory(mirror_url(path, "lend=1"), reranker=None) as memory:
        lent = memory.search("harbour high tide", 8)
        assert mirror.THREADS == {"lexical": "MainThread", "vector": "rankseam-channel"}
        # the two channels in either order; the sibling released after both answered
        assert sorted(mirror.CALLS[:2]) == ["lexical", "vector"]
        assert mirror.CALLS[2:] == ["siblings closed", "importance"]
        assert [(h.ref, h.score) for h in lent] == [(h.ref, h.score) for h in serial]
        assert len(lent) == 8
        for broken in ("vector", "lexical"):
            mirror.FAIL.clear()
            mirror.FAIL.add(broken)
            with pytest.raises(RuntimeError, match=f"the {broken} channel broke"):
                memory.search("harbour high tide", 8)
        mirror.FAIL.clear()
        assert [h.ref for h in memory.search("harbour high tide", 8)] == [h.ref for h in lent]


def test_the_cli_takes_a_url_and_never_prints_its_password(mirror: Any, tmp_path: Path) -> None:
    url = mirror_url(tmp_path / "cli.sqlite3")
    runner = CliRunner()
    added = runner.invoke(cli, ["add", "a heron at the mirror pond", "--db", url])
    assert added.exit_code == 0, added.output
    found = runner.invoke(cli, ["search", "heron", "--db", url, "--json"])
    assert found.exit_code == 0, found.output
    assert json.loads(found.output)["hits"][0]["text"] == "a heron at the mirror pond"
    stats = runner.invoke(cli, ["stats", "--db", url])
    assert stats.exit_code == 0 and SECRET not in stats.output
    failed = runner.invoke(cli, ["search", "x", "--db", mirror_url(tmp_path / "refuse-me.sqlite3")])
    assert failed.exit_code == 1
    assert SECRET not in failed.output and "kit:***@localhost" in failed.output
    plugins = runner.invoke(cli, ["plugins", "--options"])
    assert SECRET not in plugins.output and '"mirror"' in plugins.output


def test_an_unknown_scheme_names_the_installed_stores_without_the_password(
    mirror: Any,
) -> None:
    with pytest.raises(ConfigurationError) as info:
        rankseam.open_memory(f"nosuch://admin:{SECRET}@db.example/prod")
    message = str(info.value)
    assert SECRET not in message and "nosuch://admin:***@db.example/prod" in message
    assert "sqlite (sqlite://" in message and "mirror (mirror://" in message


def test_a_failing_store_factory_is_reported_without_the_password(
    mirror: Any, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError) as info:
        rankseam.open_memory(mirror_url(tmp_path / "refuse-me.sqlite3"))
    message = str(info.value)
    assert SECRET not in message
    assert "store 'mirror' (plugin 'mirror') could not open" in message
    assert "RuntimeError: could not connect to mirror://kit:***@localhost" in message
    assert info.value.__suppress_context__  # the original error (with the URL) is not shown


def test_a_source_of_another_store_is_refused_by_name(mirror: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="runs on the store"):
        rankseam.open_memory(
            tmp_path / "plain.sqlite3",
            config={"search": {"sources": ["lexical", "mirror_only"]}},
        )
    # the same names resolve to each store's own sources
    with rankseam.open_memory(tmp_path / "plain.sqlite3") as memory:
        memory.add("plain sqlite walrus")
        assert memory.search("walrus", 3).hits
    assert mirror.CALLS == []


def test_a_store_lacking_a_channels_reader_capability_is_refused_naming_both(
    mirror: Any, tmp_path: Path
) -> None:
    # the SQLite store's snapshot is not lent (no siblings): refused when the Memory opens
    config = {"search": {"sources": ["lexical", "side_by_side"]}}
    with pytest.raises(ConfigurationError) as info:
        rankseam.open_memory(tmp_path / "plain.sqlite3", config=config)
    message = str(info.value)
    assert "channel 'side_by_side' (plugin 'mirror') reads the store through ConcurrentReader" in (
        message
    )
    assert "store 'sqlite' (plugin 'rankseam.sqlite.plugin') does not offer" in message
    assert mirror.CALLS == []
    # a store whose snapshot offers it opens, and the channel runs
    with rankseam.open_memory(mirror_url(tmp_path / "m.sqlite3", "lend=1"), config=config) as m:
        m.add("lent walrus")
        assert m.search("walrus", 3).hits
    assert "side_by_side" in mirror.CALLS
    # without the lending, the mirror is refused too, by the same check
    with pytest.raises(ConfigurationError, match="store 'mirror' \\(plugin 'mirror'\\) does not"):
        rankseam.open_memory(mirror_url(tmp_path / "n.sqlite3"), config=config)


def test_a_default_channel_the_store_cannot_serve_is_left_out(
    install: Install, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a store plugin whose snapshot has no neighbours: with the default sources its channels
    # run without the context stage; naming "context" in search.sources is refused
    install("plainstore", PLAIN_STORE)
    caplog.set_level("INFO", logger="rankseam.assembly")
    with rankseam.open_memory(f"plain://{tmp_path / 'p.sqlite3'}") as memory:
        memory.add("walrus on the ice", thread="t", position=1)
        assert memory.search("walrus", 3).hits
        assert "context" not in memory.search("walrus", 3).trace.channels
    assert "'context'" in caplog.text and "left out of the default channels" in caplog.text
    with pytest.raises(ConfigurationError, match="channel 'context' .* NeighbourReader"):
        rankseam.open_memory(
            f"plain://{tmp_path / 'p.sqlite3'}",
            config={"search": {"sources": ["lexical", "vector", "context"]}},
        )


#: A store plugin whose read snapshot lacks the optional NeighbourReader (a wrapper that lends
#: only the whole read contract's methods).
PLAIN_STORE = """
from contextlib import contextmanager
from urllib.parse import urlsplit

import rankseam
from rankseam.sqlite import SQLiteStore

WHOLE = {"live_count", "document_frequency", "lexical", "vector", "importance",
         "top_importance", "identities", "memories", "resolve"}


class Plain:
    def __init__(self, reader):
        self._reader = reader

    def __getattr__(self, name):
        if name not in WHOLE:
            raise AttributeError(name)
        return getattr(self._reader, name)


class PlainStore(SQLiteStore):
    kind = "plain"
    reader_type = Plain

    @contextmanager
    def read(self):
        with super().read() as reader:
            yield Plain(reader)


@rankseam.hookimpl
def register_stores(register):
    register("plain", lambda t, o, c: PlainStore(urlsplit(t.url).path), schemes=("plain",),
             summary="SQLite without neighbours (test)")
"""


def test_a_channel_whose_reads_is_not_protocols_is_refused(
    install: Install, tmp_path: Path
) -> None:
    install(
        "oddreads",
        """
import rankseam

class Odd:
    admits, needs_query_vector = True, False
    reads = ("LexicalReader",)

    def candidates(self, request, /):
        return []

@rankseam.hookimpl
def register_candidate_sources(register):
    register("odd", lambda o, c: Odd())
""",
    )
    with pytest.raises(ConfigurationError, match="Odd.reads must be a tuple of reader Protocol"):
        rankseam.open_memory(tmp_path / "x.sqlite3", config={"search": {"sources": ["odd"]}})


def test_two_stores_claiming_one_scheme_name_both_plugins(install: Install) -> None:
    install("mirror", MIRROR)
    install("mirror2", MIRROR.replace('register("mirror", ', 'register("mirror2", '))
    listed = {p.name: p.to_dict() for p in get_plugins()}
    refused = [p for p in listed.values() if p["status"] == "error"]
    assert len(refused) == 1
    assert "URL scheme 'mirror' is claimed by store" in refused[0]["error"]
    assert "'mirror'" in refused[0]["error"] and "'mirror2'" in refused[0]["error"]


def test_a_sqlite_url_needs_an_absolute_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="sqlite:///ABSOLUTE/PATH"):
        rankseam.open_memory("sqlite://somehost/x.sqlite3")
    path = tmp_path / "by url.sqlite3"
    with rankseam.open_memory("sqlite://" + str(path).replace(" ", "%20")) as memory:
        memory.add("a url-opened store")
        assert memory.path == str(path)
    with rankseam.open_memory(path) as memory:  # the same file, by its plain path
        assert memory.stats()["memories"] == 1


# -- targets -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "shown"),
    [
        ("postgresql://app:pw@db:5432/mem", "postgresql://app:***@db:5432/mem"),
        ("postgresql://app:p@ss/w:rd@db/mem", "postgresql://app:***@db/mem"),
        ("postgresql://app@db/mem", "postgresql://app@db/mem"),
        (
            "postgresql://db/mem?sslmode=require&password=pw",
            "postgresql://db/mem?sslmode=require&password=***",
        ),
        ("postgresql:///mem?host=/tmp&PassWord=pw#x", "postgresql:///mem?host=/tmp&PassWord=***#x"),
        ("/var/lib/rankseam/p:w@x.sqlite3", "/var/lib/rankseam/p:w@x.sqlite3"),
        ("sqlite:///tmp/x.sqlite3", "sqlite:///tmp/x.sqlite3"),
        ("C://Users/x.sqlite3", "C://Users/x.sqlite3"),
    ],
)
def test_redaction(target: str, shown: str) -> None:
    assert redact(target) == shown
    parsed = parse_target(target)
    assert str(parsed) == shown and shown in repr(parsed)


def test_scrub_hides_the_password_as_written_and_decoded() -> None:
    url = "postgresql://app:p%40ss%2Fword@db/mem"
    message = f"connection to {url} failed: password 'p@ss/word' rejected; p%40ss%2Fword"
    out = scrub(message, url)
    assert "p@ss/word" not in out and "p%40ss%2Fword" not in out
    assert "postgresql://app:***@db/mem" in out


def test_schemes_and_plain_paths() -> None:
    assert parse_target("PostgreSQL://h/db").scheme == "postgresql"
    assert parse_target("notes.sqlite3").scheme == "sqlite"
    assert parse_target("notes.sqlite3").is_path
    assert parse_target(":memory:").is_path
    assert parse_target("C://x.sqlite3").is_path  # a drive letter is not a scheme
    assert not parse_target("sqlite:///x").is_path


def test_a_config_never_shows_the_password() -> None:
    config = Config.from_mapping(
        {
            "db": f"postgresql://app:{SECRET}@db/mem",
            "stores": {"postgres": {"password": SECRET, "pool_max": 4}},
            "decision_backends": {"openai": {"api_key": SECRET, "model": "m"}},
        }
    )
    shown = repr(config)
    assert SECRET not in shown
    assert "'pool_max': 4" in shown and "'model': 'm'" in shown  # the rest stays visible
    assert config.db is not None and SECRET in config.db  # kept for the store to connect
    assert config.options("store", "postgres")["password"] == SECRET


# -- the kit against a plugin store --------------------------------------------------------


class TestMirrorStoreKit(StoreContract):
    """The conformance kit passes for a store that comes from a plugin."""

    waived_tests = {
        "test_concurrent_writers_in_processes_lose_nothing": "runs for the SQLite store",
        "test_a_killed_writer_leaves_only_whole_batches": "runs for the SQLite store",
        "test_ranks_like_the_embedded_store": "its own toy sources rank differently on purpose",
    }

    @pytest.fixture
    def store_target(self, install: Install, tmp_path: Path) -> str:
        install("mirror", MIRROR)
        return mirror_url(tmp_path / "kit.sqlite3")


class TestLendingMirrorStoreKit(TestMirrorStoreKit):
    """The kit passes for a store whose reader lends its snapshot (and runs the siblings'
    test, which the plain mirror skips)."""

    @pytest.fixture
    def store_target(self, install: Install, tmp_path: Path) -> str:
        install("mirror", MIRROR)
        return mirror_url(tmp_path / "kit.sqlite3", "lend=1")


class _Kit(StoreContract):
    """The kit's standard tests, called directly on broken stores."""


@pytest.mark.parametrize(
    ("broken", "test"),
    [
        ("get_ref", "test_revisions_are_immutable_and_exact"),
        ("get_ref", "test_tombstones"),
        ("location", "test_the_targets_password_is_never_shown"),
    ],
)
def test_the_kit_fails_a_broken_store(mirror: Any, tmp_path: Path, broken: str, test: str) -> None:
    target = mirror_url(tmp_path / "broken.sqlite3", f"broken={broken}")
    with pytest.raises(AssertionError):
        getattr(_Kit(), test)(target)
    # the same test passes for the store when it is not broken
    getattr(_Kit(), test)(mirror_url(tmp_path / "fine.sqlite3"))


def test_the_kit_fails_a_store_whose_siblings_read_another_snapshot(
    mirror: Any, tmp_path: Path
) -> None:
    target = mirror_url(tmp_path / "stale.sqlite3", "lend=1&broken=siblings")
    with pytest.raises(AssertionError, match="a sibling answered from another snapshot"):
        _Kit().test_siblings_read_the_readers_snapshot(target)
    _Kit().test_siblings_read_the_readers_snapshot(mirror_url(tmp_path / "ok.sqlite3", "lend=1"))


def test_the_kit_fails_a_store_whose_sources_rank_otherwise(mirror: Any, tmp_path: Path) -> None:
    # the mirror's own sources declare no scale or weight (fusion min-max scales them at
    # weight 1): the same memories rank otherwise than with the host's sources on SQLite
    target = mirror_url(tmp_path / "own-sources.sqlite3")
    with pytest.raises(AssertionError, match="ranks differently from the embedded store"):
        _Kit().test_ranks_like_the_embedded_store(target, tmp_path)


# -- the contract's documentation ----------------------------------------------------------

PAGE = Path(__file__).resolve().parents[2] / "docs" / "writing-plugins.md"


def _members(protocol: type) -> list[str]:
    return sorted(
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    )


def test_the_store_section_documents_every_member_of_the_contract() -> None:
    from rankseam.plugin.stores import (
        BatchWriter,
        ConcurrentReader,
        ImportanceReader,
        LexicalReader,
        Store,
        StoreReader,
        VectorReader,
    )

    readers = (StoreReader, LexicalReader, VectorReader, ImportanceReader)
    if not PAGE.exists():
        pytest.fail(f"{PAGE} is missing")
    section = PAGE.read_text(encoding="utf-8").split("## Writing a store", 1)[1]
    section = section.split("\n## ", 1)[0]
    missing = [
        f"{protocol.__name__}.{name}"
        for protocol in (Store, BatchWriter, *readers, ConcurrentReader)
        for name in _members(protocol)
        if f"`{name}" not in section and f", `{name}`" not in section
    ]
    assert not missing, f"docs/writing-plugins.md 'Writing a store' does not describe {missing}"
    # the host plans every write; a store applies planned writes through its BatchWriter
    assert {"add", "update", "delete", "write_batch"}.isdisjoint(_members(Store))
    assert _members(BatchWriter) == ["heads", "retire", "tombstone", "write"]
    # the reader is the whole read contract: every method the host's channels use
    assert len(_members(Store)) >= 19 and sorted(m for r in readers for m in _members(r)) == [
        "document_frequency",
        "identities",
        "importance",
        "lexical",
        "live_count",
        "memories",
        "resolve",
        "top_importance",
        "vector",
    ]


def test_the_console_script_takes_a_sqlite_url(tmp_path: Path) -> None:
    script = str(Path(sys.executable).with_name("rankseam"))
    url = "sqlite://" + str(tmp_path / "cli url.sqlite3").replace(" ", "%20")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "no-user-config")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )

    added = run("add", "the url store keeps an avocet", "--id", "avocet", "--db", url)
    assert added.returncode == 0, added.stderr
    found = run("search", "avocet", "--db", url, "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["hits"][0]["memory_id"] == "avocet"
    assert (tmp_path / "cli url.sqlite3").exists()
    missing = run("search", "avocet", "--db", "nosuch://u:" + SECRET + "@h/db")
    assert missing.returncode == 1 and SECRET not in missing.stderr + missing.stdout
    assert "no installed store opens nosuch://" in missing.stderr


def test_plan_write_is_the_one_rule_of_what_a_record_does():
    import attrs

    from rankseam.plugin.stores import MemoryHead, PreparedRecord, WritePlan
    from rankseam.store.records import plan_write

    def record(text="t", importance=None, metadata=None):
        return PreparedRecord("ns", "m", text, importance, metadata, 0.0, f"h:{text}")

    # a new memory: revision 1, the defaults where the record says nothing
    assert plan_write(record(), None) == WritePlan("added", 1, 0.5, "{}")
    head = MemoryHead("ns", "m", 7, 3, False, "h:t", 0.9, '{"a":1}')
    # the same content over a live head: nothing to write, the head's revision
    assert plan_write(record(), head) == WritePlan("unchanged", 3, 0.9, '{"a":1}')
    assert plan_write(record(importance=0.9), head).change == "unchanged"
    # new text keeps the head's importance and metadata, and retires the live head
    assert plan_write(record("u"), head) == WritePlan("updated", 4, 0.9, '{"a":1}', 7)
    # new importance alone is a change too
    assert plan_write(record(importance=0.2), head) == WritePlan("updated", 4, 0.2, '{"a":1}', 7)
    # over a deleted memory: a new revision, no live head to retire, even with the same text
    deleted = attrs.evolve(head, deleted=True)
    assert plan_write(record(), deleted) == WritePlan("updated", 4, 0.9, '{"a":1}', None)
