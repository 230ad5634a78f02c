"""Worker processes of test_processes.py (run as ``python pg_workers.py ROLE URL OUT ...``):
each opens the store itself, as separate application servers would."""

from __future__ import annotations

import json
import random
import re
import sys
import time
import warnings

warnings.simplefilter("ignore")

import rankseam  # noqa: E402
from rankseam.plugin.stores import MemoryNotFoundError  # noqa: E402
from rankseam.types import MemoryRef  # noqa: E402

NAMESPACE = "soak"
_SELF = re.compile(r"^writer (\d+) memory (\d+) rev (\d+) ")


def text_of(writer: int, index: int, revision: int, rng: random.Random) -> str:
    return f"writer {writer} memory {index} rev {revision} word{rng.randrange(50)} lake{rng.randrange(9)}"


def writer(url: str, out: str, number: int, seconds: float) -> None:
    """Batches of new memories and new revisions of earlier ones (one transaction each), a
    single update and a delete now and then; every committed write is logged after it
    returned."""
    rng = random.Random(number)
    revisions: dict[str, int] = {}
    log = []
    batches = 0
    index = 0
    with rankseam.open_memory(url, namespace=NAMESPACE) as memory:
        deadline = time.monotonic() + seconds  # from when this process is ready
        while time.monotonic() < deadline or batches < 2:
            records = []
            done: list[tuple[str, int, str]] = []
            for _ in range(8):
                mid = f"w{number}-{index}"
                text = text_of(number, index, 1, rng)
                records.append({"id": mid, "text": text})
                done.append((mid, 1, text))
                index += 1
            live = [m for m, r in revisions.items() if r > 0]
            for mid in rng.sample(live, min(4, len(live))):
                rev = revisions[mid] + 1
                text = text_of(number, int(mid.split("-")[1]), rev, rng)
                records.append({"id": mid, "text": text})
                done.append((mid, rev, text))
            memory.ingest(records, batch_size=len(records))
            batches += 1
            for mid, rev, text in done:
                revisions[mid] = rev
                log.append(["write", mid, rev, text])
            live = [m for m, r in revisions.items() if r > 0]
            if batches % 5 == 0 and live:
                mid = rng.choice(live)
                rev = revisions[mid] + 1
                text = text_of(number, int(mid.split("-")[1]), rev, rng)
                ref = memory.update(mid, text)
                assert ref.revision == rev, (ref, rev)
                revisions[mid] = rev
                log.append(["write", mid, rev, text])
            if batches % 7 == 0 and live:
                mid = rng.choice(live)
                memory.delete(mid)
                log.append(["delete", mid, revisions[mid], ""])
                revisions[mid] = -revisions[mid]
    with open(out, "w") as fh:
        json.dump({"batches": batches, "log": log}, fh)


def reader(url: str, out: str, number: int, seconds: float) -> None:
    """Searches (coarse and through the identity reranker); every hit's citation is checked:
    the revision exists, its stored text is the hit's text, and the text names that very
    memory and revision."""
    rng = random.Random(1000 + number)
    searches = hits = invalid = 0
    problems: list[str] = []
    with rankseam.open_memory(url, namespace=NAMESPACE) as memory:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline or searches < 2:
            query = f"memory word{rng.randrange(50)} lake{rng.randrange(9)}"
            reranker = None if searches % 2 else "identity"
            for hit in memory.search(query, 10, reranker=reranker).hits:
                hits += 1
                try:
                    stored = memory.get(hit.ref)
                except MemoryNotFoundError:
                    stored = None
                match = _SELF.match(hit.text)
                ok = (
                    stored is not None
                    and stored.text == hit.text
                    and stored.ref == hit.ref
                    and (
                        hit.ref.memory_id == "seed"
                        or (
                            match is not None
                            and hit.ref
                            == MemoryRef(NAMESPACE, f"w{match[1]}-{match[2]}", int(match[3]))
                        )
                    )
                )
                if not ok:
                    invalid += 1
                    problems.append(f"{hit.ref} {hit.text!r}")
            searches += 1
    with open(out, "w") as fh:
        json.dump(
            {"searches": searches, "hits": hits, "invalid": invalid, "problems": problems[:20]}, fh
        )


def batches(url: str, size: int) -> None:
    """Batches of ``size`` new memories ``b{n}-{j}`` forever; prints ``committed n`` after
    each (the test kills this process with SIGKILL)."""
    with rankseam.open_memory(url, namespace="kill") as memory:
        n = 0
        while True:
            memory.ingest(
                (
                    {"id": f"b{n}-{j}", "text": f"batch {n} record {j} of the kill test"}
                    for j in range(size)
                ),
                batch_size=size,
            )
            print(f"committed {n}", flush=True)
            n += 1


if __name__ == "__main__":
    role, url, *rest = sys.argv[1:]
    if role == "writer":
        writer(url, rest[0], int(rest[1]), float(rest[2]))
    elif role == "reader":
        reader(url, rest[0], int(rest[1]), float(rest[2]))
    elif role == "batches":
        batches(url, int(rest[0]))
    else:
        raise SystemExit(f"unknown role {role!r}")
