"""Filters through the ``rankseam`` command (docs/filters.md, "On the command line"): ``search``
and ``list`` take ``--where JSON``, ``--thread``, ``--since``, ``--until`` (and ``search``
``--min-score``), run as a user runs them (a real process of the installed console script);
a malformed filter is a usage error naming ``--where``, a filter the host refuses an error
naming the place in it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_process import ok, run

from rankseam.testing import FILTER_SAMPLE, invoke_cli

#: Four memories (rankseam.testing.FILTER_SAMPLE): two users, two years, one thread, created a
#: day apart from START on.
DAY = 86_400
START = 1_796_083_200  # 2026-12-01T00:00:00+00:00


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("filters-cli")
    (tmp / "in.jsonl").write_text("".join(json.dumps(dict(r)) + "\n" for r in FILTER_SAMPLE))
    ok("ingest", "in.jsonl", "--db", "m.sqlite3", cwd=tmp)
    return tmp


def search_ids(store: Path, *args: str) -> list[str]:
    out = json.loads(ok("search", "birthday dinner", "--db", "m.sqlite3", "--json", *args,
                        cwd=store))  # fmt: skip
    return [hit["memory_id"] for hit in out["hits"]]


def list_ids(store: Path, *args: str) -> list[str]:
    out = json.loads(ok("list", "--db", "m.sqlite3", "--json", *args, cwd=store))
    return [m["memory_id"] for m in out["memories"]]


def test_search_takes_a_where_filter(store: Path) -> None:
    assert sorted(search_ids(store)) == ["c1", "d1", "d2", "s1"]
    assert sorted(search_ids(store, "--where", '{"user": "dana"}')) == ["d1", "d2"]
    assert search_ids(store, "--where", '{"user": "dana", "year": {"$gte": 2025}}') == ["d1"]
    either = '{"$or": [{"user": "sam"}, {"thread": "chat-7"}]}'
    assert sorted(search_ids(store, "--where", either)) == ["c1", "s1"]
    assert search_ids(store, "--where", '{"user": {"$in": ["nobody"]}}') == []


def test_search_takes_thread_and_time_scope(store: Path) -> None:
    assert search_ids(store, "--thread", "chat-7") == ["c1"]
    # since: at or after; until: before (ISO 8601 or epoch seconds)
    assert sorted(search_ids(store, "--since", "2026-12-02T00:00:00+00:00")) == ["c1", "d2", "s1"]
    assert sorted(search_ids(store, "--until", str(START + 2 * DAY))) == ["d1", "d2"]
    window = search_ids(store, "--since", str(START + DAY), "--until", "2026-12-03T00:00:00+00:00")
    assert window == ["d2"]
    assert search_ids(store, "--thread", "chat-7", "--where", '{"user": "dana"}') == []


def test_search_takes_a_score_cut_off(store: Path) -> None:
    every = json.loads(ok("search", "birthday dinner", "--db", "m.sqlite3", "--json",
                          cwd=store))["hits"]  # fmt: skip
    scores = sorted((h["score"] for h in every), reverse=True)
    assert len(set(scores)) > 1  # else a cut-off between them proves nothing
    cut = (scores[0] + scores[1]) / 2
    kept = json.loads(ok("search", "birthday dinner", "--db", "m.sqlite3", "--json",
                         "--min-score", str(cut), cwd=store))["hits"]  # fmt: skip
    assert [h["memory_id"] for h in kept] == [h["memory_id"] for h in every if h["score"] >= cut]
    assert all(h["score"] >= cut for h in kept) and len(kept) < len(every)


def test_the_json_output_changes_only_by_the_traces_filter(store: Path) -> None:
    base = ["search", "birthday dinner", "--db", "m.sqlite3", "--json"]
    plain = json.loads(ok(*base, cwd=store))
    scoped = json.loads(ok(*base, "--where", '{"user": "dana"}', cwd=store))
    assert set(plain) == set(scoped)
    assert {k for h in plain["hits"] for k in h} == {k for h in scoped["hits"] for k in h}
    traced = json.loads(ok(*base, "--trace", cwd=store))["trace"]
    filtered = json.loads(ok(*base, "--trace", "--where", '{"user": "dana"}', "--thread", "t",
                             "--min-score", "0.25", cwd=store))["trace"]  # fmt: skip
    assert set(traced) == set(filtered)
    assert (traced["where"], traced["min_score"]) == (None, None)
    assert filtered["where"] == {"$and": [{"user": {"$eq": "dana"}}, {"thread": {"$eq": "t"}}]}
    assert filtered["min_score"] == 0.25


def test_list_takes_the_same_filter(store: Path) -> None:
    assert list_ids(store) == ["d1", "d2", "s1", "c1"]  # write order
    assert list_ids(store, "--where", '{"year": {"$lt": 2026}}') == ["d2"]
    assert list_ids(store, "--where", '{"user": {"$ne": "dana"}}') == ["s1", "c1"]
    assert list_ids(store, "--thread", "chat-7") == ["c1"]
    window = ["--since", "2026-12-02T00:00:00Z", "--until", str(START + 3 * DAY)]
    assert list_ids(store, *window) == ["d2", "s1"]
    assert list_ids(store, "--where", '{"user": "dana"}', "--limit", "1", "--offset", "1") == ["d2"]
    text = ok("list", "--db", "m.sqlite3", "--thread", "chat-7", cwd=store)
    assert "planning the birthday dinner" in text and "Luigi" not in text


@pytest.mark.parametrize("command", ["search", "list"])
@pytest.mark.parametrize(
    ("given", "says"),
    [
        ('{"user": ', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('"dana"', "must be a JSON object"),
        ('{"a": NaN}', "not valid JSON"),
    ],
)
def test_a_malformed_where_is_a_usage_error_naming_the_option(
    store: Path, command: str, given: str, says: str
) -> None:
    words = [command, "birthday"] if command == "search" else [command]
    done = run(*words, "--db", "m.sqlite3", "--where", given, cwd=store)
    assert done.returncode == 2, done.stderr
    assert "--where" in done.stderr and says in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--where", '{"user": {"$like": "d%"}}'], "where['user']['$like']: unknown operator"),
        (["--where", '{"thread": 7}'], "where['thread']: thread holds text"),
        (["--where", '{"$not": {"user": "dana"}}'], "unknown combinator '$not'"),
        (["--where", '{"user": null}'], "$exists"),
        (["--since", "last tuesday"], ("since: ", "'last tuesday'", "ISO 8601")),
        (["--until", "soon"], ("until: ", "'soon'", "ISO 8601")),
    ],
)
def test_a_filter_the_host_refuses_names_its_place(store: Path, args: list[str], says: str) -> None:
    for words in (["search", "birthday"], ["list"]):
        done = run(*words, "--db", "m.sqlite3", *args, cwd=store)
        assert done.returncode == 1, done.stderr
        for part in (says,) if isinstance(says, str) else says:
            assert part in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_a_bad_cut_off_is_refused(store: Path) -> None:
    done = run("search", "birthday", "--db", "m.sqlite3", "--min-score", "nan", cwd=store)
    assert done.returncode == 1 and "min_score must be a finite number" in done.stderr
    done = run("search", "birthday", "--db", "m.sqlite3", "--min-score", "high", cwd=store)
    assert done.returncode == 2 and "--min-score" in done.stderr


def test_a_filter_on_deleted_memories_is_refused(store: Path) -> None:
    done = run("list", "--db", "m.sqlite3", "--include-deleted", "--thread", "chat-7", cwd=store)
    assert done.returncode == 1 and "filters live memories" in done.stderr


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("search", ["--where JSON", "--thread T", "--since DATE", "--until DATE", "--min-score X"]),
        ("list", ["--where JSON", "--thread T", "--since DATE", "--until DATE"]),
    ],
)
def test_help_shows_the_filter_options(command: str, options: list[str]) -> None:
    result = invoke_cli([command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for option in options:
        assert option in result.output
    assert "docs/filters.md" in result.output
    assert ("--min-score" in result.output) == (command == "search")
