"""The lexical index of a store, kept by the store (``SQLiteStore.lexical``): when it is
built, advanced or left to FTS5, decided by what each step costs (docs/performance.md, "The
lexical index of a small store"). The index itself is :mod:`rankseam.sqlite.lexical_index`."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from rankseam.sqlite import lexical_index
from rankseam.sqlite.fts_tokens import Tokenizer
from rankseam.sqlite.lexical_index import LexicalSnapshot, advance, build

if TYPE_CHECKING:
    import sqlite3

__all__ = ["BUILD_S_PER_ROW", "LEARN_TEXTS", "LexicalIndexes"]

log = logging.getLogger(__name__)

#: A build's expected CPU per revision (seconds; 9.8 µs measured at 10k LoCoMo-derived
#: revisions): FTS5 answers until its answers have cost this much per live revision.
BUILD_S_PER_ROW = 1e-5
#: The newest memories whose words' tokens are asked of FTS5 with a build (at most 10 ms).
LEARN_TEXTS = 2_000


def _mean(old: float | None, new: float) -> float:
    """A running mean of recent costs (the latest weighs a quarter)."""
    return new if old is None else 0.75 * old + 0.25 * new


class LexicalIndexes:
    """The lexical snapshot of one store, kept per process: the latest one built or advanced,
    shared by the readers of its write version (thread-safe: a snapshot never changes).

    What it costs decides when it is made, from the CPU time each step took in this process:
    a first snapshot is built once FTS5's answers have cost what a build is expected to
    (:data:`BUILD_S_PER_ROW` a revision); after a write, the first lexical query is answered
    by FTS5 unless advancing the snapshot and answering from it cost less, and the next one
    of the same write version advances it (an agent that adds a memory and searches once
    pays no more than FTS5; one that searches twice gets the index)."""

    def __init__(self, tokenize: str) -> None:
        self.tokenizer = Tokenizer(tokenize)
        self._lock = threading.Lock()
        self._current: LexicalSnapshot | None = None
        self._spent = 0.0  # CPU of FTS5's answers since the last snapshot was made
        self._asked = -1  # the write version of FTS5's last answer
        self._never = False  # the store's index cannot be held (too many postings)
        self._fts5: float | None = None  # recent CPU of an FTS5 answer (seconds)
        self._indexed: float | None = None  # ... of an answer from a snapshot
        self._advance: float | None = None  # ... of advancing a snapshot

    def snapshot(
        self, conn: sqlite3.Connection, version: int, rows: int, *, query: bool = True
    ) -> LexicalSnapshot | None:
        """The snapshot at ``version`` (``rows`` live revisions), advanced or built now for
        a lexical ``query`` when that is worth it (never for a document frequency); ``None``:
        ask FTS5."""
        current = self._current
        if current is not None and current.version == version:
            return current
        if rows > lexical_index.MAX_ROWS:
            self._current = None  # the store outgrew the index
            return None
        if not query or self._never:
            return None
        if current is not None and current.version > version:
            return None  # a reader of an older snapshot than the one held
        with self._lock:
            current = self._current
            if current is not None and current.version == version:
                return current
            if current is not None:
                cheaper = (self._advance or 0.0) + (self._indexed or 0.0) < (self._fts5 or 0.0)
                if self._asked != version and not cheaper:
                    self._asked = version  # FTS5 answers; the next query advances
                    return None
                start = time.thread_time()
                fresh = advance(current, conn, version, self.tokenizer)
                if fresh is not None:
                    self._advance = _mean(self._advance, time.thread_time() - start)
                    self._current, self._spent = fresh, 0.0
                    return fresh
                self._current = None
            if self._spent < BUILD_S_PER_ROW * rows:
                return None
            start = time.thread_time()
            fresh = build(conn, version)
            if fresh is None:
                self._never = True
                return None
            # the words of the newest memories: most of a question's words are then known
            self.tokenizer.learn(
                t
                for (t,) in conn.execute(
                    "SELECT text FROM revisions WHERE live = 1 ORDER BY rid DESC LIMIT ?",
                    (LEARN_TEXTS,),
                )
            )
            log.debug(
                "lexical index of %d revisions built in %.1f ms of CPU",
                rows,
                1e3 * (time.thread_time() - start),
            )
            self._current, self._spent = fresh, 0.0
            return fresh

    def held(self) -> LexicalSnapshot | None:
        """The snapshot held now (``None``: none is built)."""
        return self._current

    def answered(self, seconds: float, *, by_fts5: bool) -> None:
        """Count the CPU a lexical answer took, by FTS5 or from a snapshot."""
        if by_fts5:
            self._spent += seconds
            self._fts5 = _mean(self._fts5, seconds)
        else:
            self._indexed = _mean(self._indexed, seconds)

    def clear(self) -> None:
        """Drop what is held (the snapshot and the tokenizer's remembered words): after a
        forget, nothing of an erased memory stays in this process; after a close, nothing
        is held at all. The next queries start again from FTS5."""
        with self._lock:
            self._current, self._spent, self._asked = None, 0.0, -1
            self.tokenizer.forget()

    def refuse(self) -> None:
        """Hold no snapshot of this store from now on: FTS5 answers every query (what a
        comparison of both paths needs)."""
        with self._lock:
            self._current, self._never = None, True
