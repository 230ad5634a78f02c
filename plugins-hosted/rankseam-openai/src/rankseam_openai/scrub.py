"""Removing secrets from text a server sent back, before it reaches a message, a log or a trace.

A server may echo the API key (or a header value) in an error body, a header or the model's
reply, and not always verbatim. :class:`Scrubber` replaces every *run* of a secret -- any
:data:`MIN_FRAGMENT` or more consecutive characters of it (the whole secret, when it is shorter)
-- with ``***``, however it is written:

- split by whitespace, or by JSON/URL-escaped whitespace (``\\n``, ``%0A``, ``+``), anywhere;
- with characters written as JSON escapes (``\\u0073``, ``\\/``), ``\\x73``, URL escapes
  (``%73``) or HTML character references (``&#115;``, ``&#x73;``); a backslash escape may
  itself be escaped (``\\\\u0073``, as in the ``repr`` of bytes a server sent);
- cut anywhere: a fragment of the key of ``MIN_FRAGMENT`` characters or more is scrubbed on its
  own, so no cut (ours or the server's) can leave a longer piece of the key behind.

Scrub **before** normalising whitespace or cutting text to an excerpt: both can hide a secret
from a plain substring search (a key split by a line break; a key cut in two by the excerpt).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MIN_FRAGMENT", "Scrubber"]

#: The shortest run of a secret that is scrubbed on its own. Five characters of a random key
#: (about 30 bits of a 40-plus-character key) give nothing usable; public key prefixes such as
#: ``sk-proj-`` are longer than that and are scrubbed too, which is harmless.
MIN_FRAGMENT = 6
MASK = "***"

# One token of text: an encoded character, a separator, or a plain character.
_TOKEN = re.compile(
    r"""
    (?P<sep>(?:\s|\\+[nrtfb]|%(?:0[9aAdD]|20)|\+|&\#(?:9|10|13|32);|\\+u00(?:0[9aAdD]|20))+)
    |\\+u(?P<u>[0-9a-fA-F]{4})
    |\\+x(?P<x>[0-9a-fA-F]{2})
    |(?P<pct>(?:%[0-9a-fA-F]{2})+)
    |&\#(?P<dec>[0-9]{1,7});
    |&\#[xX](?P<hex>[0-9a-fA-F]{1,6});
    |\\+(?P<esc>[^nrtfbux])
    """,
    re.VERBOSE,
)


def _decode_pct(run: str) -> list[tuple[str, int]]:
    """Characters of a run of ``%XX`` escapes (UTF-8), each with its length in the run."""
    data = bytes.fromhex(run.replace("%", ""))
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(data):
        for size in (1, 2, 3, 4):
            try:
                char = data[i : i + size].decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append((char, 3 * size))
            i += size
            break
        else:  # not UTF-8: keep the byte as a Latin-1 character
            out.append((chr(data[i]), 3))
            i += 1
    return out


# The fast path's two passes (both in C but for the rare escape): separators out, escapes decoded.
_SEPARATORS = re.compile(
    r"(?:\s|\\+[nrtfb]|%(?:0[9aAdD]|20)|\+|&\#(?:9|10|13|32);|\\+u00(?:0[9aAdD]|20))+"
)
_ESCAPES = re.compile(
    r"""
    \\+u(?P<u>[0-9a-fA-F]{4})
    |\\+x(?P<x>[0-9a-fA-F]{2})
    |(?P<pct>(?:%[0-9a-fA-F]{2})+)
    |&\#(?P<dec>[0-9]{1,7});
    |&\#[xX](?P<hex>[0-9a-fA-F]{1,6});
    |\\+(?P<esc>[^nrtfbux])
    """,
    re.VERBOSE,
)


def _quick_plain(text: str) -> str:
    """``text`` decoded and without separators, without the position map (the fast path)."""
    text = _SEPARATORS.sub("", text)
    if "%" in text or "\\" in text or "&" in text:
        text = _ESCAPES.sub(_decode_token, text)
    return text


def _decode_token(match: re.Match[str]) -> str:
    if match.groupdict().get("sep") is not None:
        return ""
    if match.group("pct") is not None:
        return "".join(c for c, _size in _decode_pct(match.group("pct")) if not c.isspace())
    number = match.group("u") or match.group("x") or match.group("hex")
    if number is not None:
        return chr(int(number, 16))
    if match.group("dec") is not None:
        value = int(match.group("dec"))
        return chr(value) if value < 0x110000 else "\ufffd"
    return match.group("esc")


def _normalise(text: str) -> tuple[str, list[int], list[int]]:
    """``text`` decoded and without separators, and for each character of the result where it
    starts and ends in ``text``."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for match in _TOKEN.finditer(text):
        chars.append(text[pos : match.start()])  # plain characters before the token
        starts.extend(range(pos, match.start()))
        ends.extend(range(pos + 1, match.start() + 1))
        pos = match.end()
        if match.group("sep") is not None:
            continue
        start = match.start()
        if match.group("pct") is not None:
            for char, size in _decode_pct(match.group("pct")):
                if char.isspace():  # an encoded line break inside a run: a separator
                    start += size
                    continue
                chars.append(char)
                starts.append(start)
                ends.append(start + size)
                start += size
            continue
        number = match.group("u") or match.group("x") or match.group("hex")
        if number is not None:
            char = chr(int(number, 16))
        elif match.group("dec") is not None:
            value = int(match.group("dec"))
            char = chr(value) if value < 0x110000 else "\ufffd"
        else:
            char = match.group("esc")
        chars.append(char)
        starts.append(start)
        ends.append(match.end())
    chars.append(text[pos:])
    starts.extend(range(pos, len(text)))
    ends.extend(range(pos + 1, len(text) + 1))
    return "".join(chars), starts, ends


class Scrubber:
    """Replaces every run of the given secrets in a text with ``***`` (see the module doc)."""

    def __init__(self, secrets: Iterable[str], *, min_fragment: int = MIN_FRAGMENT) -> None:
        self._secrets = tuple(s for s in secrets if s)
        self._min = min_fragment
        windows: set[str] = set()
        for secret in self._secrets:
            size = min(self._min, len(secret))
            windows.update(secret[i : i + size] for i in range(len(secret) - size + 1))
        # Longest first, so that a whole short secret wins over a window of a longer one.
        self._window_list = sorted(windows, key=lambda w: (-len(w), w))
        self._windows = (
            re.compile("|".join(re.escape(w) for w in self._window_list))
            if self._window_list
            else None
        )

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secrets this scrubber masks (never shown: for building another scrubber)."""
        return self._secrets

    def _runs(self, plain: str) -> list[tuple[int, int]]:
        """Spans of ``plain`` covered by a window of some secret (windows overlap freely)."""
        assert self._windows is not None
        spans: list[tuple[int, int]] = []
        pos = 0
        while True:
            match = self._windows.search(plain, pos)
            if match is None:
                return spans
            spans.append(match.span())
            pos = match.start() + 1

    def __call__(self, text: str) -> str:
        if self._windows is None or not text:
            return text
        # Fast path (almost always): no secret in the decoded text, nothing to map back.
        quick = _quick_plain(text)
        if not any(window in quick for window in self._window_list):
            return text
        plain, starts, ends = _normalise(text)
        spans = self._runs(plain)
        if not spans:
            return text
        # Map each run back to the original text and merge what overlaps or touches.
        cuts: list[list[int]] = []
        for a, b in sorted(spans):
            start, end = starts[a], ends[b - 1]
            if cuts and start <= cuts[-1][1]:
                cuts[-1][1] = max(cuts[-1][1], end)
            else:
                cuts.append([start, end])
        out: list[str] = []
        pos = 0
        for start, end in cuts:
            out.append(text[pos:start])
            out.append(MASK)
            pos = end
        out.append(text[pos:])
        return "".join(out)
