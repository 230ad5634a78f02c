"""The async twins of ``list``, ``stats`` and ``reembed`` (docs/async.md): ``alist`` answers
a page of what ``list`` streams (``offset``, ``limit``; filters as ``list`` takes them),
``astats`` what ``stats`` answers, ``areembed`` what ``reembed`` does (resumable slices,
progress called in its worker thread, the switch), each with its sync twin's arguments."""

from __future__ import annotations

import asyncio
import inspect
import threading
from pathlib import Path

import pytest

from rankseam import Memory, ValidationError, open_memory
from rankseam.memory import ReembedProgress
from rankseam.types import MAX_INT64

OTHER = {"embedders": {"hashed": {"dimensions": 128}}}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RANKSEAM_DB", "RANKSEAM_RERANK", "RANKSEAM_NAMESPACE", "RANKSEAM_EMBEDDER"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def db(tmp_path: Path) -> str:
    """12 memories (m05 deleted), the even ones of user dana, in thread t."""
    path = str(tmp_path / "reads.sqlite3")
    with open_memory(path) as m:
        for i in range(12):
            m.add(
                f"memory {i} about a field vole",
                memory_id=f"m{i:02d}",
                metadata={"user": "dana" if i % 2 == 0 else "eli"},
                thread="t" if i < 6 else None,
            )
        m.delete("m05")
    return path


def test_the_twins_take_their_sync_twins_arguments() -> None:
    for sync_name in ("list", "stats", "reembed"):
        sync_sig = inspect.signature(getattr(Memory, sync_name))
        twin = getattr(Memory, "a" + sync_name)
        assert inspect.iscoroutinefunction(twin)
        params = inspect.signature(twin).parameters
        for name, param in sync_sig.parameters.items():
            assert (params[name].kind, params[name].default) == (param.kind, param.default)
    # alist adds the page: offset and limit, keyword-only
    extra = set(inspect.signature(Memory.alist).parameters) - set(
        inspect.signature(Memory.list).parameters
    )
    assert extra == {"offset", "limit"}


@pytest.mark.parametrize(
    "scope",
    [
        {},
        {"include_deleted": True},
        {"where": {"user": "dana"}},
        {"thread": "t"},
    ],
)
def test_alist_pages_what_list_streams(db: str, scope: dict[str, object]) -> None:
    with open_memory(db) as m:
        everything = [s.ref for s in m.list(**scope)]  # type: ignore[arg-type]

        async def pages() -> list[list[object]]:
            out, offset = [], 0
            while True:
                page = await m.alist(offset=offset, limit=4, **scope)  # type: ignore[arg-type]
                out.append([s.ref for s in page])
                offset += len(page)
                if len(page) < 4:
                    return out

        paged = asyncio.run(pages())
        assert [ref for page in paged for ref in page] == everything
        assert all(len(page) == 4 for page in paged[:-1])
        assert [s.ref for s in asyncio.run(m.alist(**scope))] == everything  # type: ignore[arg-type]
    assert len(everything) > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"offset": -1}, "offset must be an integer in 0..9223372036854775807"),
        ({"offset": MAX_INT64 + 1}, "offset must be an integer in 0.."),
        ({"offset": "3"}, "offset must be an integer"),
        ({"limit": 0}, "limit must be None or an integer in 1.."),
        ({"limit": MAX_INT64 + 1}, "limit must be None or an integer in 1.."),
    ],
)
def test_alist_refuses_a_page_out_of_bounds(
    db: str, kwargs: dict[str, object], message: str
) -> None:
    with open_memory(db) as m, pytest.raises(ValidationError, match=message):
        asyncio.run(m.alist(**kwargs))  # type: ignore[arg-type]


def test_alist_at_the_largest_offset_is_empty(db: str) -> None:
    with open_memory(db) as m:
        assert asyncio.run(m.alist(offset=MAX_INT64, limit=MAX_INT64)) == []


def test_astats_answers_what_stats_answers(db: str) -> None:
    with open_memory(db) as m:
        assert asyncio.run(m.astats()) == m.stats()


def test_areembed_runs_reembed_in_a_worker_thread(db: str) -> None:
    with open_memory(db, config=OTHER) as m:  # active: the 128-dimension space, still empty
        threads: set[int] = set()
        seen: list[ReembedProgress] = []

        def progress(p: ReembedProgress) -> None:
            threads.add(threading.get_ident())
            seen.append(p)

        first = asyncio.run(m.areembed(batch_size=4, max_memories=6, progress=progress))
        assert (first.embedded, first.complete, first.switched) == (6, False, False)
        assert [(p.embedded, p.remaining) for p in seen] == [(0, 11), (4, 7), (6, 5)]
        assert threading.get_ident() not in threads  # never on the event loop's thread
        rest = asyncio.run(m.areembed(batch_size=4))
        assert (rest.embedded, rest.complete) == (5, True)
        assert asyncio.run(m.astats())["vector_coverage"] == 1.0
