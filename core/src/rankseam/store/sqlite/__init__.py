"""The embedded SQLite store: namespaces, immutable revisions, tombstones, FTS5 and vectors.

- :mod:`.store`: :class:`SQLiteStore` (connections, transactions, writes, reads);
- :mod:`.reader`: a search's read snapshot (the reader protocols in SQLite's dialect);
- :mod:`.writer`: the rows of one write transaction.

Its schema is :mod:`rankseam.store.schema`, its bulk rows :mod:`rankseam.store.bulk`, its
vector cache :mod:`rankseam.store.vectors` and its ANN index :mod:`rankseam.store.ann`.
"""

from __future__ import annotations

from rankseam.store.sqlite.reader import SQLiteReader
from rankseam.store.sqlite.store import SQLiteStore, storage_error

__all__ = ["SQLiteReader", "SQLiteStore", "storage_error"]
