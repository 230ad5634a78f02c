"""Which configuration a Memory or the ``rankseam`` command uses: the file found
(:func:`find_config`), then the environment and keyword overrides applied and the database
resolved (:func:`resolve_config`). The configuration itself is :mod:`rankseam.config`."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from rankseam.config import Config, SearchConfig, default_db_path
from rankseam.errors import ConfigurationError
from rankseam.seam import reranker_choice
from rankseam.store.target import parse_target

__all__ = [
    "CONFIG_NAME",
    "find_config",
    "in_config_file",
    "load_config",
    "resolve_config",
    "user_config_dir",
    "warn_if_likely_typo",
]

_TOP_OVERRIDES = {
    "db",
    "namespace",
    "embedder",
    "write_gate",
    "write_gate_backend",
    "write_gate_timeout_s",
    "write_gate_failure_policy",
    "feedback_max_records",
}
_SEARCH_OVERRIDES = {f.name for f in attrs.fields(SearchConfig)}


def _apply_overrides(config: Config, overrides: Mapping[str, Any]) -> Config:
    unknown = sorted(set(overrides) - _TOP_OVERRIDES - _SEARCH_OVERRIDES)
    if unknown:
        raise ConfigurationError(
            f"open_memory() got unknown option(s) {unknown}; known options are "
            f"{sorted(_TOP_OVERRIDES | _SEARCH_OVERRIDES)}"
        )
    top: dict[str, Any] = {k: v for k, v in overrides.items() if k in _TOP_OVERRIDES}
    search = {k: v for k, v in overrides.items() if k in _SEARCH_OVERRIDES}
    if "reranker" in search:
        search["reranker"] = reranker_choice(search["reranker"])
    if "reranker" in search:  # the caller chose: whatever the environment said is moot
        top["notes"] = ()
    try:
        return attrs.evolve(config, search=attrs.evolve(config.search, **search), **top)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"open_memory(): {exc}") from None


def load_config(
    config: Config | Mapping[str, Any] | None,
    config_file: str | os.PathLike[str] | None,
) -> Config:
    """The configuration passed in code (a :class:`Config` or a mapping of the
    ``rankseam.toml`` layout) or read from ``config_file``, with the environment applied where
    code did not set a value: code > environment > file > defaults (docs/configuration.md)."""
    if config is not None and config_file is not None:
        raise ConfigurationError("pass either config= or config_file=, not both")
    if config_file is not None:
        base = Config.from_toml(config_file)
    elif isinstance(config, Config):
        base = config
    elif isinstance(config, Mapping):
        base = Config.from_mapping(config)
    elif config is None:
        base = Config()
    else:
        raise ConfigurationError(
            f"config must be a rankseam.config.Config or a mapping, got {type(config).__name__}"
        )
    return base.with_env()


def resolve_config(
    path: str | os.PathLike[str] | None,
    config: Config | Mapping[str, Any] | None,
    config_file: str | os.PathLike[str] | None,
    overrides: Mapping[str, Any],
) -> Config:
    """The configuration :func:`~rankseam.open_memory` assembles (:func:`load_config`, then the
    keyword ``overrides``), its ``db`` resolved: ``path``, else the ``db`` override, else the
    configuration's ``db`` (code's, else ``RANKSEAM_DB``, else the file's), else
    :func:`default_db_path`."""
    base = load_config(config, config_file)
    given_db = overrides.get("db") or base.db
    cfg = _apply_overrides(base, {k: v for k, v in overrides.items() if k != "db"})
    if path is not None:
        db = os.fspath(path)
    elif given_db:
        db = str(given_db)
    else:
        db = str(default_db_path())
    if db != ":memory:" and parse_target(db).is_path:
        db = str(Path(db).expanduser())
    return attrs.evolve(cfg, db=db)


#: The configuration file name looked for in the working directory and the user's config dir.
CONFIG_NAME = "rankseam.toml"


def user_config_dir() -> Path:
    """The platform's per-user configuration folder for rankseam."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "rankseam"
    if os.name == "nt":
        return Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming") / "rankseam"
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "rankseam"


def find_config(
    explicit: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Path | None:
    """The configuration file the ``rankseam`` command uses, first match wins:

    1. ``explicit`` (``--config FILE``), which must exist;
    2. ``RANKSEAM_CONFIG`` (a file that must exist; set it empty to use no file at all);
    3. ``./rankseam.toml`` in the working directory;
    4. ``rankseam.toml`` in the user's config folder (:func:`user_config_dir`:
       ``$XDG_CONFIG_HOME/rankseam`` or ``~/.config/rankseam`` on Linux,
       ``~/Library/Application Support/rankseam`` on macOS, ``%APPDATA%\\rankseam`` on Windows).

    ``None`` when none applies (the built-in defaults are used).
    """
    env = os.environ if environ is None else environ
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigurationError(f"config file {str(path)!r} does not exist")
        return path
    if "RANKSEAM_CONFIG" in env:
        value = env["RANKSEAM_CONFIG"].strip()
        if not value:
            return None
        path = Path(value).expanduser()
        if not path.is_file():
            raise ConfigurationError(
                f"RANKSEAM_CONFIG names {value!r}, which is not a file; point it at a "
                "rankseam.toml, or set it empty to use no configuration file"
            )
        return path
    local = Path(cwd or Path.cwd()) / CONFIG_NAME
    if local.is_file():
        return local
    user = user_config_dir() / CONFIG_NAME
    return user if user.is_file() else None


def in_config_file(
    error: ConfigurationError, path: str | os.PathLike[str] | None
) -> ConfigurationError:
    """``error`` naming the configuration file in use, ``path``, unless it names it already
    (a component's option, an embedder's or a reranker's name may have come from that file)."""
    if path is None or os.fspath(path) in str(error):
        return error
    return ConfigurationError(f"{error} (configuration file in use: {os.fspath(path)})")


def warn_if_likely_typo(db: str) -> None:
    """Warn (``UserWarning``) when ``db`` is a plain path with no file yet while a file of
    the same suffix and a close name lies beside it: ``memoreis.sqlite3`` next to
    ``memories.sqlite3`` is a typo far more often than a new store. Nothing else is checked
    and nothing is opened: a first store, or one in an empty folder, is created silently."""
    if db == ":memory:" or not parse_target(db).is_path:
        return
    path = Path(db)
    if path.exists():
        return
    import difflib  # on first use: only when a store is about to be created
    import warnings

    try:
        with os.scandir(path.parent if str(path.parent) else ".") as entries:
            siblings = [
                e.name
                for e in entries
                if e.name.endswith(path.suffix) and e.name != path.name and e.is_file()
            ][:10_000]
    except OSError:
        return  # no folder (the store's creation says so) or an unreadable one
    # names compared without their shared suffix: "d.sqlite3" is not close to "c.sqlite3"
    stems = {name[: len(name) - len(path.suffix)]: name for name in siblings}
    close = [
        stems[stem] for stem in difflib.get_close_matches(path.stem, list(stems), n=3, cutoff=0.8)
    ]
    if close:
        near = " or ".join(repr(str(path.resolve().parent / c)) for c in close)
        warnings.warn(
            f"no rankseam store at {str(path.resolve())!r}: a new, empty one is created there; "
            f"did you mean {near}? "
            "Pass create=False to refuse a missing store, or create=True to create it without "
            "this check",
            UserWarning,
            stacklevel=3,
        )
