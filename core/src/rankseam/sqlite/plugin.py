"""The embedded SQLite store, registered like any store plugin: plain paths and ``sqlite://``
URLs. Its candidate sources (lexical, vector, importance) are registered for it in
:mod:`rankseam.default_plugins.builtin_sources`.

This is the one plugin module that imports an internal module (``rankseam.sqlite.factory``):
the embedded store is part of the host. The lint configuration names this exception."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankseam.plugin import FactoryContext, StoreRegister, hookimpl
from rankseam.plugin.stores import Store, StoreTarget
from rankseam.sqlite.factory import open_sqlite


def _open(target: StoreTarget, options: Mapping[str, Any], context: FactoryContext) -> Store:
    return open_sqlite(target)


@hookimpl
def register_stores(register: StoreRegister) -> None:
    register(
        "sqlite",
        _open,
        schemes=("sqlite",),
        summary="the embedded store: one SQLite file (FTS5, vectors, ANN index); plain paths",
        options=(),
    )
