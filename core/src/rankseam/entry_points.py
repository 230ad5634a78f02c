"""The entry points of a group, found once and remembered until the installed distributions
change.

Finding entry points through :mod:`importlib.metadata` reads the metadata of every installed
distribution (and imports the e-mail parser to do so): tens of milliseconds of CPU on every
start of the ``rankseam`` command. The answer is kept in one small JSON file,
``entry-points.json`` in ``RANKSEAM_CACHE_DIR`` (default: the user's cache folder,
``$XDG_CACHE_HOME/rankseam`` or ``~/.cache/rankseam`` on Linux, ``~/Library/Caches/rankseam``
on macOS, ``%LOCALAPPDATA%\\rankseam\\Cache`` on Windows; set it empty to keep nothing), with a
fingerprint of what it was read from: the interpreter, every ``sys.path`` entry, the
distribution folders (``*.dist-info``, ``*.egg-info``) in each, and the size and modification
time of each one's ``entry_points.txt`` and metadata file (name, version). Installing,
upgrading, reinstalling or removing a distribution changes the fingerprint, and the next start
reads the metadata again. The file is only a shortcut: when it is missing, unreadable, from
another environment, or cannot be written, the metadata is read as before. When a finder
other than Python's own path finder can supply distributions, nothing is cached.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import NamedTuple

__all__ = ["FoundEntryPoint", "cache_file", "entry_points"]

log = logging.getLogger("rankseam.entry_points")

#: Bumped when the file's layout changes (an older file is then read as a miss).
_FORMAT = 1

#: ``module[:attr[.attr...]] [extras]``: the syntax of an entry point's value
#: (the same pattern as importlib.metadata.EntryPoint).
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


class FoundEntryPoint(NamedTuple):
    """One entry point: its name, its value (``module:attr``), and the name and version of
    the distribution that declares it."""

    name: str
    value: str
    version: str | None
    distribution: str | None

    def load(self) -> object:
        """Import the module and return the attribute the entry point names (as
        ``importlib.metadata.EntryPoint.load``)."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r} has a malformed value {self.value!r}")
        target: object = importlib.import_module(match.group("module"))
        for attr in (match.group("attr") or "").split("."):
            if attr:
                target = getattr(target, attr)
        return target


def cache_file() -> Path | None:
    """The file that remembers entry points, or ``None`` when ``RANKSEAM_CACHE_DIR`` is set
    empty."""
    configured = os.environ.get("RANKSEAM_CACHE_DIR")
    if configured is not None:
        return Path(configured) / "entry-points.json" if configured.strip() else None
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches" / "rankseam"
    elif os.name == "nt":
        local = os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local"
        base = Path(local) / "rankseam" / "Cache"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rankseam"
    return base / "entry-points.json"


def _only_path_finder() -> bool:
    """Whether Python's own path finder is the only source of distributions."""
    from importlib.machinery import PathFinder

    return all(
        finder is PathFinder or not hasattr(finder, "find_distributions")
        for finder in sys.meta_path
    )


def _fingerprint(group: str) -> str:
    """What the installed distributions' entry points are read from, as a digest."""
    parts = [str(_FORMAT), group, sys.version, sys.prefix, sys.executable]
    for entry in sys.path:
        parts.append(f"path\0{entry}")
        folder = entry or "."
        try:
            names = sorted(os.listdir(folder))
        except OSError:  # a zip file or a missing folder: its own stamp
            try:
                stat = os.stat(folder)
                parts.append(f"{stat.st_mtime_ns}\0{stat.st_size}")
            except OSError:
                parts.append("-")
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                parts.append(name)
                for file in ("entry_points.txt", "METADATA", "PKG-INFO"):
                    try:
                        stat = os.stat(os.path.join(folder, name, file))
                        parts.append(f"{file}\0{stat.st_mtime_ns}\0{stat.st_size}")
                    except OSError:
                        pass
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _read_metadata(group: str) -> list[FoundEntryPoint]:
    from importlib import metadata

    found = []
    for ep in metadata.entry_points(group=group):
        dist = ep.dist
        found.append(
            FoundEntryPoint(
                ep.name,
                ep.value,
                dist.version if dist is not None else None,
                dist.metadata["Name"] if dist is not None else None,
            )
        )
    return found


def _read_cache(path: Path, fingerprint: str) -> list[FoundEntryPoint] | None:
    try:
        data = json.loads(path.read_bytes())
        if data.get("fingerprint") != fingerprint:
            return None
        found = []
        for name, value, version, distribution in data["entry_points"]:
            if not all(isinstance(s, str) for s in (name, value)) or not all(
                s is None or isinstance(s, str) for s in (version, distribution)
            ):
                return None
            found.append(FoundEntryPoint(name, value, version, distribution))
        return found
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # missing, unreadable or of another layout: read the metadata


def _write_cache(path: Path, fingerprint: str, found: list[FoundEntryPoint]) -> None:
    import tempfile

    data = {"fingerprint": fingerprint, "entry_points": [list(ep) for ep in found]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".entry-points.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out)
            os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or this one
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        log.debug("cannot remember entry points in %s: %s", path, exc)


def entry_points(group: str) -> list[FoundEntryPoint]:
    """The entry points of ``group`` in every installed distribution, in the order
    :func:`importlib.metadata.entry_points` gives them; remembered (see the module's
    docstring) until the installed distributions change."""
    path = cache_file()
    if path is None or not _only_path_finder():
        return _read_metadata(group)
    fingerprint = _fingerprint(group)
    cached = _read_cache(path, fingerprint)
    if cached is not None:
        return cached
    found = _read_metadata(group)
    _write_cache(path, fingerprint, found)
    return found
