"""The host's store value types this plugin speaks (one import point while the store contract
moves into the public plugin API)."""

from __future__ import annotations

from rankseam.plugin import EmbedderDescriptor
from rankseam.store.records import MemoryNotFoundError, StoredMemory
from rankseam.store.sqlite import BatchCounts, PreparedRecord

__all__ = [
    "BatchCounts",
    "EmbedderDescriptor",
    "MemoryNotFoundError",
    "PreparedRecord",
    "StoredMemory",
]
