"""Store targets: what ``open_memory(target)`` and ``--db`` accept, and how a target is shown.

A target is a URL whose scheme picks the store backend (``postgresql://user@host/db``,
``sqlite:///abs/path.sqlite3``) or a plain path, which stays the embedded SQLite store.
Credentials may be part of a URL; the host never shows them: every message, ``repr`` and
report names a target by :attr:`StoreTarget.redacted`, which replaces the password (in the
user-info part and in password-like query parameters) with ``***``.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import attrs

__all__ = ["PLAIN_PATH_SCHEME", "StoreTarget", "parse_target", "redact", "scrub"]

#: The scheme a plain path (no ``scheme://``) stands for: the embedded store.
PLAIN_PATH_SCHEME = "sqlite"

#: ``scheme://`` at the start (two letters at least, so ``C://x`` stays a Windows path).
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")
#: Query parameters whose value is a secret.
_SECRET_PARAM = re.compile(
    r"([?&;](?:password|passwd|pwd|pass|sslpassword|secret|token|api_key|apikey)=)[^&;#]*",
    re.IGNORECASE,
)
MASK = "***"


def _userinfo(rest: str) -> tuple[str, str] | None:
    """``(userinfo, after)`` of a URL's part after ``scheme://``, split at the LAST ``@``
    (a password with an unescaped ``@`` or ``/`` is still hidden; a query that holds an
    ``@`` may hide more than needed, never less)."""
    at = rest.rfind("@")
    if at < 0:
        return None
    return rest[:at], rest[at:]


def redact(target: str) -> str:
    """``target`` with its password replaced by ``***`` (a plain path is returned as is)."""
    match = _SCHEME.match(target)
    if match is None:
        return target
    head, rest = target[: match.end()], target[match.end() :]
    parts = _userinfo(rest)
    if parts is not None:
        userinfo, after = parts
        user, colon, _password = userinfo.partition(":")
        if colon:
            rest = f"{user}:{MASK}{after}"
    return head + _SECRET_PARAM.sub(lambda m: m.group(1) + MASK, rest)


def _secrets(target: str) -> list[str]:
    """The secret values of ``target`` (as written and percent-decoded)."""
    match = _SCHEME.match(target)
    if match is None:
        return []
    rest = target[match.end() :]
    found = []
    parts = _userinfo(rest)
    if parts is not None:
        _user, colon, password = parts[0].partition(":")
        if colon and password:
            found.append(password)
    for m in _SECRET_PARAM.finditer(rest):
        value = rest[m.end(1) : m.end()]
        if value:
            found.append(value)
    out = []
    for value in found:
        out.append(value)
        decoded = unquote(value)
        if decoded != value:
            out.append(decoded)
    return sorted(set(out), key=len, reverse=True)


def scrub(text: str, target: str) -> str:
    """``text`` (an error message, say) with every secret of ``target`` replaced by ``***``,
    and ``target`` itself by its redacted form."""
    text = text.replace(target, redact(target))
    for secret in _secrets(target):
        text = text.replace(secret, MASK)
    return text


@attrs.frozen(repr=False)
class StoreTarget:
    """Which store to open: ``url`` exactly as given (a URL, or a plain path), its ``scheme``
    (lower-case; :data:`PLAIN_PATH_SCHEME` for a plain path) and whether a missing store may
    be created (``create``; read-only commands pass False).

    ``url`` may hold credentials: show a target by :attr:`redacted` (also its ``str`` and
    ``repr``), never by ``url``.
    """

    url: str
    scheme: str
    create: bool = True

    @property
    def is_path(self) -> bool:
        """True for a plain path (no ``scheme://``)."""
        return _SCHEME.match(self.url) is None

    @property
    def redacted(self) -> str:
        """The target without its password: what messages, logs and reports show."""
        return redact(self.url)

    def scrub(self, text: str) -> str:
        """``text`` with this target's secrets replaced by ``***``."""
        return scrub(text, self.url)

    def __repr__(self) -> str:
        return f"StoreTarget({self.redacted!r}, scheme={self.scheme!r}, create={self.create!r})"

    def __str__(self) -> str:
        return self.redacted


def parse_target(target: str, *, create: bool = True) -> StoreTarget:
    """The :class:`StoreTarget` of ``target``: its scheme when it starts with ``scheme://``,
    else a plain path of the embedded store."""
    match = _SCHEME.match(target)
    scheme = PLAIN_PATH_SCHEME if match is None else match.group(1).lower()
    return StoreTarget(target, scheme, create)
