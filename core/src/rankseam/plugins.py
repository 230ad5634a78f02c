"""The plugin manager façade.

Plugins are found through the entry-point group ``rankseam`` and loaded lazily, once, on first
need (importing :mod:`rankseam` loads nothing). In-tree default plugins are registered through
the very same hooks. Environment variables:

- ``RANKSEAM_LOAD_PLUGINS``: comma-separated allow-list of entry-point plugin names; set to the
  empty string to load no third-party plugin at all.
- ``RANKSEAM_DISABLE_PLUGINS``: comma-separated block-list.
- ``RANKSEAM_STRICT_PLUGINS=1``: re-raise a plugin's import or registration error instead of
  isolating it (also ``load_plugins(strict=True)``).

A third-party plugin that fails to import or to register is isolated: the host keeps working
without it, a warning is logged, and ``rankseam plugins`` shows the error. The same holds for a
plugin whose ``register_commands`` hook raises (see :mod:`rankseam.cli`).

Tests install a plugin object without a distribution through :func:`plugin_installed`
(``rankseam.testing.installed_plugin``): it then loads exactly like an entry-point plugin.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import pluggy

from rankseam import hookspecs
from rankseam.entry_points import FoundEntryPoint, entry_points
from rankseam.errors import PluginError
from rankseam.registry import REGISTER_FOR_HOOK, Registry

__all__ = [
    "PluginInfo",
    "check_pending",
    "get_plugin_manager",
    "get_plugins",
    "get_registry",
    "load_plugins",
    "plugin_installed",
    "reset_plugins",
    "strict_plugins",
]

log = logging.getLogger("rankseam.plugins")

ENTRY_POINT_GROUP = "rankseam"
DEFAULT_PLUGINS = (
    "rankseam.sqlite.plugin",
    "rankseam.default_plugins.identity",
    "rankseam.default_plugins.heuristic_decision",
    "rankseam.search.channels.lexical",
    "rankseam.search.channels.vector",
    "rankseam.search.channels.importance",
    "rankseam.search.channels.context",
    "rankseam.default_plugins.hashed_embedder",
)


@attrs.frozen
class PluginInfo:
    """What ``rankseam plugins`` reports about one plugin."""

    name: str
    version: str | None
    default: bool
    status: str  # "ok" | "error" | "disabled"
    hooks: tuple[str, ...] = ()
    components: dict[str, list[str]] = attrs.field(factory=dict)
    error: str | None = None
    distribution: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "default": self.default,
            "status": self.status,
            "hooks": list(self.hooks),
            "components": self.components,
        }
        if self.distribution:
            out["distribution"] = self.distribution
        if self.error:
            out["error"] = self.error
        return out


class _State:
    def __init__(self) -> None:
        self.pm: pluggy.PluginManager | None = None
        self.registry: Registry | None = None
        self.infos: list[PluginInfo] = []
        #: name -> plugin object installed by :func:`plugin_installed` (tests).
        self.extra: dict[str, object] = {}


_lock = threading.RLock()
_state = _State()


def _env_list(name: str) -> list[str] | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return [part.strip() for part in raw.split(",") if part.strip()]


def _strict_from_env() -> bool:
    return os.environ.get("RANKSEAM_STRICT_PLUGINS", "").strip().lower() in {"1", "true", "yes"}


def _hooks_of(pm: pluggy.PluginManager, plugin: object) -> tuple[str, ...]:
    return tuple(sorted(impl.name for impl in pm.get_hookcallers(plugin) or ()))


def _register_components(
    pm: pluggy.PluginManager, plugin: object, name: str, registry: Registry
) -> None:
    """Call one plugin's registration hooks into a scratch registry, then merge it.

    Each implementation receives only the arguments it names (pluggy's rule, so a hook may gain
    arguments without breaking older plugins). Merging only after every hook succeeded, and
    only when no name is taken, means a plugin that fails leaves nothing behind.
    """
    scratch = Registry()
    for hook_name, register_cls in REGISTER_FOR_HOOK.items():
        caller = getattr(pm.hook, hook_name)
        offered = {"register": register_cls(scratch, name)}
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin:
                impl.function(**{arg: offered[arg] for arg in impl.argnames})
    registry.merge(scratch)


def _entry_points() -> Iterable[FoundEntryPoint]:
    """The group's entry points, remembered until the installed distributions change
    (:mod:`rankseam.entry_points`)."""
    return entry_points(ENTRY_POINT_GROUP)


@attrs.frozen
class _Found:
    """One plugin to load: an entry point, or an object installed by :func:`plugin_installed`."""

    name: str
    load: Callable[[], object]
    version: str | None = None
    distribution: str | None = None


def _itself(plugin: object) -> object:
    return plugin


def _found() -> list[_Found]:
    found: dict[str, _Found] = {}
    for ep in sorted(_entry_points(), key=lambda e: e.name):
        if ep.name in found:
            continue
        found[ep.name] = _Found(ep.name, ep.load, ep.version, ep.distribution)
    for name, plugin in _state.extra.items():
        found[name] = _Found(name, functools.partial(_itself, plugin))
    return [found[name] for name in sorted(found)]


def load_plugins(*, strict: bool | None = None) -> pluggy.PluginManager:
    """Load default and entry-point plugins once; later calls return the same manager.

    Re-entrant and thread-safe. ``strict`` (default: ``RANKSEAM_STRICT_PLUGINS``) re-raises
    the first plugin error instead of isolating the plugin.
    """
    with _lock:
        if _state.pm is not None:
            return _state.pm
        strict = _strict_from_env() if strict is None else strict
        pm = pluggy.PluginManager("rankseam")
        pm.add_hookspecs(hookspecs)
        registry = Registry()
        infos: list[PluginInfo] = []

        for module_name in DEFAULT_PLUGINS:
            module = importlib.import_module(module_name)
            pm.register(module, name=module_name)
            _register_components(pm, module, module_name, registry)
            infos.append(
                PluginInfo(
                    name=module_name,
                    version=None,
                    default=True,
                    status="ok",
                    hooks=_hooks_of(pm, module),
                    components=registry.owned_by(module_name),
                )
            )

        allow = _env_list("RANKSEAM_LOAD_PLUGINS")
        block = set(_env_list("RANKSEAM_DISABLE_PLUGINS") or [])
        for ep in _found():
            version, dist_name = ep.version, ep.distribution
            if (allow is not None and ep.name not in allow) or ep.name in block:
                infos.append(
                    PluginInfo(ep.name, version, False, "disabled", distribution=dist_name)
                )
                continue
            plugin: object | None = None
            try:
                plugin = ep.load()
                pm.register(plugin, name=ep.name)
                unknown = sorted(c.name for c in pm.get_hookcallers(plugin) or () if c.spec is None)
                if unknown:
                    raise PluginError(
                        f"implements unknown hook(s) {', '.join(unknown)}; see "
                        "docs/plugin-hooks.md for the hooks this rankseam version defines"
                    )
                _register_components(pm, plugin, ep.name, registry)
            except Exception as exc:  # isolate a broken third-party plugin
                if plugin is not None and pm.is_registered(plugin):
                    pm.unregister(plugin)
                message = f"{type(exc).__name__}: {exc}"
                if strict:
                    raise PluginError(f"plugin {ep.name!r} failed to load: {message}") from exc
                log.warning(
                    "plugin %r failed to load and was disabled: %s",
                    ep.name,
                    message,
                    extra={"plugin": ep.name},
                )
                infos.append(
                    PluginInfo(
                        ep.name, version, False, "error", error=message, distribution=dist_name
                    )
                )
                continue
            infos.append(
                PluginInfo(
                    ep.name,
                    version,
                    False,
                    "ok",
                    hooks=_hooks_of(pm, plugin),
                    components=registry.owned_by(ep.name),
                    distribution=dist_name,
                )
            )

        _state.registry = registry
        _state.infos = infos
        _state.pm = pm
        return pm


def get_plugin_manager() -> pluggy.PluginManager:
    return load_plugins()


def get_registry() -> Registry:
    """The registry of every component of every loaded plugin (loads plugins on first use)."""
    load_plugins()
    assert _state.registry is not None
    return _state.registry


def get_plugins(*, all: bool = False) -> list[PluginInfo]:
    """Entry-point plugins that were loaded or failed to load, with their status.

    ``all=True`` adds the in-tree default plugins and the plugins that the allow/block lists
    disabled (status ``disabled``).
    """
    load_plugins()
    return [info for info in _state.infos if all or not (info.default or info.status == "disabled")]


def check_pending() -> None:
    """Raise when a loaded plugin implements a hook rankseam does not define (a typo, or a
    plugin written for a newer rankseam)."""
    try:
        load_plugins().check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"{exc}; check the hook name against docs/plugin-hooks.md") from exc


def reset_plugins() -> None:
    """Forget loaded plugins so that the next use loads them again (tests, long-lived hosts
    that changed RANKSEAM_* variables)."""
    with _lock:
        _state.pm = None
        _state.registry = None
        _state.infos = []


def strict_plugins() -> bool:
    """Whether plugin errors are re-raised (``RANKSEAM_STRICT_PLUGINS=1``) instead of isolated."""
    return _strict_from_env()


@contextmanager
def plugin_installed(name: str, plugin: object) -> Iterator[None]:
    """Load ``plugin`` (a module or object with hook implementations) as if an installed
    distribution's entry point named ``name`` pointed at it, until the block ends.

    Plugins are reloaded on entry and on exit, so the block sees the plugin exactly as the host
    would (isolation, allow/block lists, ``rankseam plugins``) and later code does not.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a plugin needs a non-empty name, got {name!r}")
    with _lock:
        if name in _state.extra:
            raise ValueError(f"a plugin named {name!r} is already installed for this test")
        _state.extra[name] = plugin
        reset_plugins()
    try:
        yield
    finally:
        with _lock:
            _state.extra.pop(name, None)
            reset_plugins()
