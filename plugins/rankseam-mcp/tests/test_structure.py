"""A memory's thread, position and derived_from through the MCP tools, end to end: the MCP SDK's
own client starts `rankseam mcp` over stdio against a real store."""

from __future__ import annotations

from pathlib import Path

from mcp_session import call_tools, payload

import rankseam


def test_the_fields_round_trip_through_the_tools(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    add = "memory_add"
    results = call_tools(
        db,
        [
            (
                add,
                {
                    "text": "We meet Dana at the Thai place",
                    "memory_id": "t1",
                    "thread": "chat-7",
                    "position": 1,
                },
            ),
            (
                add,
                {
                    "text": "Friday at eight works for Dana",
                    "memory_id": "t2",
                    "thread": "chat-7",
                    "position": "2023-05-08T20:00:00+00:00",
                },
            ),
            (
                add,
                {"text": "Dinner with Dana is on Friday", "memory_id": "f1", "derived_from": "t2"},
            ),
            (
                "memory_update",
                {
                    "memory_id": "t1",
                    "text": "We meet Dana at the Thai place on Main St",
                    "position": 1.5,
                },
            ),
            ("memory_get", {"memory_id": "t1"}),
            ("memory_search", {"query": "dinner with Dana", "limit": 3}),
            ("memory_list", {}),
            (add, {"text": "x", "thread": 7}),
            (add, {"text": "x", "position": True}),
            (add, {"text": "x", "position": "someday"}),
        ],
    )
    got = payload(results[4])
    assert (got["thread"], got["position"], got["derived_from"]) == ("chat-7", 1.5, None)
    hits = {h["memory_id"]: h for h in payload(results[5])["hits"]}
    assert hits["f1"]["derived_from"] == "t2" and "thread" not in hits["f1"]  # compact
    assert hits["t2"]["thread"] == "chat-7" and hits["t2"]["position"] == 1683576000.0
    listed = {m["memory_id"]: m for m in payload(results[6])["memories"]}
    assert listed["t1"]["position"] == 1.5 and listed["f1"]["derived_from"] == "t2"
    for refused, field in zip(results[7:], ("thread", "position", "position"), strict=True):
        assert refused.is_error and field in refused.content[0].text
    with rankseam.open_memory(db, create=False) as memory:
        assert memory.get("t2").thread == "chat-7"
        assert len(list(memory.list())) == 3  # nothing of the refused calls was stored
