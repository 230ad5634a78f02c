"""The store contract: what every store backend implements (:mod:`.contract`), what its read
snapshot offers (:mod:`.readers`), its typed rows (:mod:`.rows`) and records (:mod:`.records`),
store targets (:mod:`.target`) and the page-by-page reads every store shares (:mod:`.listing`).
The embedded SQLite store is an in-tree plugin of its own (:mod:`rankseam.sqlite`); the host's
write services live in :mod:`rankseam.writing`, snapshots in :mod:`rankseam.snapshot`. See
docs/store.md and docs/writing-plugins.md ("Writing a store").

The package imports its modules on first use of a name.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "BulkReader",
    "BulkWriter",
    "MemoryNotFoundError",
    "Store",
    "StoreReader",
    "StoreTarget",
    "StoredMemory",
    "parse_target",
]

_HOME = {
    "BulkReader": "rankseam.store.contract",
    "BulkWriter": "rankseam.store.contract",
    "MemoryNotFoundError": "rankseam.store.records",
    "Store": "rankseam.store.contract",
    "StoreReader": "rankseam.store.contract",
    "StoreTarget": "rankseam.store.target",
    "StoredMemory": "rankseam.store.records",
    "parse_target": "rankseam.store.target",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module 'rankseam.store' has no attribute {name!r}")
