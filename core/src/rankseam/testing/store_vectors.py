"""The store contract's vector-limit tests: a vector no store's index can hold (a component of
1e5 in an L2-normalised space, whose vectors have norm 1) is refused on the way in, by the
host, with the same error on every store: by ``verify_snapshot`` and by an import of that
snapshot, before anything is written.

:class:`~rankseam.testing.StoreContract` runs them (docs/snapshots.md)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from rankseam.snapshot.format import SnapshotError, snapshot_id
from rankseam.testing.base import StoreContractPart

__all__ = ["VectorLimitContract", "with_vector_component"]


def with_vector_component(snapshot: Path, value: float) -> None:
    """Rewrite the first vector of an uncompressed snapshot so that its first component is
    ``value``, and every checksum and the snapshot id to match (what a careful forger, or a
    store whose embedder does not normalise, produces)."""
    manifest = json.loads((snapshot / "manifest.json").read_text(encoding="utf-8"))
    file = manifest["files"][0]
    data = snapshot / file["path"]
    lines = data.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[0])
    revision = next(r for r in record["revisions"] if r["vectors"])
    key = sorted(revision["vectors"])[0]
    vector = np.frombuffer(base64.b64decode(revision["vectors"][key]), dtype="<f4").copy()
    vector[0] = value
    revision["vectors"][key] = base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    lines[0] = json.dumps(record, separators=(",", ":"), sort_keys=True).encode() + b"\n"
    content = b"".join(lines)
    data.write_bytes(content)
    digest = hashlib.sha256(content).hexdigest()
    file.update(sha256=digest, content_sha256=digest, bytes=len(content))
    manifest["snapshot_id"] = snapshot_id(manifest)
    (snapshot / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


class VectorLimitContract(StoreContractPart):
    """Standard tests of the vectors a store is given; :class:`~rankseam.testing.StoreContract`
    runs them."""

    _is_contract = True

    def test_a_snapshot_vector_no_index_holds_is_refused_by_verify_and_import(
        self, store_target: str, tmp_path: Path
    ) -> None:
        """A component of 1e5 in an L2-normalised space: ``verify_snapshot`` and the store's
        import refuse the snapshot with the same error naming the space and the norm, and the
        store is left as it was."""
        with self.memory(store_target) as m:
            assert m.embedder.descriptor.normalization == "l2"
            m.add("the lighthouse keeper's log", memory_id="a")
            snapshot = tmp_path / "snapshot"
            m.export_snapshot(snapshot)
            with_vector_component(snapshot, 1e5)
            with pytest.raises(SnapshotError) as verified:
                m.verify_snapshot(snapshot)
            message = str(verified.value)
            assert "has norm 100000" in message and "L2-normalised" in message, message
            before = m.stats()["memories"]
            m.delete("a")  # the snapshot's memory is then one the merge would write
            with pytest.raises(SnapshotError) as imported:
                m.import_snapshot(snapshot, merge=True)
            assert str(imported.value) == message
            assert m.stats()["memories"] == before - 1  # nothing was imported
