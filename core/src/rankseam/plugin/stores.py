"""The store role: what a store backend implements, what its read snapshot offers the host's
channels, the typed rows and records it reads and writes, the page-by-page listing helpers and
the target it is opened with. docs/plugin-api/stores.md says what each name is for, and
docs/writing-plugins.md ("Writing a store") how they fit together; a store registers itself
with :class:`rankseam.plugin.StoreRegister`.

The names are defined in the host's internal modules and re-exported here, the one place a
plugin imports them from.
"""

from __future__ import annotations

from rankseam.store.contract import BatchWriter, BulkReader, BulkWriter, Store, StoreReader, Vectors
from rankseam.store.feedback import FeedbackQuery, FeedbackStore, FeedbackWritten
from rankseam.store.filters import (
    FIELDS,
    SQL_OPERATORS,
    Condition,
    Filter,
    FilterCompiler,
    matches,
)
from rankseam.store.listing import PageFetch, memory_pages, pending_pages, store_stats
from rankseam.store.readers import (
    ConcurrentReader,
    Identities,
    ImportanceReader,
    LexicalQuery,
    LexicalReader,
    NeighbourReader,
    ScoredKeys,
    VectorReader,
)
from rankseam.store.records import (
    MemoryNotFoundError,
    MemoryRows,
    PreparedRecord,
    RevisionRow,
    StoredMemory,
    WritePlan,
)
from rankseam.store.rows import (
    BulkRevision,
    Forgotten,
    MemoryHead,
    MemoryKey,
    Neighbours,
    PendingText,
    RevisionDigest,
    SpaceRow,
    StoreCounts,
    VectorItem,
    WriteOrder,
)
from rankseam.store.target import StoreTarget

__all__ = [
    "FIELDS",
    "SQL_OPERATORS",
    "BatchWriter",
    "BulkReader",
    "BulkRevision",
    "BulkWriter",
    "ConcurrentReader",
    "Condition",
    "FeedbackQuery",
    "FeedbackStore",
    "FeedbackWritten",
    "Filter",
    "FilterCompiler",
    "Forgotten",
    "Identities",
    "ImportanceReader",
    "LexicalQuery",
    "LexicalReader",
    "MemoryHead",
    "MemoryKey",
    "MemoryNotFoundError",
    "MemoryRows",
    "NeighbourReader",
    "Neighbours",
    "PageFetch",
    "PendingText",
    "PreparedRecord",
    "RevisionDigest",
    "RevisionRow",
    "ScoredKeys",
    "SpaceRow",
    "Store",
    "StoreCounts",
    "StoreReader",
    "StoreTarget",
    "StoredMemory",
    "VectorItem",
    "VectorReader",
    "Vectors",
    "WriteOrder",
    "WritePlan",
    "matches",
    "memory_pages",
    "pending_pages",
    "store_stats",
]
