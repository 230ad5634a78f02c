"""User errors end the `rankseam` command with one clear line and a non-zero exit status,
never a traceback (click's runner in-process, and the real console script in a subprocess for
one case of each kind): lone surrogates in ids and
namespaces, invalid UTF-8 or deep JSON in an ingest file (with the records committed before
it), a configuration file that is not UTF-8, an unwritable export path, deep or large
metadata, and a full disk (SQLITE_FULL, provoked for real with PRAGMA max_page_count)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from rankseam.cli import cli

RANKSEAM = str(Path(sys.executable).with_name("rankseam"))


@attrs.frozen
class Done:
    returncode: int
    stdout: str
    stderr: str


def _env(cwd: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")}
    env["XDG_CONFIG_HOME"] = str(cwd / "no-user-config")  # never the real user's config
    return env


def run(*args: str, cwd: Path) -> Done:
    """The ``rankseam`` group run in-process (click's runner, standalone like the console
    script). A str argument holding a lone surrogate (``\\udcff``) is what Python makes of an
    undecodable byte in a real command line. An exception that escapes is returned as a
    traceback on stderr, so every check below sees it."""
    env = {k: None for k in os.environ if k.startswith("RANKSEAM_")}
    env["XDG_CONFIG_HOME"] = str(cwd / "no-user-config")
    old = os.getcwd()
    os.chdir(cwd)
    try:
        out = CliRunner().invoke(cli, list(args), env=env, prog_name="rankseam")
    finally:
        os.chdir(old)
    stderr = out.stderr
    if not isinstance(out.exception, SystemExit | None):
        stderr += "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(out.exception)
        )
    return Done(out.exit_code, out.stdout, stderr)


def run_script(*args: str, cwd: Path, code: str | None = None) -> Done:
    """The real console script (or ``code`` that ends in ``main()``) in a subprocess."""
    command = [RANKSEAM] if code is None else [sys.executable, "-c", code]
    done = subprocess.run(
        [*command, *args], cwd=cwd, env=_env(cwd), capture_output=True, text=True, timeout=300
    )
    return Done(done.returncode, done.stdout, done.stderr)


def _refused(done: Done, *words: str, status: int = 1) -> None:
    assert done.returncode == status, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") <= 4, done.stderr  # one line (plus click's usage lines)
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def _stats(db: str, cwd: Path) -> dict[str, object]:
    done = run("stats", "--db", db, cwd=cwd)
    assert done.returncode == 0, done.stderr
    stats: dict[str, object] = json.loads(done.stdout)
    return stats


@pytest.mark.parametrize(
    "args",
    [
        ["add", "hello", "--id", "m\udcff"],
        ["add", "hello", "--namespace", "ns\udcff"],
        ["get", "m\udcff"],
        ["delete", "x", "--namespace", "\udcff"],
        ["list", "--namespace", "\udcff"],
        ["search", "hello", "--namespace", "ns\udcff"],
    ],
)
def test_an_undecodable_id_or_namespace_is_refused(tmp_path: Path, args: list[str]) -> None:
    assert run("add", "a first memory", "--db", "m.sqlite3", cwd=tmp_path).returncode == 0
    real = args[:3] == ["add", "hello", "--id"]  # once through a real, undecodable argv
    done = (run_script if real else run)(*args, "--db", "m.sqlite3", cwd=tmp_path)
    _refused(done, "not valid Unicode", "lone surrogate")


def _records(n: int) -> str:
    return "".join(json.dumps({"id": f"r{i}", "text": f"record {i}"}) + "\n" for i in range(n))


@pytest.mark.parametrize(
    ("bad_line", "words"),
    [
        (b'{"text": "caf\xe9 au lait"}\n', "not valid UTF-8"),
        (b'{"text": "x", "metadata": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n", "nested more"),
        (b'{"text": "x", "metadata": {"a": ' + b"[" * 40 + b"]" * 40 + b"}}\n", "32 levels"),
        (b'{"text": "x", "id": "\\ud800"}\n', "lone surrogate"),
        (b'{"text": "x", "namespace": "a\\udfff"}\n', "lone surrogate"),
        (b'{"text": "x", "importance": NaN}\n', "NaN is not a JSON number"),
        (b'{"text": "x", "created_at": 1' + b"0" * 400 + b"}\n", "must be finite"),
        (b'{"text": "x", "metadata": {"blob": "' + b"a" * 70_000 + b'"}}\n', "larger than"),
    ],
)
def test_a_bad_ingest_line_reports_what_was_committed(
    tmp_path: Path, bad_line: bytes, words: str
) -> None:
    data = tmp_path / "in.jsonl"
    data.write_bytes(_records(500).encode() + bad_line + _records(3).encode())
    args = ("ingest", "in.jsonl", "--db", "m.sqlite3", "--batch-size", "500")
    done = run_script(*args, cwd=tmp_path) if "UTF-8" in words else run(*args, cwd=tmp_path)
    _refused(done, "500 records committed, line 501: ", words, "resume after line 500")
    assert _stats("m.sqlite3", tmp_path)["memories"] == 500  # the committed batch is kept


def test_an_overlong_ingest_line_is_refused_unread(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    with data.open("wb") as out:
        out.write(_records(2).encode())
        out.write(b'{"text": "' + b"a" * (16 * 1024 * 1024) + b'"}\n')
    done = run("ingest", "in.jsonl", "--db", "m.sqlite3", cwd=tmp_path)
    _refused(done, "0 records committed, line 3: longer than 16777216 bytes")


def test_a_config_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    (tmp_path / "rankseam.toml").write_bytes(b'namespace = "caf\xe9"\n')
    done = run("search", "hello", "--db", "m.sqlite3", "--config", "rankseam.toml", cwd=tmp_path)
    _refused(done, "rankseam.toml", "is not UTF-8 text", "save it as UTF-8")
    done = run("search", "hello", "--db", "m.sqlite3", "--json", cwd=tmp_path)  # discovered
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "not UTF-8" in json.loads(done.stderr)["error"]["message"]


def test_an_unwritable_export_path_is_refused(tmp_path: Path) -> None:
    assert run("add", "a memory", "--db", "m.sqlite3", cwd=tmp_path).returncode == 0
    (tmp_path / "a-file").write_text("not a folder")
    done = run("export", "a-file/snap", "--db", "m.sqlite3", cwd=tmp_path)
    _refused(done, "cannot write the snapshot", "a-file/snap")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize(
    ("metadata", "words"),
    [
        ('{"a": ' + "[" * 20_000 + "]" * 20_000 + "}", "nested more than 64"),
        ('{"a": ' + "[" * 40 + "]" * 40 + "}", "more than 32 levels"),
        (json.dumps({"blob": "a" * 70_000}), "larger than 65536 bytes"),
        ('{"a": "\\udc80"}', "lone surrogate"),
    ],
)
def test_deep_or_large_metadata_is_refused(tmp_path: Path, metadata: str, words: str) -> None:
    done = run("add", "hello", "--db", "m.sqlite3", "--metadata", metadata, cwd=tmp_path)
    assert done.returncode in (1, 2)  # 2: the option's value is not JSON rankseam reads
    _refused(done, words, status=done.returncode)
    assert run("add", "seed", "--id", "s", "--db", "m.sqlite3", cwd=tmp_path).returncode == 0
    done = run("update", "s", "new text", "--db", "m.sqlite3", "--metadata", metadata, cwd=tmp_path)
    _refused(done, words, status=done.returncode)


# Every connection of the child gets a small page budget: SQLite reports SQLITE_FULL once the
# database would grow past it, exactly as on a full disk.
_FULL_DISK = textwrap.dedent(
    """
    import sqlite3, sys
    _connect = sqlite3.connect

    def connect(*args, **kwargs):
        conn = _connect(*args, **kwargs)
        conn.execute("PRAGMA max_page_count = 60")
        return conn

    sqlite3.connect = connect
    from rankseam.cli import main
    main(sys.argv[1:])
    """
)


def test_a_full_disk_says_so(tmp_path: Path) -> None:
    assert run("add", "a first memory", "--db", "m.sqlite3", cwd=tmp_path).returncode == 0
    lines = [json.dumps({"text": f"memory {i} " + "words " * 60}) for i in range(3000)]
    (tmp_path / "big.jsonl").write_text("\n".join(lines) + "\n")
    done = run_script("ingest", "big.jsonl", "--db", "m.sqlite3", cwd=tmp_path, code=_FULL_DISK)
    _refused(done, "records committed, then:", "the disk is full", "SQLITE_FULL")
    assert "cannot rollback" not in done.stderr
    # the store holds exactly what was committed, and works
    stats = _stats("m.sqlite3", tmp_path)
    committed = int(done.stderr.split("Error: ")[1].split(" records")[0])
    assert stats["memories"] == 1 + committed
    assert run("search", "first memory", "--db", "m.sqlite3", cwd=tmp_path).returncode == 0
