"""The snapshot functions through Memory's own methods, including a merge of a newer revision."""

from __future__ import annotations

from pathlib import Path

import rankseam


def test_memory_snapshot_methods_round_trip_and_merge(tmp_path: Path) -> None:
    with rankseam.open_memory(tmp_path / "a.sqlite3") as source:
        source.add("the spare key is under the blue flowerpot", memory_id="key")
        source.add("the wifi password is on the fridge", memory_id="wifi")
        before = source.search("where is the spare key", limit=2)
        report = source.export_snapshot(tmp_path / "snap", gzip=True)
        assert report.to_dict()["memories"] == 2

        verified = rankseam.Memory.verify_snapshot(tmp_path / "snap")
        assert verified.to_dict()["snapshot_id"] == report.to_dict()["snapshot_id"]

        with rankseam.open_memory(tmp_path / "b.sqlite3") as clone:
            clone.import_snapshot(tmp_path / "snap")
            after = clone.search("where is the spare key", limit=2)
            assert [(h.ref, round(h.score, 6)) for h in after] == [
                (h.ref, round(h.score, 6)) for h in before
            ]

            # The source moves on; merging its newer snapshot retires the clone's old head.
            source.update("key", "the spare key moved to the garage hook")
            source.export_snapshot(tmp_path / "snap2")
            clone.import_snapshot(tmp_path / "snap2", merge=True)
            hits = clone.search("spare key", limit=5).hits
            key_hits = [h for h in hits if h.ref.memory_id == "key"]
            assert [h.ref.revision for h in key_hits] == [2]
            assert key_hits[0].text == "the spare key moved to the garage hook"
            assert clone.get(rankseam.MemoryRef("default", "key", 1)).text.startswith(
                "the spare key is under"
            )
