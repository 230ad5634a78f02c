"""The store contract's feedback tests (the optional :class:`~rankseam.plugin.stores.FeedbackStore`
capability; docs/store.md, "Feedback"): a record of feedback on a search result is stored
exactly (query, namespace, filter, hits shown with their ranks, ids used, note) and listed
oldest first; it is never memory state (searches, memories, histories and snapshots that did
not ask are unchanged by it); each namespace is bounded (a write past the bound drops the
oldest and logs it); deletes by id, by namespace and of everything; a snapshot carries it only
when asked, and the embedded SQLite store imports it. A store without the capability answers
every feedback call with a clear error naming the store.

:class:`~rankseam.testing.StoreContract` runs them.
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from rankseam.errors import ConfigurationError, ValidationError
from rankseam.store.feedback import FeedbackStore
from rankseam.testing.base import StoreContractPart
from rankseam.testing.store_workers import open_kit

__all__ = ["FeedbackContract"]

#: The namespace the kit's memories live in (``open_kit``).
_NS = "kit"
_TEXTS = {
    "tea": "Ada drinks green tea every morning",
    "coffee": "Ada switched to black coffee",
    "walk": "Ada walks the dog after tea",
    "book": "Grace reads a book about compilers",
}


def _fill(m: Any, namespace: str = _NS) -> None:
    for memory_id, text in _TEXTS.items():
        m.add(text, memory_id=memory_id, namespace=namespace, metadata={"who": text.split()[0]})


class FeedbackContract(StoreContractPart):
    """Standard tests of a store's feedback table; :class:`~rankseam.testing.StoreContract`
    runs them."""

    _is_contract = True

    @staticmethod
    def _keeps_feedback(m: Any) -> None:
        if not isinstance(m.store, FeedbackStore):
            with pytest.raises(ConfigurationError, match=repr(m.store.kind)):
                m.feedback_records()
            pytest.skip(f"the {m.store.kind!r} store keeps no feedback (FeedbackStore)")

    def test_feedback_is_recorded_exactly_and_listed_oldest_first(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            self._keeps_feedback(m)
            _fill(m)
            result = m.search("Ada tea", 3, where={"who": "Ada"})
            shown = [hit.ref for hit in result]
            assert len(shown) == 3
            used = [shown[2].memory_id, shown[0].memory_id]
            first = m.feedback(result, used=used, note="the third answered it")
            second = m.feedback(m.search("compilers", 2))
            listed = m.feedback_records()
            assert [r.feedback_id for r in listed] == [first.feedback_id, second.feedback_id]
            got = listed[0]
            assert got == first
            assert (got.namespace, got.query, got.note) == (_NS, "Ada tea", "the third answered it")
            assert [(h.rank, h.memory_id, h.revision) for h in got.shown] == [
                (rank, ref.memory_id, ref.revision) for rank, ref in enumerate(shown, start=1)
            ]
            assert got.used == tuple(used) and got.used_ranks == (3, 1)
            assert got.where is not None and dict(got.where) == dict(result.trace.where or {})
            assert [h.score for h in got.shown] == [hit.score for hit in result]
            assert listed[1].used == () and listed[1].where is None
            assert m.feedback_records(limit=1) == [first]
            assert m.feedback_records(since=second.created_at) == [second]
            # the export is the listing, one JSON object per line
            sink = io.StringIO()
            assert m.export_feedback(sink) == 2
            rows = [json.loads(line) for line in sink.getvalue().splitlines()]
            assert [row["feedback_id"] for row in rows] == [first.feedback_id, second.feedback_id]
            assert rows[0]["used"] == used and rows[0]["shown"][2]["rank"] == 3

    def test_feedback_names_only_the_hits_shown(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            self._keeps_feedback(m)
            _fill(m)
            result = m.search("Ada tea", 2)
            with pytest.raises(ValidationError, match="'book'"):
                m.feedback(result, used=["book"])
            hit = result[0].ref.memory_id
            with pytest.raises(ValidationError, match="more than once"):
                m.feedback(result, used=[hit, hit])
            with pytest.raises(ValidationError, match="at most"):
                m.feedback(result, used=[hit, "x", "y"])
            with pytest.raises(ValidationError, match="list of memory ids"):
                m.feedback(result, used=hit)
            assert m.feedback_records() == []  # nothing refused was stored

    def test_feedback_is_never_memory_state(self, store_target: str, tmp_path: Path) -> None:
        with self.memory(store_target) as m:
            self._keeps_feedback(m)
            _fill(m)
            before = m.search("Ada tea", 4)
            stats, listed = m.stats(), [s.ref for s in m.list()]
            for _ in range(3):
                m.feedback(before, used=[before[-1].ref.memory_id])
            after = m.search("Ada tea", 4)
            assert [(h.ref, h.score) for h in after] == [(h.ref, h.score) for h in before]
            assert m.stats()["namespaces"] == stats["namespaces"]
            assert [s.ref for s in m.list()] == listed
            assert len(m.history("tea")) == 1
            plain = m.export_snapshot(tmp_path / "plain")
            assert plain.feedback is None and not (tmp_path / "plain" / "feedback.jsonl").exists()
            asked = m.export_snapshot(tmp_path / "asked", include_feedback=True)
            assert asked.feedback == 3 and asked.snapshot_id == plain.snapshot_id
            records = m.feedback_records()
        with open_kit(str(tmp_path / "clone.sqlite3")) as clone:  # the embedded store
            report = clone.import_snapshot(tmp_path / "asked")
            assert (report.feedback, report.feedback_written) == (3, 3)
            assert clone.feedback_records() == records
            # a snapshot that did not ask holds none; its import adds none
            merged = clone.import_snapshot(tmp_path / "plain", merge=True)
            assert merged.feedback is None and len(clone.feedback_records()) == 3

    def test_feedback_is_bounded_per_namespace(
        self, store_target: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        with self.memory(store_target, feedback_max_records=3) as m:
            self._keeps_feedback(m)
            _fill(m)
            _fill(m, "other")
            result = m.search("Ada", 2)
            kept_elsewhere = m.feedback(m.search("Ada", 2, namespace="other"))
            with caplog.at_level(logging.INFO, logger="rankseam.feedback"):
                written = [m.feedback(result, note=str(i)) for i in range(5)]
            assert [r.note for r in m.feedback_records()] == ["2", "3", "4"]
            assert m.feedback_records() == written[2:]
            assert m.feedback_records("other") == [kept_elsewhere]  # its own bound
            drops = [r for r in caplog.records if "dropped the 1 oldest" in r.getMessage()]
            assert len(drops) == 2 and "3 records" in drops[0].getMessage()

    def test_feedback_deletes_by_id_namespace_and_all(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            self._keeps_feedback(m)
            _fill(m)
            _fill(m, "other")
            mine = [m.feedback(m.search("Ada", 2)) for _ in range(3)]
            theirs = [m.feedback(m.search("Ada", 2, namespace="other")) for _ in range(2)]
            assert m.delete_feedback([mine[1].feedback_id, "no-such-id"]) == 1
            assert m.feedback_records() == [mine[0], mine[2]]
            with pytest.raises(ValidationError, match="confirm=True"):
                m.delete_feedback(namespace="other")
            with pytest.raises(ValidationError, match="named explicitly"):
                m.delete_feedback()
            assert m.feedback_records("other") == theirs  # a refusal deletes nothing
            assert m.delete_feedback(namespace="other", confirm=True) == 2
            assert m.feedback_records("other") == [] and len(m.feedback_records()) == 2
            with pytest.raises(ValidationError, match="confirm=True"):
                m.delete_feedback(all_namespaces=True)
            assert m.delete_feedback(all_namespaces=True, confirm=True) == 2
            assert m.feedback_records(all_namespaces=True) == []
            assert m.get("tea").text == _TEXTS["tea"]  # memories are never touched
