"""Stores kept between quality runs (``rankseam bench quality --stores DIR``).

A kept store is a SQLite file per dataset, collection and embedder, with a JSON marker next to
it naming the digest of the collection's records and the embedding space. A later run reuses
the store only when the marker and the store's memory count match; otherwise it stops and says
to delete it (docs/benchmarks.md).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from rankseam.bench.datasets import Collection, Dataset
from rankseam.errors import ConfigurationError

__all__ = ["check_kept_store", "kept_store_path", "mark_kept_store"]


def _digest(collection: Collection) -> str:
    """SHA-256 over the collection's record ids and texts, in order."""
    digest = hashlib.sha256()
    for r in collection.records:
        digest.update(f"{r.id}\x1f{r.text}\x1e".encode())
    return digest.hexdigest()


def kept_store_path(folder: Path, dataset: Dataset, collection: Collection, embedder: str) -> Path:
    """The kept store's file for this collection and embedder in ``folder`` (created)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{dataset.kind}-{collection.name}-{embedder}")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{safe}.sqlite3"


def mark_kept_store(memory: Any, path: Path, collection: Collection) -> None:
    """Write the marker of a store just built, so a later run may reuse it."""
    marker = {"records": _digest(collection), "space": memory.stats()["embedder"]["key"]}
    path.with_suffix(".json").write_text(json.dumps(marker))


def check_kept_store(memory: Any, path: Path, collection: Collection) -> None:
    """Refuse a kept store whose marker or memory count does not match this collection."""
    marker_path = path.with_suffix(".json")
    try:
        marker = json.loads(marker_path.read_text())
    except (OSError, ValueError):
        marker = {}
    stats = memory.stats()
    want = {"records": _digest(collection), "space": stats["embedder"]["key"]}
    if marker != want or stats["memories"] != len(collection.records):
        raise ConfigurationError(
            f"--stores: {path} does not hold this collection's memories for embedder space "
            f"{want['space']} (or its marker {marker_path.name} is missing); delete it, or "
            "pass another --stores folder"
        )
