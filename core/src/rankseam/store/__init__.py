"""Stores: the contract every store backend implements (:mod:`.contract`), store targets
(:mod:`.target`), and the embedded SQLite store (revisions, tombstones, FTS5, vectors). See
docs/store.md and docs/writing-plugins.md ("Writing a store")."""

from rankseam.store.contract import BulkReader, BulkWriter, Store, StoreReader
from rankseam.store.records import MemoryNotFoundError, StoredMemory
from rankseam.store.schema import SCHEMA_VERSION, TOKENIZERS
from rankseam.store.sqlite import SQLiteStore
from rankseam.store.target import StoreTarget, parse_target

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
