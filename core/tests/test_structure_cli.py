"""The structure fields through the ``rankseam`` command (a real process): add, update, ingest,
get, list, search and export/import carry thread, position and derived_from."""

from __future__ import annotations

import json
from pathlib import Path

from cli_process import ok, run


def test_the_fields_round_trip_through_the_command(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    ok("add", "the ferry leaves at nine", "--db", db, "--id", "t1", "--thread", "s1",
       "--position", "1", cwd=tmp_path)  # fmt: skip
    ok("add", "and comes back at ten", "--db", db, "--id", "t2", "--thread", "s1",
       "--position", "2023-05-08T10:00:00+00:00", cwd=tmp_path)  # fmt: skip
    ok("add", "fact: a ferry at nine", "--db", db, "--id", "f1", "--derived-from", "t1",
       cwd=tmp_path)  # fmt: skip
    got = json.loads(ok("get", "t2", "--db", db, "--json", cwd=tmp_path))
    assert (got["thread"], got["position"], got["derived_from"]) == ("s1", 1683540000.0, None)
    assert "thread=s1 position=1.0" in ok("get", "t1", "--db", db, cwd=tmp_path)
    ok("update", "t1", "the ferry leaves at half past nine", "--db", db, "--position", "1.5",
       cwd=tmp_path)  # fmt: skip
    got = json.loads(ok("get", "t1", "--db", db, "--json", cwd=tmp_path))
    assert (got["revision"], got["thread"], got["position"]) == (2, "s1", 1.5)  # thread kept
    listed = json.loads(ok("list", "--db", db, "--json", cwd=tmp_path))["memories"]
    assert {m["memory_id"]: m["derived_from"] for m in listed}["f1"] == "t1"
    assert "[s1 #1.5]" in ok("list", "--db", db, cwd=tmp_path)
    hits = json.loads(ok("search", "ferry", "--db", db, "--json", cwd=tmp_path))["hits"]
    assert {h["memory_id"]: (h["thread"], h["position"]) for h in hits}["t1"] == ("s1", 1.5)
    lines = [
        {"id": "x1", "text": "ingested turn", "thread": "s2", "position": 4},
        {"id": "x2", "text": "ingested fact", "derived_from": "x1"},
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    ok("ingest", str(tmp_path / "in.jsonl"), "--db", db, cwd=tmp_path)
    got = json.loads(ok("get", "x1", "--db", db, "--json", cwd=tmp_path))
    assert (got["thread"], got["position"]) == ("s2", 4.0)
    ok("export", str(tmp_path / "snap"), "--db", db, cwd=tmp_path)
    clone = str(tmp_path / "clone.sqlite3")
    ok("import", str(tmp_path / "snap"), "--db", clone, cwd=tmp_path)
    got = json.loads(ok("get", "x2", "--db", clone, "--json", cwd=tmp_path))
    assert got["derived_from"] == "x1"


def test_a_bad_field_is_refused_naming_it(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    bad = run("add", "text", "--db", db, "--position", "someday", cwd=tmp_path)
    assert bad.returncode != 0 and "position" in bad.stderr
    bad = run("add", "text", "--db", db, "--thread", " x ", cwd=tmp_path)
    assert bad.returncode != 0 and "thread" in bad.stderr
