"""Idempotent adds with your own ids, revisions, get, list, delete and search."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import rankseam


def main(folder: Path) -> None:
    with rankseam.open_memory(folder / "basics.sqlite3") as memory:
        for _ in range(2):  # the second round finds every memory unchanged
            first = memory.add("The team offsite is in Lisbon in May", memory_id="offsite")
            memory.add("Priya prefers window seats", memory_id="priya-seat", importance=0.7)
        print("second add:", "unchanged" if first.unchanged else "stored", first.ref)

        new = memory.update("offsite", "The team offsite moved to Porto, still in May")
        print("updated:", new)  # revision 2; revision 1 stays readable by its ref
        old = memory.get(rankseam.MemoryRef(new.namespace, "offsite", 1))
        print("revision 1 said:", old.text)

        print("listed:", sorted(m.ref.memory_id for m in memory.list()))
        hit = memory.search("where is the offsite?", limit=1).hits[0]
        print("search:", hit.ref.memory_id, "revision", hit.ref.revision, "-", hit.text)

        memory.delete("priya-seat")
        print("after delete:", sorted(m.ref.memory_id for m in memory.list()))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()))
