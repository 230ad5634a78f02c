"""Export: a store, read in one read transaction, written as a snapshot folder that appears
complete or not at all."""

from __future__ import annotations

import base64
import gzip as gzip_module
import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from rankseam.checks import json_shape
from rankseam.snapshot.feedback import write_feedback
from rankseam.snapshot.format import (
    DATA_NAME,
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST,
    MAX_LINE_BYTES,
    MAX_RECORD_DEPTH,
    MAX_RECORD_VALUES,
    SnapshotError,
    canonical,
    file_sha256,
    snapshot_id,
)
from rankseam.snapshot.reports import ExportReport
from rankseam.store.contract import BulkReader, Store
from rankseam.store.rows import SpaceRow

__all__ = ["export_snapshot"]

log = logging.getLogger("rankseam.snapshot")

_GZIP_LEVEL = 6  # level 9 took ~7x as long here for 1.5 % less size


def _prepare_out(out: Path) -> None:
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        raise SnapshotError(
            f"{str(out)!r} already exists; export into a new folder (or remove it first)",
            reason="exists",
        )
    out.parent.mkdir(parents=True, exist_ok=True)


def _unwritable(out: Path, exc: OSError) -> SnapshotError:
    return SnapshotError(
        f"cannot write the snapshot to {str(out)!r}: {exc.strerror or exc}; choose a folder "
        "you can write to, on a disk with free space (nothing was left behind)",
        reason="io",
    )


def _check_store(bulk: BulkReader, spaces: Sequence[str]) -> None:
    stray = bulk.vectors_outside(spaces)
    if stray:
        raise SnapshotError(
            f"the store holds {stray} vector(s) of an unregistered embedder space; run "
            "`rankseam reembed` with that embedder (which registers it) and export again",
            reason="store",
        )


def export_snapshot(
    store: Store,
    out: str | os.PathLike[str],
    *,
    gzip: bool = False,
    include_feedback: bool = False,
) -> ExportReport:
    """Write a snapshot of ``store`` into the new folder ``out``. The store is read in one read
    transaction (writers are not blocked); the folder appears complete or not at all.
    ``include_feedback``: also write the store's feedback records (:mod:`.feedback`; read
    after the memories, in a transaction of its own)."""
    started = time.perf_counter()
    out_path = Path(out).expanduser()
    try:
        _prepare_out(out_path)
        tmp = Path(
            tempfile.mkdtemp(prefix=f".{out_path.name}.", suffix=".partial", dir=out_path.parent)
        )
    except OSError as exc:
        raise _unwritable(out_path, exc) from None
    data_path = tmp / (DATA_NAME + (".gz" if gzip else ""))
    try:
        with store.bulk_read() as bulk:
            spaces = bulk.spaces()
            _check_store(bulk, [space.key for space in spaces])
            with data_path.open("wb") as raw:
                stream: io.BufferedIOBase = (
                    gzip_module.GzipFile(
                        filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=_GZIP_LEVEL
                    )
                    if gzip
                    else raw
                )
                try:
                    counts, vectors, content_sha, lines = _write_records(bulk, stream, spaces)
                finally:
                    if stream is not raw:
                        stream.close()
        stored_sha, size = file_sha256(data_path)
        manifest: dict[str, Any] = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "store": {
                "kind": store.kind,
                "schema_version": store.schema_version,
                "tokenizer": store.tokenizer,
            },
            "spaces": [
                {
                    "key": space.key,
                    "descriptor": dict(space.descriptor),
                    "vectors": vectors.get(space.key, 0),
                }
                for space in spaces
            ],
            "counts": counts,
            "files": [
                {
                    "name": DATA_NAME,
                    "path": data_path.name,
                    "compression": "gzip" if gzip else None,
                    "bytes": size,
                    "sha256": stored_sha,
                    "content_sha256": content_sha,
                    "lines": lines,
                }
            ],
        }
        manifest["snapshot_id"] = snapshot_id(manifest)
        if include_feedback:  # not memory state: the snapshot id does not cover it
            manifest["feedback"] = write_feedback(store, tmp)
        manifest["exported_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        manifest["created_by"] = _created_by()
        (tmp / MANIFEST).write_text(
            json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
        if out_path.exists():
            out_path.rmdir()  # empty (checked above)
        tmp.rename(out_path)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise _unwritable(out_path, exc) from None
        raise
    report = ExportReport(
        path=str(out_path),
        snapshot_id=manifest["snapshot_id"],
        gzip=gzip,
        memories=counts["memories"],
        revisions=counts["revisions"],
        vectors=sum(vectors.values()),
        bytes=size,
        seconds=time.perf_counter() - started,
        feedback=manifest["feedback"]["records"] if include_feedback else None,
    )
    log.info(
        "snapshot exported",
        extra={"event": "snapshot.export", "memories": report.memories, "gzip": gzip},
    )
    return report


def _too_many_values(line: bytes) -> bool:
    """Whether ``line`` holds more JSON values than an import reads (counted exactly only
    when its commas and brackets alone could reach the cap)."""
    if line.count(b",") + line.count(b"[") + line.count(b"{") < MAX_RECORD_VALUES:
        return False
    _depth, values = json_shape(line.decode("utf-8"), MAX_RECORD_DEPTH, MAX_RECORD_VALUES)
    return values > MAX_RECORD_VALUES


def _created_by() -> str:
    from rankseam.version import __version__

    return f"rankseam {__version__}"


def _write_records(
    bulk: BulkReader, stream: io.BufferedIOBase, spaces: Sequence[SpaceRow]
) -> tuple[dict[str, Any], dict[str, int], str, int]:
    order = bulk.write_order()
    seq_rids, total_revisions = order.keys, order.count
    keys = [space.key for space in spaces]
    cursor = bulk.revisions(keys)
    digest = hashlib.sha256()
    per_ns: dict[str, dict[str, int]] = {}
    vectors: dict[str, int] = {}
    totals = {"memories": 0, "deleted": 0, "revisions": 0, "live": 0}
    current: dict[str, Any] | None = None
    lines = 0

    def flush(record: dict[str, Any] | None) -> None:
        nonlocal lines
        if record is None:
            return
        head = record.pop("_head")
        if [r["revision"] for r in record["revisions"]] != list(range(1, head + 1)):
            raise SnapshotError(
                f"memory {record['id']!r} in namespace {record['namespace']!r} has a gap in its "
                "revisions; the store is inconsistent (restore it from a backup)",
                reason="store",
            )
        line = canonical(record) + b"\n"
        if len(line) > MAX_LINE_BYTES or _too_many_values(line):
            raise SnapshotError(
                f"memory {record['id']!r} in namespace {record['namespace']!r} takes "
                f"{len(line)} bytes with its {head} revisions, more than one memory may take "
                f"in a snapshot ({MAX_LINE_BYTES} bytes, {MAX_RECORD_VALUES} JSON values: "
                "docs/snapshots.md, Limits); this store cannot be exported as a snapshot: copy "
                "its database file instead",
                reason="limit",
            )
        digest.update(line)
        stream.write(line)
        lines += 1

    for row in cursor:
        ns, mid, deleted = row.namespace, row.memory_id, row.deleted
        head, rev, rid = row.head_revision, row.revision, row.key
        if current is None or current["namespace"] != ns or current["id"] != mid:
            flush(current)
            current = {
                "namespace": ns,
                "id": mid,
                "deleted": bool(deleted),
                "deleted_at": row.deleted_at if deleted else None,
                "revisions": [],
                "_head": head,
            }
            counts = per_ns.setdefault(ns, {"memories": 0, "deleted": 0, "revisions": 0})
            counts["memories"] += 1
            counts["deleted"] += int(bool(deleted))
            totals["memories"] += 1
            totals["deleted"] += int(bool(deleted))
        expect_live = rev == head and not deleted
        if row.live != expect_live:
            raise SnapshotError(
                f"revision {rev} of memory {mid!r} in namespace {ns!r} has an inconsistent live "
                "flag; the store is inconsistent (restore it from a backup)",
                reason="store",
            )
        vecs = {}
        for key, blob in zip(keys, row.vectors, strict=True):
            if blob is not None:
                vecs[key] = base64.b64encode(blob).decode("ascii")
                vectors[key] = vectors.get(key, 0) + 1
        seq = rid if seq_rids is None else int(np.searchsorted(seq_rids, rid)) + 1
        current["revisions"].append(
            {
                "revision": rev,
                "seq": seq,
                "text": row.text,
                "importance": row.importance,
                "metadata": json.loads(row.metadata),
                "created_at": row.created_at,
                "content_hash": row.content_hash,
                "thread": row.thread,
                "position": row.position,
                "derived_from": row.derived_from,
                "vectors": vecs,
            }
        )
        per_ns[ns]["revisions"] += 1
        totals["revisions"] += 1
        totals["live"] += int(expect_live)
    flush(current)
    if totals["revisions"] != total_revisions:
        raise SnapshotError(
            f"the store holds {total_revisions} revisions but only {totals['revisions']} belong "
            "to a memory; the store is inconsistent (restore it from a backup)",
            reason="store",
        )
    counts_out: dict[str, Any] = {**totals, "namespaces": per_ns}
    return counts_out, vectors, digest.hexdigest(), lines
