"""The embedded SQLite store: namespaces, immutable revisions, tombstones, FTS5 and vectors.

- :mod:`.store`: :class:`SQLiteStore` (connections, transactions, writes, reads);
- :mod:`.reader`: a search's read snapshot (the reader protocols in SQLite's dialect);
- :mod:`.writer`: the rows of one write transaction.

Its schema is :mod:`rankseam.sqlite.schema`, its bulk rows :mod:`.bulk`, its
vector cache :mod:`rankseam.sqlite.vector_cache` and its ANN index :mod:`rankseam.sqlite.ann`.
"""

from __future__ import annotations

from rankseam.sqlite.reader import SQLiteReader
from rankseam.sqlite.schema import SCHEMA_VERSION, TOKENIZERS
from rankseam.sqlite.store import SQLiteStore, storage_error

__all__ = ["SCHEMA_VERSION", "TOKENIZERS", "SQLiteReader", "SQLiteStore", "storage_error"]
