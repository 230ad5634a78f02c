"""Closing a Memory while its ANN index is being built in the background cancels that work
quietly (docs/store.md): no error or warning is logged, close does not wait for the build, and
the store opens again consistent and searchable."""

from __future__ import annotations

import logging
import sqlite3
import threading

import pytest

import rankseam
from rankseam.bench import synthetic

#: Enough vectors that a background build takes many slices (seconds), so a close lands in it.
SIZE = 40_000


def _ann_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rankseam-ann"]


def test_close_during_background_ann_maintenance_is_quiet(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("RANKSEAM_ANN", "1000")
    for var in ("RANKSEAM_DB", "RANKSEAM_RERANK", "RANKSEAM_NAMESPACE", "RANKSEAM_EMBEDDER"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "close.sqlite3"
    memory = rankseam.open_memory(path)
    memory.ingest(synthetic.texts(SIZE), batch_size=5000)
    folder = memory.store.ann.folder
    assert not _ann_threads()
    with caplog.at_level(logging.DEBUG, logger="rankseam"):
        # the first search of a namespace this big and without an index schedules its build
        memory.search("kalo mine", 5)
        assert _ann_threads(), "the search scheduled no background ANN maintenance"
        memory.close()
        assert not _ann_threads(), "close returned before the maintenance thread ended"
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not loud, [f"{r.levelname}: {r.getMessage()}" for r in loud]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    cancelled = [r for r in caplog.records if getattr(r, "event", "") == "ann.maintain_cancelled"]
    assert [r.levelno for r in cancelled] == [logging.DEBUG]
    # close stopped the build instead of waiting for it: no index was published, and the
    # cancelled build left no file behind
    assert not folder.exists() or not list(folder.iterdir())

    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    with rankseam.open_memory(path) as again:
        assert again.stats()["memories"] == SIZE
        exact = again.search("kalo mine", 5)
        manifest = again.maintain_index()
        assert manifest is not None and manifest.count == SIZE
        indexed = again.search("kalo mine", 5)
        assert [h.ref for h in indexed] == [h.ref for h in exact]


@pytest.fixture(autouse=True)
def _no_stray_threads():
    yield
    for thread in _ann_threads():
        thread.join(timeout=60)
