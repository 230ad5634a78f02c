"""The `rankseam` command as a user runs it (a real subprocess of the installed console
script): get / list / update / delete, exit statuses, JSON errors, configuration discovery,
`plugins --options`, and progress output only on a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

RANKSEAM = str(Path(sys.executable).with_name("rankseam"))


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")}
    base["XDG_CONFIG_HOME"] = str(cwd / "no-user-config")  # never the real user's config
    return subprocess.run(
        [RANKSEAM, *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


@pytest.fixture
def store(tmp_path: Path) -> Path:
    lines = [
        json.dumps({"id": f"n{i:02d}", "text": f"note number {i} about dinner"}) for i in range(7)
    ]
    (tmp_path / "notes.jsonl").write_text("\n".join(lines) + "\n")
    done = run("ingest", "notes.jsonl", "--db", "m.sqlite3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return tmp_path


# -- get / list / update / delete -----------------------------------------------------------


def test_get_shows_a_memory_and_an_exact_revision(store: Path) -> None:
    done = run("get", "n03", "--db", "m.sqlite3", cwd=store)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "default/n03 revision 1  importance=0.5",
        "note number 3 about dinner",
    ]
    assert run("update", "n03", "changed text", "--db", "m.sqlite3", cwd=store).returncode == 0
    old = json.loads(
        run("get", "n03", "--revision", "1", "--json", "--db", "m.sqlite3", cwd=store).stdout
    )
    new = json.loads(run("get", "n03", "--json", "--db", "m.sqlite3", cwd=store).stdout)
    assert (old["revision"], old["text"]) == (1, "note number 3 about dinner")
    assert (new["revision"], new["text"]) == (2, "changed text")


def test_list_pages_through_a_namespace(store: Path) -> None:
    pages, offset = [], 0
    while offset is not None:
        done = run(
            "list",
            "--limit",
            "3",
            "--offset",
            str(offset),
            "--json",
            "--db",
            "m.sqlite3",
            cwd=store,
        )
        assert done.returncode == 0, done.stderr
        page = json.loads(done.stdout)
        pages.append([m["memory_id"] for m in page["memories"]])
        offset = page["next_offset"]
    assert pages == [["n00", "n01", "n02"], ["n03", "n04", "n05"], ["n06"]]
    text = run("list", "--limit", "3", "--db", "m.sqlite3", cwd=store).stdout.splitlines()
    assert text[0].startswith("n00  r1  note number 0")
    assert text[-1] == "more: rankseam list --offset 3 --limit 3"


def test_update_and_delete(store: Path) -> None:
    done = run(
        "update",
        "n01",
        "dinner moved to Saturday",
        "--importance",
        "0.9",
        "--db",
        "m.sqlite3",
        cwd=store,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "updated default/n01: revision 2")
    done = run("delete", "n01", "--json", "--db", "m.sqlite3", cwd=store)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "deleted": {"namespace": "default", "memory_id": "n01", "revision": 2}
    }
    listed = json.loads(run("list", "--json", "--db", "m.sqlite3", cwd=store).stdout)
    assert "n01" not in [m["memory_id"] for m in listed["memories"]]
    found = json.loads(
        run("search", "saturday dinner", "--json", "--db", "m.sqlite3", cwd=store).stdout
    )
    assert "n01" not in [h["memory_id"] for h in found["hits"]]
    # the deleted revision stays readable by its ref
    kept = json.loads(
        run("get", "n01", "--revision", "2", "--json", "--db", "m.sqlite3", cwd=store).stdout
    )
    assert kept["text"] == "dinner moved to Saturday"


def test_adding_the_same_id_twice_is_unchanged_and_a_different_text_is_refused(
    tmp_path: Path,
) -> None:
    args = ("add", "hello there", "--id", "h", "--db", "m.sqlite3")
    assert run(*args, cwd=tmp_path).stdout.strip() == "stored default/h revision 1"
    assert (
        run(*args, cwd=tmp_path).stdout.strip() == "unchanged default/h revision 1 (already stored)"
    )
    done = run("add", "other text", "--id", "h", "--db", "m.sqlite3", cwd=tmp_path)
    assert done.returncode == 1 and "use update()" in done.stderr


# -- exit statuses and JSON errors ----------------------------------------------------------


RUNTIME = [
    ("search", "x", "--db", "missing.sqlite3"),
    ("get", "nope", "--db", "m.sqlite3"),
    ("delete", "nope", "--db", "m.sqlite3"),
    ("update", "nope", "text", "--db", "m.sqlite3"),
    ("search", "x", "--db", "m.sqlite3", "--rerank", "no-such-reranker"),
]
USAGE = [
    ("get",),
    ("list", "--limit", "0", "--db", "m.sqlite3"),
    ("search", "x", "--limit", "many"),
    ("no-such-command",),
    ("update", "n01", "t", "--metadata", "[1]", "--db", "m.sqlite3"),
]


@pytest.mark.parametrize("args", RUNTIME, ids=lambda a: " ".join(a[:2]))
def test_runtime_errors_exit_1_with_one_line(store: Path, args: tuple[str, ...]) -> None:
    done = run(*args, cwd=store)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("args", USAGE, ids=lambda a: " ".join(a[:2]))
def test_usage_errors_exit_2(store: Path, args: tuple[str, ...]) -> None:
    done = run(*args, cwd=store)
    assert done.returncode == 2, done.stderr
    assert "Error: " in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("args", "status"), [(a, 1) for a in RUNTIME] + [(a, 2) for a in USAGE])
def test_with_json_an_error_is_a_json_object_on_stderr(
    store: Path, args: tuple[str, ...], status: int
) -> None:
    done = run(*args, "--json", cwd=store)
    assert done.returncode == status
    assert done.stdout == ""
    error = json.loads(done.stderr)["error"]
    assert error["exit_status"] == status
    assert error["message"] and "Traceback" not in error["message"]
    if status == 1:
        assert error["type"] in {"ConfigurationError", "MemoryNotFoundError", "ValidationError"}
    else:
        assert error["type"] in {"UsageError", "BadParameter", "NoSuchOption"}


# -- configuration discovery ----------------------------------------------------------------


def config(path: Path, pool: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[search]\npool = {pool}\n")
    return path


def pool_of(store: Path, *extra: str, env: dict[str, str] | None = None) -> int:
    done = run(
        "search", "dinner", "--json", "--trace", "--db", "m.sqlite3", *extra, cwd=store, env=env
    )
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout)["trace"]["pool_size"])


def test_configuration_discovery_order(store: Path) -> None:
    assert pool_of(store) == 30  # no file anywhere: the built-in default
    user = config(store / "no-user-config" / "rankseam" / "rankseam.toml", 11)
    assert pool_of(store) == 11  # the user's config folder
    config(store / "rankseam.toml", 12)
    assert pool_of(store) == 12  # ./rankseam.toml beats the user's
    env_file = config(store / "elsewhere" / "env.toml", 13)
    assert (
        pool_of(store, env={"RANKSEAM_CONFIG": str(env_file)}) == 13
    )  # RANKSEAM_CONFIG beats both
    given = config(store / "given.toml", 14)
    assert pool_of(store, "--config", str(given), env={"RANKSEAM_CONFIG": str(env_file)}) == 14
    assert pool_of(store, env={"RANKSEAM_CONFIG": ""}) == 30  # empty: no file at all
    assert user.exists()


def test_a_missing_rankseam_config_file_is_a_clear_error(store: Path) -> None:
    done = run("search", "x", "--db", "m.sqlite3", cwd=store, env={"RANKSEAM_CONFIG": "nope.toml"})
    assert done.returncode == 1
    assert "RANKSEAM_CONFIG names 'nope.toml'" in done.stderr


# -- plugins --options ----------------------------------------------------------------------


def test_plugins_options_lists_every_component_with_its_options(tmp_path: Path) -> None:
    done = run("plugins", "--options", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = {(c["kind"], c["name"]): c for c in json.loads(done.stdout)}
    assert listed[("reranker", "identity")]["options"] == []
    assert listed[("embedder", "hashed")]["options"] == [
        "dimensions",
        "char_ngrams",
        "word_ngrams",
        "char_weight",
        "stop_words",
    ]
    assert listed[("candidate_source", "lexical")]["options"] == [
        "stopwords",
        "max_df",
        "max_postings",
        "max_scoring_postings",
        "budget_from",
    ]
    assert listed[("decision_backend", "heuristic")]["plugin"].endswith("heuristic_decision")
    assert "plugins --options" in run("search", "--help", cwd=tmp_path).stdout


# -- progress only on a terminal ------------------------------------------------------------


def test_ingest_prints_no_progress_when_stderr_is_not_a_terminal(store: Path) -> None:
    done = run("ingest", "notes.jsonl", "--db", "other.sqlite3", cwd=store)
    assert done.returncode == 0 and done.stderr == ""
    forced = run("ingest", "notes.jsonl", "--db", "third.sqlite3", "--progress", cwd=store)
    assert forced.returncode == 0 and "ingest" in forced.stderr


def test_ingest_shows_progress_on_a_terminal(store: Path) -> None:
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [RANKSEAM, "ingest", "notes.jsonl", "--db", "tty.sqlite3"],
            cwd=store,
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
            timeout=120,
            env={k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")},
        )
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
    assert proc.returncode == 0
    assert b"ingest" in seen and b"7/7" in seen
