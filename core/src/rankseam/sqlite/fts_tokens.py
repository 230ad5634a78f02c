"""FTS5's tokenizer, asked from Python: the tokens FTS5 makes of a word or a text, read from a
private in-memory FTS5 table of the same ``tokenize`` setting as the store's (so they are
FTS5's by construction). The lexical index (:mod:`rankseam.sqlite.lexical_index`) makes a
question's words and a new memory's text tokens with it."""

from __future__ import annotations

import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["MAX_WORDS", "Tokenizer"]

#: The most query words whose tokens a tokenizer remembers.
MAX_WORDS = 50_000
#: A query word of ASCII letters and digits (lower-cased, as the channel's words are).
_PLAIN = re.compile(r"[a-z0-9]+\Z")
#: Every byte but ASCII's lower-case letters and digits as a space (the ASCII words of a
#: lower-cased text, split at anything else).
_SPACES = bytes(
    c if chr(c).isascii() and (chr(c).islower() or chr(c).isdigit()) else 32 for c in range(256)
)


class Tokenizer:
    """FTS5's tokenizer of one ``tokenize`` setting, asked through a private in-memory FTS5
    table (contentless: only its index is kept): the tokens of query words (remembered) or of
    revisions' texts."""

    def __init__(self, tokenize: str) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._conn.execute(
            f"CREATE VIRTUAL TABLE t USING fts5(text, content='', tokenize='{tokenize}')"
        )
        self._conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        self._words: dict[str, tuple[str, ...]] = {}

    def words(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """The tokens of each of ``words``, in order."""
        known = self._words
        found = {w: known.get(w) for w in words}
        missing = [w for w, tokens in found.items() if tokens is None]
        if missing:
            asked = self._ask(missing)
            if len(known) + len(asked) > MAX_WORDS:
                known.clear()
            known.update(asked)
            found.update(asked)
        return [found[w] or () for w in words]

    def _ask(self, words: list[str]) -> dict[str, tuple[str, ...]]:
        # words of ASCII letters and digits are one token each (unicode61 separates tokens
        # at anything else): all of them are asked as one text, the others one text each
        plain = [w for w in words if _PLAIN.match(w)]
        alone = [w for w in words if not _PLAIN.match(w)]
        by_doc = self._in_order([" ".join(plain), *alone] if plain else ["", *alone])
        tokens = by_doc[0]
        if len(tokens) != len(plain):  # (never: unicode61 reads ASCII so) ask one by one
            plain, alone, tokens = [], words, ()
            by_doc = self._in_order(["", *alone])
        out: dict[str, tuple[str, ...]] = {w: (t,) for w, t in zip(plain, tokens, strict=True)}
        out.update(zip(alone, by_doc[1:], strict=True))
        return out

    def _in_order(self, texts: list[str]) -> list[tuple[str, ...]]:
        """The tokens of each of ``texts``, in the text's order."""
        by_doc: dict[int, list[tuple[int, str]]] = {}
        rows = [(i + 1, text) for i, text in enumerate(texts)]
        for doc, offset, term in self._tokens(rows, "doc, offset, term"):
            by_doc.setdefault(doc, []).append((offset, term))
        return [tuple(t for _o, t in sorted(by_doc.get(i + 1, []))) for i in range(len(texts))]

    def known(self, word: str) -> tuple[str, ...] | None:
        """The tokens of ``word`` when they are known without asking FTS5."""
        return self._words.get(word)

    def forget(self) -> None:
        """Forget every word remembered (asked again when next seen)."""
        with self._lock:
            self._words = {}

    def close(self) -> None:
        """Release the private FTS5 table (a closed tokenizer is not asked again)."""
        with self._lock:
            self._words = {}
            self._conn.close()

    def learn(self, texts: Iterable[str]) -> None:
        """Know the tokens of the ASCII words of ``texts`` (those a question shares with
        the memories it looks for), asked of FTS5 at once."""
        # (bytes.translate and split: a tenth of the CPU of a regular expression)
        joined = " ".join(texts).lower().encode("ascii", "replace").translate(_SPACES)
        words = {w.decode("ascii") for w in set(joined.split())}.difference(self._words)
        if words and len(self._words) + len(words) <= MAX_WORDS:
            self.words(sorted(words))

    def texts(self, rows: Sequence[tuple[int, str]]) -> Counter[tuple[str, int]]:
        """How many times each token is in each text of ``rows`` (``(rid, text)``), by
        ``(token, rid)``."""
        return Counter(self._tokens(rows, "term, doc"))

    def _tokens(self, rows: Sequence[tuple[int, str]], columns: str) -> list[Any]:
        with self._lock:
            self._conn.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", rows)
            out = self._conn.execute(f"SELECT {columns} FROM v").fetchall()
            self._conn.execute("INSERT INTO t(t) VALUES ('delete-all')")
        return out
