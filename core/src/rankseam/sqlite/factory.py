"""The embedded store's factory: a :class:`~rankseam.store.target.StoreTarget` (a plain path or
a ``sqlite:///ABSOLUTE/PATH`` URL) opened as a :class:`~rankseam.sqlite.SQLiteStore`.
The in-tree plugin ``rankseam.sqlite.plugin`` registers it under the name
``sqlite``, like any store plugin."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from rankseam.errors import ConfigurationError
from rankseam.sqlite import SQLiteStore
from rankseam.sqlite.ann import setting_from_env as ann_setting_from_env
from rankseam.store.target import StoreTarget

__all__ = ["open_sqlite", "sqlite_path"]


def sqlite_path(target: StoreTarget) -> str:
    """The file of ``target``: a plain path as given (``~`` expanded), or the path of a
    ``sqlite:///ABSOLUTE/PATH`` URL (percent-decoded)."""
    if target.is_path:
        return target.url if target.url == ":memory:" else str(Path(target.url).expanduser())
    parts = urlsplit(target.url)
    path = unquote(parts.path)
    if parts.netloc or not path or path == "/" or parts.query or parts.fragment:
        raise ConfigurationError(
            f"{target.redacted!r} is not a SQLite store URL; write sqlite:///ABSOLUTE/PATH "
            "(three slashes, then the absolute path), or give the plain path"
        )
    return path


def open_sqlite(target: StoreTarget) -> SQLiteStore:
    """Open (or create, when ``target.create``) the SQLite store of ``target``.
    ``RANKSEAM_ANN`` sets when its vector channel uses an ANN index (docs/store.md); the store
    takes no options (its registration says so, and the host refuses any)."""
    path = sqlite_path(target)
    if not target.create and path != ":memory:" and not Path(path).exists():
        raise ConfigurationError(
            f"no rankseam store at {path}; check --db / RANKSEAM_DB, or create one first "
            "(`rankseam add`, `rankseam ingest`, or open_memory(..., create=True))"
        )
    return SQLiteStore(path, ann=ann_setting_from_env())
