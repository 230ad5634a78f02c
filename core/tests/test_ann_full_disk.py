"""An ANN index that cannot be saved (docs/store.md, "The ANN index of the vector channel",
issue #39 case 2): on a real 6 MiB file system whose free space is too small for the index,
a failed save leaves no temporary file, maintenance backs off (exponential, bounded) instead
of rebuilding at every search, the cause is said in the user's words (the disk is full,
naming the folder) in a log record, in ``maintain_index()``'s error and in ``rankseam
ingest``, and the memory writes themselves carry on.

The back-off is measured with the index's own clock, replaced here by one the test moves:
no verdict depends on how fast this machine is.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rankseam
from rankseam.bench import synthetic
from rankseam.errors import StoreError
from rankseam.sqlite import ann_background
from rankseam.sqlite.ann_files import save_error

SIZE = 1_500
THRESHOLD = 500
#: Free bytes left on the disk: room for a few small adds, not for the index.
LEFT_FREE = 384 * 1024


@pytest.fixture
def small_disk(tmp_path):
    """A 6 MiB tmpfs mounted for the test (skipped where mounting is not permitted)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a 6 MiB tmpfs needs root and mount(8); run the suite as root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"mounting a 6 MiB tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("RANKSEAM_ANN", str(THRESHOLD))
    for var in ("RANKSEAM_DB", "RANKSEAM_RERANK", "RANKSEAM_NAMESPACE", "RANKSEAM_EMBEDDER"):
        monkeypatch.delenv(var, raising=False)


def _fill(disk: Path, leave: int) -> Path:
    """A ballast file that leaves ``leave`` bytes of ``disk`` free."""
    ballast = disk / "ballast"
    free = shutil.disk_usage(disk).free
    assert free > leave, f"the store alone left only {free} bytes free"
    with open(ballast, "wb") as fh:
        fh.write(b"\0" * (free - leave))
    return ballast


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _failures(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", "") == "ann.save_failed"]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_a_full_disk_backs_off_leaves_no_file_says_disk_and_writes_go_on(small_disk, env, caplog):
    memory = rankseam.open_memory(small_disk / "store.sqlite3")
    try:
        memory.ingest(synthetic.texts(SIZE))
        ann = memory.store.ann
        clock = ann.background.clock = _Clock()
        ballast = _fill(small_disk, LEFT_FREE)
        before = shutil.disk_usage(small_disk).free

        def search() -> None:
            memory.search("kalo mine", 5)
            ann.wait()

        with caplog.at_level(logging.WARNING, logger="rankseam"):
            search()  # the first search of a namespace this big schedules the index's build
            failed = _failures(caplog)
            assert len(failed) == 1, "the failed save was not reported"
            message = failed[0].getMessage()
            assert "the disk is full" in message and str(ann.folder) in message, message
            assert failed[0].reason == "full"
            assert "Traceback" not in caplog.text and not failed[0].exc_info
            # nothing left behind: the disk has the room it had before the attempt
            assert not [n for n in _leftovers(ann.folder) if n.endswith(".tmp")]
            assert not _leftovers(ann.folder), _leftovers(ann.folder)
            assert shutil.disk_usage(small_disk).free >= before

            # searches go on, exact, and start no other maintenance before the back-off ends
            for _ in range(10):
                search()
            clock.now += ann_background.RETRY_FIRST_S - 1
            search()
            assert len(_failures(caplog)) == 1, "a search rebuilt the index during the back-off"

            # each retry waits twice as long as the one before, up to RETRY_MAX_S
            waits = [failed[0].retry_in_s]
            for _ in range(9):
                clock.now += waits[-1]
                search()
                search()  # at once: still in the new back-off
                assert len(_failures(caplog)) == len(waits) + 1
                waits.append(_failures(caplog)[-1].retry_in_s)
            expected = [
                min(ann_background.RETRY_FIRST_S * 2**i, ann_background.RETRY_MAX_S)
                for i in range(10)
            ]
            assert waits == expected
            assert waits[-1] == ann_background.RETRY_MAX_S
            assert not _leftovers(ann.folder)

            # the memory writes themselves are unaffected
            added = memory.add("a small memory on a nearly full disk", memory_id="small")
            assert added.stored
            assert memory.get("small").text == "a small memory on a nearly full disk"

            # asked for at once, the index's build raises the same cause, typed
            with pytest.raises(StoreError, match="the disk is full") as raised:
                memory.maintain_index()
            assert raised.value.reason == "full" and str(ann.folder) in str(raised.value)
            assert not _leftovers(ann.folder)

        # with room again, the next try after the back-off builds and publishes the index
        ballast.unlink()
        clock.now += ann_background.RETRY_MAX_S
        search()
        assert ann.retry_in("default", memory.embedder.descriptor.key) == 0.0
        manifests = [n for n in _leftovers(ann.folder) if n.endswith(".json")]
        assert len(manifests) == 1
        manifest = json.loads((ann.folder / manifests[0]).read_text())
        assert manifest["count"] == SIZE + 1
        assert not [n for n in _leftovers(ann.folder) if n.endswith(".tmp")]
    finally:
        memory.close()


def test_ingest_on_a_full_disk_says_so_without_a_traceback(small_disk, env, tmp_path):
    db = small_disk / "store.sqlite3"
    with rankseam.open_memory(db) as memory:
        memory.ingest(synthetic.texts(SIZE))
    _fill(small_disk, LEFT_FREE)
    records = tmp_path / "more.jsonl"
    records.write_text(
        "".join(
            json.dumps({"id": f"new{i}", "text": f"one more memory {i}"}) + "\n" for i in range(3)
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from rankseam.cli import main; main()",
            "ingest",
            str(records),
            "--db",
            str(db),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "RANKSEAM_ANN": str(THRESHOLD), "RANKSEAM_LOAD_PLUGINS": ""},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "3 records: 3 added" in done.stdout
    assert "the disk is full" in done.stderr and f"{db}.ann" in done.stderr, done.stderr
    assert not _leftovers(Path(f"{db}.ann"))
    with rankseam.open_memory(db) as memory:
        assert memory.get("new2").text == "one more memory 2"


@pytest.mark.parametrize(
    ("code", "reason", "words"),
    [
        (errno.ENOSPC, "full", "the disk is full"),
        (errno.EACCES, "readonly", "permission denied"),
        (errno.EROFS, "readonly", "the file system is read-only"),
        (errno.EIO, "io", "Input/output error"),
    ],
)
def test_a_failed_save_is_said_in_the_users_words(tmp_path, code, reason, words):
    error = save_error(OSError(code, os.strerror(code)), tmp_path / "x.ann", "notes", 10)
    assert error.reason == reason
    assert words in str(error) and "x.ann" in str(error) and "'notes'" in str(error)


_LIMITED_CHILD = """
import resource, signal, sys
from rankseam.errors import StoreError
import rankseam

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
with rankseam.open_memory(sys.argv[1]) as memory:
    try:
        memory.maintain_index()
    except StoreError as exc:
        print(exc.reason, exc, sep="|")
"""


def test_a_save_that_usearch_itself_fails_leaves_no_file_and_says_why(env, tmp_path):
    """The disk has room, but this process may not write a file that large (``ulimit -f``):
    usearch's own save fails half-way ("Failed to serialize into stream"), and its partial
    file is removed."""
    db = tmp_path / "store.sqlite3"
    with rankseam.open_memory(db) as memory:
        memory.ingest(synthetic.texts(SIZE))
    limit = 256 * 1024  # the store is bigger, but a search's maintenance only reads it
    done = subprocess.run(
        [sys.executable, "-c", _LIMITED_CHILD, str(db), str(limit)],
        capture_output=True,
        text=True,
        env={**os.environ, "RANKSEAM_ANN": str(THRESHOLD), "RANKSEAM_LOAD_PLUGINS": ""},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    reason, _, message = done.stdout.strip().partition("|")
    assert reason == "io", done.stdout
    assert "larger than this process may write" in message and "ulimit -f" in message
    assert f"{db}.ann" in message
    assert not _leftovers(Path(f"{db}.ann")), "the partial index file was left behind"
