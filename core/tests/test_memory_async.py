"""The async twins of Memory's operations (``aadd``, ``aupdate``, ``aget``, ``adelete``,
``aingest``): the same answers and the same errors as the sync ones, and safe to run
concurrently with each other and with ``asearch`` on one event loop (docs/async.md)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from rankseam import Memory, MemoryRef, open_memory
from rankseam.memory import IngestError, MemoryNotFoundError

TWINS = {"add": "aadd", "update": "aupdate", "get": "aget", "delete": "adelete"}
TWINS["ingest"] = "aingest"


def _stable(value: Any) -> Any:
    """A result as comparable data: what two stores answering the same calls agree on (not
    random ids, clocks or hashes of them)."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    elif hasattr(value, "__attrs_attrs__"):
        value = {a.name: _stable(getattr(value, a.name)) for a in value.__attrs_attrs__}
    if isinstance(value, dict):
        return {
            k: _stable(v)
            for k, v in value.items()
            if k not in {"created_at", "seconds", "records_per_second"}
        }
    return value


def test_every_async_twin_has_its_sync_twins_signature() -> None:
    for sync_name, async_name in TWINS.items():
        sync_sig = inspect.signature(getattr(Memory, sync_name))
        async_sig = inspect.signature(getattr(Memory, async_name))
        assert inspect.iscoroutinefunction(getattr(Memory, async_name))
        assert list(async_sig.parameters) == list(sync_sig.parameters), async_name
        for name, param in sync_sig.parameters.items():
            twin = async_sig.parameters[name]
            assert (twin.kind, twin.default) == (param.kind, param.default), (async_name, name)


def _script(memory: Memory, call: Callable[..., Any]) -> list[Any]:
    """The same operations, through ``call(name, *args, **kwargs)``: sync or async."""
    out = [
        call("add", "the ferry leaves at nine", memory_id="ferry", importance=0.7),
        call("add", "the ferry leaves at nine", memory_id="ferry", importance=0.7),  # unchanged
        call("update", "ferry", "the ferry leaves at ten", metadata={"by": "harbour"}),
        call("get", "ferry"),
        call("get", MemoryRef(memory.config.namespace, "ferry", 1)),
        call(
            "ingest",
            [{"text": "bikes go on the lower deck", "id": "bikes"}, {"text": "no", "id": "no"}],
            batch_size=1,
        ),
        call("delete", "no"),
        call("get", "no"),
        call("add", "in another namespace", namespace="other", memory_id="ferry"),
    ]
    return [_stable(result) for result in out]


def test_async_twins_answer_as_the_sync_ones(tmp_path: Path) -> None:
    with open_memory(tmp_path / "sync.db") as sync_memory:
        expected = _script(sync_memory, lambda name, *a, **kw: getattr(sync_memory, name)(*a, **kw))

    with open_memory(tmp_path / "async.db") as memory:

        def call(name: str, *args: Any, **kwargs: Any) -> Any:
            return asyncio.run(getattr(memory, TWINS[name])(*args, **kwargs))

        got = _script(memory, call)
        assert got == expected
        assert memory.get("ferry").text == "the ferry leaves at ten"
        assert memory.get("no").deleted
        assert memory.search("lower deck bikes", 1).hits[0].ref.memory_id == "bikes"


def _raises(call: Callable[[], Any]) -> tuple[type[BaseException], str, Any, Any]:
    with pytest.raises(Exception) as info:
        call()
    exc = info.value
    return type(exc), str(exc), getattr(exc, "index", None), getattr(exc, "committed", None)


BAD_CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("add", ("something else",), {"memory_id": "held"}),
    ("add", ("",), {}),
    ("add", ("text",), {"importance": 2}),
    ("add", ("text",), {"namespace": ""}),
    ("update", ("nope", "text"), {}),
    ("get", ("nope",), {}),
    ("get", (MemoryRef("default", "held", 9),), {}),
    ("delete", ("nope",), {}),
    ("delete", ("",), {}),
    ("ingest", ([{"text": "fine"}, {"txt": "typo"}],), {"batch_size": 1}),
]


@pytest.mark.parametrize(("name", "args", "kwargs"), BAD_CALLS, ids=lambda v: str(v)[:30])
def test_async_twins_raise_what_the_sync_ones_raise(
    tmp_path: Path, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    with open_memory(tmp_path / "m.db") as memory:
        memory.add("held text", memory_id="held")
        sync = _raises(lambda: getattr(memory, name)(*args, **kwargs))
        twin = getattr(memory, TWINS[name])
        in_async = _raises(lambda: asyncio.run(twin(*args, **kwargs)))
    assert in_async == sync
    if name in ("update", "get", "delete") and args[0] == "nope":
        assert sync[0] is MemoryNotFoundError
    if name == "ingest":
        assert sync[:1] == (IngestError,) and sync[2:] == (2, 1)


def test_aadd_asks_the_write_gate_as_add_does(tmp_path: Path) -> None:
    config = {"write_gate": {"backend": "heuristic"}}
    texts = ["a", "I moved to Lisbon in March and started a new job at the harbour office"]
    with open_memory(tmp_path / "gate.db", config=config) as memory:
        for text in texts:
            sync = memory.add(text)
            in_async = asyncio.run(memory.aadd(text))
            assert (in_async.stored, in_async.gate) == (sync.stored, sync.gate), text
        assert [memory.add(t).stored for t in texts] == [False, True]


def test_writes_and_searches_run_concurrently_on_one_loop(tmp_path: Path) -> None:
    n = 24
    with open_memory(tmp_path / "c.db") as memory:
        memory.add("seed memory about the harbour", memory_id="seed")
        threads: set[str] = set()

        async def write(i: int) -> MemoryRef:
            added = await memory.aadd(f"note {i} about the harbour ferry", memory_id=f"n{i}")
            assert added.ref is not None
            ref = await memory.aupdate(f"n{i}", f"note {i} revised: the harbour ferry")
            stored = await memory.aget(f"n{i}")
            assert (stored.ref.revision, stored.text) == (2, f"note {i} revised: the harbour ferry")
            return ref

        async def read() -> int:
            result = await memory.asearch("harbour ferry", 5)
            assert result.hits and all(h.text for h in result.hits)
            return len(result.hits)

        async def main() -> tuple[list[Any], list[Any]]:
            jobs: list[Coroutine[Any, Any, Any]] = []
            for i in range(n):
                jobs += [write(i), read()]
            records = ({"text": f"bulk {i} harbour", "id": f"b{i}"} for i in range(n))
            progress = lambda _count: threads.add(threading.current_thread().name)  # noqa: E731
            jobs.append(memory.aingest(records, batch_size=5, progress=progress))
            done = await asyncio.gather(*jobs)
            deleted = await asyncio.gather(*(memory.adelete(f"b{i}") for i in range(0, n, 2)))
            return done, deleted

        done, deleted = asyncio.run(main())
        refs = [r for r in done if isinstance(r, MemoryRef)]
        assert sorted(r.memory_id for r in refs) == sorted(f"n{i}" for i in range(n))
        assert all(r.revision == 2 for r in refs)
        assert done[-1].added == n
        assert len(deleted) == n // 2
        # the work ran in worker threads, not on the event loop's (main) thread
        assert threads and threading.main_thread().name not in threads
        assert memory.stats()["memories"] == 1 + n + n // 2
        listed = {m.ref.memory_id for m in memory.list()}
        assert {f"n{i}" for i in range(n)} <= listed
        assert not {f"b{i}" for i in range(0, n, 2)} & listed
