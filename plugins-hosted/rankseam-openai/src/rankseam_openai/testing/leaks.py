"""Secret-leak tests: the shapes in which a server may echo a secret (:func:`echo_shapes`), a
search for a secret's fragment in any decoding of a text (:func:`leaked_fragment`), and
everything an exception exposes (:func:`exception_texts`)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import unquote, unquote_plus

from rankseam_openai.scrub import MIN_FRAGMENT

__all__ = ["EXCERPT", "echo_shapes", "exception_texts", "leaked_fragment"]

#: Where rankseam-openai cuts an excerpt of server text for a message (characters).
EXCERPT = 200


def _pct(text: str, lower: bool = False) -> str:
    out = "".join(f"%{b:02X}" for b in text.encode())
    return out.lower() if lower else out


def echo_shapes(secret: str) -> Iterator[tuple[str, str]]:
    """(name, text) pairs, each holding ``secret`` in one shape a server may echo it in: split
    by whitespace at every position, across every cut point of an excerpt, percent-, JSON-,
    ``\\x``- and HTML-escaped, after a long run of whitespace."""
    yield "verbatim", f"invalid api key: {secret}"
    yield "quoted", f"invalid api key: 'Bearer {secret}'"
    for i in range(1, len(secret)):  # a line break at every position; other breaks at some
        yield f"split-newline-{i}", f"key {secret[:i]}\n{secret[i:]} refused"
        if i % 3 == 0:
            yield f"split-space-{i}", f"key {secret[:i]} {secret[i:]} refused"
            yield f"split-crlf-tab-{i}", f"key {secret[:i]}\r\n\t{secret[i:]} refused"
    yield "wrapped-every-4", "\n".join(secret[i : i + 4] for i in range(0, len(secret), 4))
    yield "spaced-out", " ".join(secret)
    yield "percent", f"key={_pct(secret)}"
    yield "percent-lower", f"key={_pct(secret, lower=True)}"
    yield "percent-split", f"key={_pct(secret[:10])}%0A{_pct(secret[10:])}"
    yield "json-unicode", "key=" + "".join(f"\\u{ord(c):04x}" for c in secret)
    yield "json-unicode-upper", "key=" + "".join(f"\\u{ord(c):04X}" for c in secret)
    yield "hex-escape", "key=" + "".join(f"\\x{ord(c):02x}" for c in secret)
    yield "html-decimal", "key=" + "".join(f"&#{ord(c)};" for c in secret)
    yield "html-hex", "key=" + "".join(f"&#x{ord(c):x};" for c in secret)
    yield "escaped-slashes", "key=" + "".join("\\" + c if c in "-/" else c for c in secret)
    yield "json-newline-escape", f"key {secret[:12]}\\n{secret[12:]}"
    # the key across every cut point of the excerpt (200 characters), whether the body is the
    # text itself or a JSON error object around it (which puts the text 23 characters in)
    for pad in range(EXCERPT - len(secret) - 30, EXCERPT + 5):
        yield f"cut-{pad}", "x" * pad + secret + " trailing text"
    # the key at the end of a long run of whitespace (the excerpt is cut after normalising)
    yield "after-whitespace", " " * 20_000 + secret
    yield "after-newlines", "\n" * 16_380 + secret


def _variants(text: str) -> Iterator[str]:
    """``text`` and every decoding of it a reader could apply."""
    yield text
    squeezed = re.sub(r"\s+", "", text)
    yield squeezed
    for candidate in (text, squeezed):
        yield unquote(candidate)
        yield unquote_plus(candidate)
        yield html.unescape(candidate)
        yield re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), candidate)
        yield re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), candidate)
        yield re.sub(r"\\(.)", r"\1", candidate)
        yield re.sub(r"\\[nrt]", "", candidate)
        yield re.sub(r"%0[aAdD9]|%20", "", candidate)


def leaked_fragment(text: str, secrets: Iterable[str]) -> str | None:
    """The first run of a secret (``MIN_FRAGMENT`` characters or more) found in ``text`` or in
    any decoding of it (whitespace removed, percent-, JSON-, HTML-unescaped), or None."""
    secrets = tuple(secrets)
    for variant in _variants(text):
        for secret in secrets:
            for i in range(len(secret) - MIN_FRAGMENT + 1):
                fragment = secret[i : i + MIN_FRAGMENT]
                if fragment in variant:
                    return fragment
    return None


def exception_texts(exc: BaseException) -> Iterator[str]:
    """Everything an exception exposes: message, repr, attributes, and the same for every
    exception it chains to (``__cause__``, ``__context__``), including an HTTP library
    exception's request and its headers (for secret-leak tests)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield str(current)
        yield repr(current)
        yield from _headers_of(current)
        for name, value in vars(current).items():
            yield f"{name}={value!r}"
            yield from _headers_of(value)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)


def _headers_of(obj: object) -> Iterator[str]:
    """The headers of ``obj`` (a request) or of the request it holds (an HTTP error)."""
    for holder in (obj, _attribute(obj, "_request"), _attribute(obj, "request")):
        headers = _attribute(holder, "headers")
        if isinstance(headers, Mapping):
            yield json.dumps({str(k): str(v) for k, v in headers.items()})


def _attribute(obj: object, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # httpx's HTTPError.request raises when no request is attached
        return None
