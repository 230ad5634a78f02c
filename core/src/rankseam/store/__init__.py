"""Stores: the contract every store backend implements (:mod:`.contract`), store targets
(:mod:`.target`), and the embedded SQLite store (revisions, tombstones, FTS5, vectors). See
docs/store.md and docs/writing-plugins.md ("Writing a store").

The package imports its modules on first use of a name, so that importing the store contract
(which :mod:`rankseam.plugin` does) does not load the SQLite store.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "SCHEMA_VERSION",
    "TOKENIZERS",
    "BulkReader",
    "BulkWriter",
    "MemoryNotFoundError",
    "SQLiteStore",
    "Store",
    "StoreReader",
    "StoreTarget",
    "StoredMemory",
    "parse_target",
]

_HOME = {
    "SCHEMA_VERSION": "rankseam.store.schema",
    "TOKENIZERS": "rankseam.store.schema",
    "BulkReader": "rankseam.store.contract",
    "BulkWriter": "rankseam.store.contract",
    "MemoryNotFoundError": "rankseam.store.records",
    "SQLiteStore": "rankseam.store.sqlite",
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
