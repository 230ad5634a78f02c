"""Feedback on search results through the public API, beyond the store kit's
FeedbackContract (which test_store_contract runs on the embedded store): the SQLite schema
migration from version 6, the ``[feedback] max_records`` setting, a store without the
capability, the async twins, snapshots (damaged feedback refused before anything is written,
older snapshots still import), the record type and the ``rankseam feedback`` commands."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

import rankseam
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.snapshot import SnapshotError
from rankseam.sqlite.schema import SCHEMA_VERSION
from rankseam.types import FeedbackHit, FeedbackRecord

Install = Callable[..., None]  # the conftest's install fixture

FIXTURES = Path(__file__).parent / "fixtures"
RANKSEAM = str(Path(sys.executable).with_name("rankseam"))
TEXTS = {
    "tea": "Ada drinks green tea every morning",
    "coffee": "Ada switched to black coffee",
    "walk": "Ada walks the dog after tea",
}


def _fill(m: rankseam.Memory) -> None:
    for memory_id, text in TEXTS.items():
        m.add(text, memory_id=memory_id)


def _version(path: Path) -> str:
    with closing(sqlite3.connect(path)) as conn:
        return str(conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])


# -- the schema --------------------------------------------------------------------------------


def test_a_version_6_store_migrates_and_keeps_feedback(tmp_path: Path) -> None:
    path = tmp_path / "v6.sqlite3"
    with rankseam.open_memory(path, reranker=None) as m:
        _fill(m)
    conn = sqlite3.connect(path)  # the store as version 6 left it: no feedback table
    conn.execute("DROP TABLE feedback")
    conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with rankseam.open_memory(path, reranker=None) as m:
        assert m.store.schema_version == SCHEMA_VERSION == 7
        record = m.feedback(m.search("green tea", 2), used=["tea"])
        assert m.feedback_records() == [record]
        assert m.get("tea").text == TEXTS["tea"]
    assert _version(path) == "7"


def test_a_store_written_by_a93b0df_migrates_to_feedback(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    shutil.copy(FIXTURES / "store-a93b0df.sqlite3", path)
    with rankseam.open_memory(path, reranker=None) as m:
        result = m.search("Melanie painted a sunrise", 1)
        m.feedback(result, used=[result[0].ref.memory_id])
        assert len(m.feedback_records()) == 1
    assert _version(path) == str(SCHEMA_VERSION)


# -- the bound's setting -----------------------------------------------------------------------


def test_the_bound_is_configurable_and_checked(tmp_path: Path) -> None:
    assert rankseam.open_memory(tmp_path / "a.sqlite3").config.feedback_max_records == 10_000
    toml = tmp_path / "rankseam.toml"
    toml.write_text("[feedback]\nmax_records = 2\n")
    with rankseam.open_memory(tmp_path / "b.sqlite3", config_file=toml, reranker=None) as m:
        assert m.config.feedback_max_records == 2
        _fill(m)
        result = m.search("Ada", 2)
        kept = [m.feedback(result) for _ in range(3)][1:]
        assert m.feedback_records() == kept
    for bad in (0, -1, 2.5, "10", True):
        with pytest.raises(ConfigurationError, match="feedback.max_records"):
            rankseam.open_memory(tmp_path / "c.sqlite3", feedback_max_records=bad)
    with pytest.raises(ConfigurationError, match=r"\[feedback\].*max_records"):
        rankseam.open_memory(tmp_path / "d.sqlite3", config={"feedback": {"cap": 3}})


# -- a store without the capability ------------------------------------------------------------

NO_FEEDBACK_STORE = """
from urllib.parse import urlsplit

import rankseam
from rankseam.sqlite import SQLiteStore

FEEDBACK = {"write_feedback", "feedback_records", "delete_feedback"}


class NoFeedbackStore:
    kind = "nofeedback"

    def __init__(self, path):
        self.inner = SQLiteStore(path)


def _delegate(name):
    return property(lambda self: getattr(self.inner, name))


for _name in {*dir(SQLiteStore), "tokenizer", "path"}:  # and what __init__ sets
    if not _name.startswith("_") and _name not in FEEDBACK and _name != "kind":
        setattr(NoFeedbackStore, _name, _delegate(_name))


@rankseam.hookimpl
def register_stores(register):
    register("nofeedback", lambda t, o, c: NoFeedbackStore(urlsplit(t.url).path),
             schemes=("nofeedback",), summary="SQLite without feedback (test)")
"""


def test_a_store_without_feedback_says_so_naming_the_store(
    install: Install, tmp_path: Path
) -> None:
    install("nofeedback", NO_FEEDBACK_STORE)
    with rankseam.open_memory(tmp_path / "src.sqlite3", reranker=None) as source:
        _fill(source)
        source.feedback(source.search("tea", 2))
        source.export_snapshot(tmp_path / "snap", include_feedback=True)
    with rankseam.open_memory(f"nofeedback://{tmp_path / 'n.sqlite3'}", reranker=None) as m:
        _fill(m)
        result = m.search("tea", 2)  # everything else works
        for call in (
            lambda: m.feedback(result),
            m.feedback_records,
            lambda: m.delete_feedback(["x"]),
            lambda: m.export_snapshot(tmp_path / "out", include_feedback=True),
        ):
            with pytest.raises(ConfigurationError, match="'nofeedback' store at .* keeps no"):
                call()
        report = m.import_snapshot(tmp_path / "snap", merge=True)
        assert report.feedback == 1 and report.feedback_written == 0
        assert any("keeps no feedback" in note for note in report.notes)


# -- async twins -------------------------------------------------------------------------------


def test_the_async_twins(tmp_path: Path) -> None:
    async def main(m: rankseam.Memory) -> None:
        result = await m.asearch("green tea", 2)
        record = await m.afeedback(result, used=["tea"], note="async")
        assert await m.afeedback_records() == [record]
        with pytest.raises(ValidationError, match="'nope'"):
            await m.afeedback(result, used=["nope"])
        with pytest.raises(ValidationError, match="confirm=True"):
            await m.adelete_feedback(namespace="default")
        assert await m.adelete_feedback(namespace="default", confirm=True) == 1

    with rankseam.open_memory(tmp_path / "a.sqlite3", reranker=None) as m:
        _fill(m)
        asyncio.run(main(m))


# -- snapshots ---------------------------------------------------------------------------------


def test_damaged_feedback_in_a_snapshot_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    with rankseam.open_memory(tmp_path / "src.sqlite3", reranker=None) as source:
        _fill(source)
        source.feedback(source.search("tea", 2), note="original")
        source.export_snapshot(tmp_path / "snap", include_feedback=True)
    feedback = tmp_path / "snap" / "feedback.jsonl"
    feedback.write_text(feedback.read_text().replace("original", "edited!!"))
    with rankseam.open_memory(tmp_path / "dst.sqlite3", reranker=None) as m:
        with pytest.raises(SnapshotError, match="feedback is damaged.*checksum"):
            m.import_snapshot(tmp_path / "snap")
        assert m.stats()["memories"] == 0 and m.feedback_records() == []
        with pytest.raises(SnapshotError, match="feedback is damaged"):
            m.verify_snapshot(tmp_path / "snap")


def test_a_snapshot_written_before_feedback_still_imports(tmp_path: Path) -> None:
    with rankseam.open_memory(tmp_path / "dst.sqlite3", reranker=None) as m:
        report = m.import_snapshot(FIXTURES / "snapshot-v1")
        assert report.memories > 0 and report.feedback is None
        assert m.feedback_records(all_namespaces=True) == []


# -- the record ----------------------------------------------------------------------------------


def test_a_record_round_trips_and_refuses_what_it_cannot_be() -> None:
    shown = [FeedbackHit(1, "a", 1, 0.5), FeedbackHit(2, "b", 3, 0.25)]
    record = FeedbackRecord("f1", "ns", "q", shown, ["b"], 10.0, where={"k": 1}, note="n")
    assert FeedbackRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    assert record.used_ranks == (2,)
    with pytest.raises(ValueError, match="'z', which is not among the hits"):
        FeedbackRecord("f1", "ns", "q", shown, ["z"], 10.0)
    with pytest.raises(ValueError, match="ranked 1..n"):
        FeedbackRecord("f1", "ns", "q", shown[::-1], [], 10.0)
    with pytest.raises(ValueError, match="needs the key 'query'"):
        FeedbackRecord.from_dict({k: v for k, v in record.to_dict().items() if k != "query"})
    with pytest.raises(ValueError, match="not a feedback record"):
        FeedbackRecord.from_dict({**record.to_dict(), "shown": [{"rank": 1}]})


def test_feedback_takes_only_a_search_result(tmp_path: Path) -> None:
    with rankseam.open_memory(tmp_path / "a.sqlite3", reranker=None) as m:
        _fill(m)
        with pytest.raises(ValidationError, match="takes the SearchResult"):
            m.feedback([h for h in m.search("tea", 2)])  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="note"):
            m.feedback(m.search("tea", 2), note="x" * 5000)
        empty = m.search("tea", 2, where={"absent": "key"})
        assert len(empty) == 0
        assert m.feedback(empty).shown == ()  # a result that showed nothing: nothing used


# -- the command ---------------------------------------------------------------------------------


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")}
    env["XDG_CONFIG_HOME"] = str(cwd / "no-user-config")
    return subprocess.run(
        [RANKSEAM, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_feedback_commands(tmp_path: Path) -> None:
    with rankseam.open_memory(tmp_path / "m.sqlite3", reranker=None) as m:
        _fill(m)
        first = m.feedback(m.search("green tea", 2), used=["tea"])
        second = m.feedback(m.search("coffee", 2))
    listed = _run("feedback", "list", "--db", "m.sqlite3", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    ids = [r["feedback_id"] for r in json.loads(listed.stdout)["feedback"]]
    assert ids == [first.feedback_id, second.feedback_id]
    limited = _run("feedback", "list", "--db", "m.sqlite3", "--limit", "1", "--json", cwd=tmp_path)
    assert [r["used"] for r in json.loads(limited.stdout)["feedback"]] == [["tea"]]
    done = _run("feedback", "export", "out.jsonl", "--db", "m.sqlite3", "--json", cwd=tmp_path)
    assert json.loads(done.stdout) == {"exported": 2, "path": "out.jsonl"}
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert [json.loads(line)["feedback_id"] for line in lines] == ids
    snap = _run("export", "snap", "--db", "m.sqlite3", "--include-feedback", "--json", cwd=tmp_path)
    assert json.loads(snap.stdout)["feedback"] == 2
    # deleting a namespace's feedback asks; without a terminal it needs --yes
    refused = _run("feedback", "delete", "--db", "m.sqlite3", "-n", "default", cwd=tmp_path)
    assert refused.returncode == 1 and "--yes" in refused.stderr
    one = _run("feedback", "delete", first.feedback_id, "--db", "m.sqlite3", "--json", cwd=tmp_path)
    assert json.loads(one.stdout) == {"deleted": 1}
    rest = _run(
        "feedback", "delete", "--all-namespaces", "--yes", "--db", "m.sqlite3", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert json.loads(rest.stdout) == {"deleted": 1}
    nothing = _run("feedback", "delete", "--db", "m.sqlite3", cwd=tmp_path)
    assert nothing.returncode == 1 and "--namespace" in nothing.stderr
    clone = _run("import", "snap", "--db", "clone.sqlite3", "--json", cwd=tmp_path)
    assert json.loads(clone.stdout)["feedback_written"] == 2
