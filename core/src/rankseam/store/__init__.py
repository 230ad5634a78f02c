"""The embedded SQLite store (revisions, tombstones, FTS5, vectors). See docs/store.md."""

from rankseam.store.records import MemoryNotFoundError, StoredMemory
from rankseam.store.schema import SCHEMA_VERSION, TOKENIZERS
from rankseam.store.sqlite import SQLiteStore, StoreReader

__all__ = [
    "SCHEMA_VERSION",
    "TOKENIZERS",
    "MemoryNotFoundError",
    "SQLiteStore",
    "StoreReader",
    "StoredMemory",
]
