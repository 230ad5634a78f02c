"""The documented caps of a record through the Python API (docs/store.md, "Limits of a
record"): metadata depth and size, lone surrogates, huge numbers; and the bounded JSON reader
every file input goes through."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from rankseam import ValidationError, open_memory
from rankseam.checks import is_real
from rankseam.store.records import MAX_METADATA_BYTES, MAX_METADATA_DEPTH


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


@pytest.fixture
def memory():  # type: ignore[no-untyped-def]
    with open_memory(":memory:") as memory:
        yield memory


def test_metadata_depth_is_capped(memory) -> None:  # type: ignore[no-untyped-def]
    memory.add("at the cap", metadata=_nested(MAX_METADATA_DEPTH))
    with pytest.raises(ValidationError, match=f"more than {MAX_METADATA_DEPTH} levels"):
        memory.add("over the cap", metadata=_nested(MAX_METADATA_DEPTH + 1))
    deep: list[Any] = []
    for _ in range(200_000):  # far past the interpreter's recursion limit
        deep = [deep]
    with pytest.raises(ValidationError, match="levels deep"):
        memory.add("very deep", metadata={"a": deep})
    assert memory.stats()["memories"] == 1


def test_metadata_size_is_capped_before_it_is_encoded(memory) -> None:  # type: ignore[no-untyped-def]
    fits = {"blob": "a" * (MAX_METADATA_BYTES - 20)}
    memory.add("near the cap", metadata=fits)
    with pytest.raises(ValidationError, match=f"larger than {MAX_METADATA_BYTES} bytes"):
        memory.add("over", metadata={"blob": "a" * MAX_METADATA_BYTES})
    with pytest.raises(ValidationError, match="larger than"):  # multi-byte characters count
        memory.add("over", metadata={"blob": "é" * (MAX_METADATA_BYTES // 2)})
    huge = {str(i): i for i in range(1_000_000)}
    started = time.process_time()
    with pytest.raises(ValidationError, match="larger than"):
        memory.add("huge", metadata=huge)
    # refused from its length alone: no walk over a million items, no encoding
    assert time.process_time() - started < 0.5


@pytest.mark.parametrize(
    "metadata",
    [{"note": "\ud800"}, {"\udcff": 1}, {"list": ["ok", "\udfff"]}],
)
def test_metadata_with_a_lone_surrogate_is_refused(memory, metadata) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError, match="lone surrogate"):
        memory.add("text", metadata=metadata)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"memory_id": "id\ud800"}, "memory id is not valid Unicode"),
        ({"namespace": "\udcffns"}, "namespace is not valid Unicode"),
        ({"text": "text \ud83d"}, "memory text is not valid Unicode"),
    ],
)
def test_lone_surrogates_in_names_and_text_are_refused(memory, kwargs, words) -> None:  # type: ignore[no-untyped-def]
    args = {"text": "a text", **kwargs}
    with pytest.raises(ValidationError, match=words):
        memory.add(args.pop("text"), **args)
    with pytest.raises(ValidationError, match=words):
        record = {"id": "x", **kwargs}
        record["id"] = record.pop("memory_id", "x")
        memory.ingest([{"text": "a text", **record}])
    assert memory.stats()["memories"] == 0


def test_huge_numbers_are_refused_not_overflowed(memory) -> None:  # type: ignore[no-untyped-def]
    assert not is_real(10**400) and not is_real(-(10**400)) and is_real(10**300)
    with pytest.raises(ValidationError, match="created_at must be finite"):
        memory.ingest([{"text": "t", "created_at": 10**400}])
    with pytest.raises(ValidationError, match="importance"):
        memory.add("t", importance=10**400)


def test_the_bounded_json_reader() -> None:
    from rankseam.checks import parse_json

    assert parse_json(b'{"a": "[[[[[[[[[[[[[[[[[[[[[["}', max_depth=2) == {"a": "[" * 22}
    assert parse_json(b'{"a": "\\"[[[["}', max_depth=1) == {"a": '"[[[['}
    assert parse_json(b"[" * 64 + b"]" * 64) is not None
    assert len(parse_json(b'["' + b"," * 200_000 + b'"]')[0]) == 200_000  # in a string
    for data, words in [
        (b"[" * 65 + b"]" * 65, "nested more than 64 levels"),
        (b"[" + b"{}," * 100_000 + b"{}]", "more than 100000 values"),
        (b"\xff", "not valid UTF-8 (byte 1"),
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b"[-Infinity]", "-Infinity is not a JSON number"),
        (b"1" + b"0" * 5000, "not valid JSON"),
        (b'{"a": 1', "not valid JSON"),
    ]:
        with pytest.raises(ValueError, match=re.escape(words)):
            parse_json(data)
