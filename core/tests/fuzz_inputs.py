"""Fuzzing of every file input, run by test_fuzz_inputs.py in a child process whose address
space is capped (``RLIMIT_AS``): hypothesis feeds random bytes and random JSON to snapshot
``verify`` and ``import`` (data file, manifest, and records with one field replaced) and to
``ingest`` (a JSONL file through the real command, and records through ``Memory.ingest``).
Every outcome must be a success or a clean rankseam error; anything else (a MemoryError, a
RecursionError, a UnicodeEncodeError, a traceback from the command) fails the run.

Usage: ``python fuzz_inputs.py WORKDIR [CAP_MB]``; exit status 0 when every property held.
Examples are derandomized, so every run tries the same inputs (no flaky CI).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import resource
import shutil
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankseam.cli import cli
from rankseam.errors import RankseamError
from rankseam.memory import Memory, open_memory
from rankseam.snapshot import verify_snapshot
from rankseam.snapshot.format import snapshot_id

#: Examples per property (derandomized: the same ones every run).
EXAMPLES = 60
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)

#: Any string, lone surrogates and NUL included.
any_text = st.text(st.characters(exclude_categories=()), max_size=20)
#: JSON values of every kind, nested, with the awkward strings and numbers.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.sampled_from([10**400, -(10**400), 2**63, 1e308])
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)
#: A line of JSON text as a hostile file may hold it (NaN, deep nesting, raw bytes).
json_lines = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    st.sampled_from([1, 40, 64, 65, 3000, 100_000]).map(lambda n: b"[" * n + b"]" * n),
    st.sampled_from([b"NaN", b'{"text": Infinity}', b"1" + b"0" * 5000, b'"\\ud800"', b"\xff"]),
    st.binary(max_size=64),
)


class Work:
    """A base snapshot, a scratch folder and a merge target, shared by the examples."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.base = root / "base"
        with open_memory(root / "source.sqlite3") as memory:
            for i in range(3):
                memory.add(f"memory {i} about lanterns", memory_id=f"m{i}", metadata={"i": i})
            memory.export_snapshot(self.base)
        self.lines = (self.base / "memories.jsonl").read_bytes().splitlines(keepends=True)
        self.target: Memory = open_memory(root / "target.sqlite3")
        self.target.add("a memory the target holds", memory_id="keep")
        self.count = 0

    def fresh(self) -> Path:
        self.count += 1
        snap = self.root / f"s{self.count}"
        shutil.copytree(self.base, snap)
        return snap

    def drop(self, snap: Path) -> None:
        shutil.rmtree(snap, ignore_errors=True)


def forge(snap: Path, content: bytes | None, *, gz: bool = False, manifest: Any = None) -> None:
    """Write ``content`` as the data file and fix every checksum, the line count and the id
    (what a careful forger does), so the reader reaches the records."""
    data_manifest = json.loads((snap / "manifest.json").read_text())
    if manifest is not None:
        data_manifest = manifest
    if content is not None:
        # each line padded to 200 bytes (JSON allows the spaces): a record is never shorter,
        # and the counts then fit the file, so the reader gets to parse the lines
        content = b"".join(
            line[:-1].ljust(200) + b"\n" if line.endswith(b"\n") else line
            for line in content.splitlines(keepends=True)
        )
        file = data_manifest["files"][0]
        (snap / file["path"]).unlink(missing_ok=True)
        name = "memories.jsonl.gz" if gz else "memories.jsonl"
        stored = gzip.compress(content, mtime=0) if gz else content
        (snap / name).write_bytes(stored)
        file.update(
            path=name,
            compression="gzip" if gz else None,
            sha256=hashlib.sha256(stored).hexdigest(),
            content_sha256=hashlib.sha256(content).hexdigest(),
            bytes=len(stored),
            lines=content.count(b"\n"),
        )
        lines = content.count(b"\n")
        data_manifest["counts"].update(memories=lines, revisions=lines, live=lines, deleted=0)
    if isinstance(data_manifest, dict):
        try:
            data_manifest["snapshot_id"] = snapshot_id(data_manifest)
        except (KeyError, TypeError, ValueError, AttributeError):
            pass
    (snap / "manifest.json").write_text(json.dumps(data_manifest), errors="surrogatepass")


def check_snapshot(work: Work, snap: Path) -> None:
    """verify and import (merge into a store that holds memories) end cleanly."""
    try:
        verify_snapshot(snap)
    except RankseamError:
        pass
    try:
        work.target.import_snapshot(snap, merge=True)
    except RankseamError:
        pass
    work.drop(snap)


def run_all(work: Work) -> None:
    @SETTINGS
    @given(data=st.binary(max_size=3000), gz=st.booleans())
    def random_data_file(data: bytes, gz: bool) -> None:
        snap = work.fresh()
        forge(snap, data, gz=gz)
        check_snapshot(work, snap)

    @SETTINGS
    @given(data=st.binary(max_size=3000))
    def random_bytes_as_gzip(data: bytes) -> None:
        snap = work.fresh()
        forge(snap, b"")
        (snap / "memories.jsonl").unlink()
        (snap / "memories.jsonl.gz").write_bytes(data)
        check_snapshot(work, snap)

    @SETTINGS
    @given(lines=st.lists(json_lines, max_size=5), gz=st.booleans())
    def random_json_lines(lines: list[bytes], gz: bool) -> None:
        snap = work.fresh()
        forge(snap, b"".join(line.replace(b"\n", b" ") + b"\n" for line in lines), gz=gz)
        check_snapshot(work, snap)

    @SETTINGS
    @given(
        index=st.integers(0, 2),
        path=st.sampled_from(
            [("id",), ("namespace",), ("deleted",), ("deleted_at",), ("revisions",)]
            + [("revisions", 0, key) for key in ("revision", "seq", "text", "importance")]
            + [("revisions", 0, key) for key in ("metadata", "created_at", "vectors")]
            + [("revisions", 0, "content_hash")]
        ),
        value=json_values,
    )
    def record_with_a_random_field(index: int, path: tuple[Any, ...], value: Any) -> None:
        snap = work.fresh()
        lines = list(work.lines)
        record = json.loads(lines[index])
        holder = record
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = value
        lines[index] = json.dumps(record, sort_keys=True).encode(errors="surrogatepass") + b"\n"
        forge(snap, b"".join(lines))
        check_snapshot(work, snap)

    @SETTINGS
    @given(
        key=st.sampled_from(["format_version", "store", "spaces", "counts", "files", "format"]),
        value=json_values,
        raw=st.none() | st.binary(max_size=200),
    )
    def random_manifest(key: str, value: Any, raw: bytes | None) -> None:
        snap = work.fresh()
        if raw is not None:
            (snap / "manifest.json").write_bytes(raw)
        else:
            manifest = json.loads((snap / "manifest.json").read_text())
            manifest[key] = value
            forge(snap, None, manifest=manifest)
        check_snapshot(work, snap)

    @SETTINGS
    @given(lines=st.lists(json_lines, max_size=6), raw=st.binary(max_size=300))
    def ingest_file(lines: list[bytes], raw: bytes) -> None:
        work.count += 1
        path = work.root / f"in{work.count}.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines) + raw)
        out = CliRunner().invoke(
            cli, ["ingest", str(path), "--db", str(work.root / "ingest.sqlite3")]
        )
        path.unlink()
        if not isinstance(out.exception, SystemExit | None):
            raise AssertionError(f"ingest raised {out.exception!r}") from out.exception
        assert out.exit_code in (0, 1), (out.exit_code, out.output)
        if out.exit_code == 1:
            assert out.output.startswith("Error: "), out.output

    @SETTINGS
    @given(
        records=st.lists(
            json_values
            | st.dictionaries(
                st.sampled_from(
                    ["text", "id", "namespace", "metadata", "importance", "created_at"]
                ),
                json_values,
            ),
            max_size=4,
        )
    )
    def ingest_records(records: list[Any]) -> None:
        try:
            work.target.ingest(records)
        except RankseamError:
            pass

    properties: list[Callable[[], None]] = [
        random_data_file,
        random_bytes_as_gzip,
        random_json_lines,
        record_with_a_random_field,
        random_manifest,
        ingest_file,
        ingest_records,
    ]
    for prop in properties:
        prop()
        print(f"ok {prop.__name__}", flush=True)


def cap_memory(mb: int) -> None:
    """Cap the address space at what the process has now plus ``mb`` MiB."""
    with open("/proc/self/status") as fh:
        size_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmSize:"))
    limit = (size_kb + mb * 1024) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> int:
    root = Path(sys.argv[1])
    cap_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    work = Work(root)
    cap_memory(cap_mb)
    try:
        run_all(work)
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        work.target.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
