"""Filters through the MCP tools, end to end (the MCP SDK's own client starts `rankseam mcp`
over stdio against a real store): ``memory_search`` and ``memory_list`` take ``where``,
``thread``, ``since``, ``until`` and (search) ``min_score``, typed strictly; a filter the host
refuses is a tool error naming the place of the mistake, and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_session import payload, session

from rankseam.testing import FILTER_SAMPLE, sample_memory


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp-filters") / "m.sqlite3"
    with sample_memory(path, FILTER_SAMPLE):
        pass
    return path


def calls(db: Path, made: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The tools listed, then the answer of each call made, in one session."""

    async def fn(client: Client) -> list[Any]:
        listed = await client.list_tools()
        return [listed, *[await client.call_tool(name, args) for name, args in made]]

    return session(db, fn, env={"RANKSEAM_CONFIG": ""})  # type: ignore[no-any-return]


def ids(result: Any, key: str = "hits") -> list[str]:
    return [item["memory_id"] for item in payload(result)[key]]


def test_search_and_list_take_the_filter(db: Path) -> None:
    search, listing = "memory_search", "memory_list"
    q = {"query": "birthday dinner", "limit": 10}
    _, *got = calls(
        db,
        [
            (search, q),
            (search, {**q, "where": {"user": "dana"}}),
            (search, {**q, "where": {"$or": [{"user": "sam"}, {"thread": "chat-7"}]}}),
            (search, {**q, "where": {"year": {"$gte": 2025}, "user": {"$ne": "sam"}}}),
            (search, {**q, "thread": "chat-7"}),
            (search, {**q, "since": "2026-12-02T00:00:00+00:00", "until": "2026-12-04T00:00Z"}),
            (listing, {"where": {"year": {"$lt": 2026}}}),
            (listing, {"where": {"user": {"$in": ["dana", "sam"]}}, "limit": 2}),
            (listing, {"thread": "chat-7"}),
            (listing, {"since": "2026-12-02T00:00:00+00:00", "until": "2026-12-03T00:00Z"}),
            (search, {**q, "verbose": True}),
        ],
    )
    assert sorted(ids(got[0])) == ["c1", "d1", "d2", "s1"]
    assert sorted(ids(got[1])) == ["d1", "d2"]
    assert sorted(ids(got[2])) == ["c1", "s1"]
    assert ids(got[3]) == ["d1"]
    assert ids(got[4]) == ["c1"]
    assert sorted(ids(got[5])) == ["d2", "s1"]  # since: at or after; until: before
    assert ids(got[6], "memories") == ["d2"]
    paged = payload(got[7])
    assert [m["memory_id"] for m in paged["memories"]] == ["d1", "d2"]
    assert paged["next_offset"] == 2  # s1 passes too: one more page
    assert ids(got[8], "memories") == ["c1"]
    assert ids(got[9], "memories") == ["d2"]
    # a score cut-off between the best two hits keeps exactly those at or above it
    scores = [h["score"] for h in payload(got[10])["hits"]]
    assert len(set(scores)) > 1
    cut = (scores[0] + scores[1]) / 2
    (_, cut_off) = calls(db, [(search, {**q, "min_score": cut, "verbose": True})])
    kept = payload(cut_off)["hits"]
    assert [h["score"] for h in kept] == [s for s in scores if s >= cut]


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        # strict types, as every other argument: nothing is converted
        ("memory_search", {"where": '{"user": "dana"}'}, "'where' must be an object"),
        ("memory_search", {"where": ["user"]}, "'where' must be an object"),
        ("memory_search", {"thread": 7}, "'thread' must be a non-empty string"),
        ("memory_search", {"since": 1796083200}, "'since' must be a non-empty string"),
        ("memory_search", {"until": ""}, "'until' must be a non-empty string"),
        ("memory_search", {"min_score": "0.5"}, "'min_score' must be a number"),
        ("memory_search", {"min_score": True}, "'min_score' must be a number"),
        ("memory_list", {"where": "user=dana"}, "'where' must be an object"),
        ("memory_list", {"min_score": 0.5}, "unknown argument 'min_score'"),
        # what the filter says: checked by the host, naming the place
        (
            "memory_search",
            {"where": {"user": {"$like": "d%"}}},
            "where['user']['$like']: unknown operator '$like'",
        ),
        ("memory_list", {"where": {"$or": []}}, "where['$or']: $or takes a non-empty list"),
        ("memory_search", {"where": {"thread": 7}}, "where['thread']: thread holds text"),
        ("memory_search", {"since": "last week"}, ("since: ", "'last week'", "ISO 8601")),
        ("memory_list", {"until": "soon"}, ("until: ", "'soon'", "ISO 8601")),
        ("memory_list", {"thread": "chat-7", "include_deleted": True}, "filters live memories"),
    ],
)
def test_a_bad_filter_is_a_tool_error_naming_it(
    db: Path, tool: str, arguments: dict[str, Any], says: str | tuple[str, ...]
) -> None:
    if tool == "memory_search":
        arguments = {"query": "dinner", **arguments}
    _, result = calls(db, [(tool, arguments)])
    text = result.content[0].text
    assert result.is_error, text
    for part in (says,) if isinstance(says, str) else says:
        assert part in text, text
    assert "pydantic" not in text and "Input should" not in text, text


def test_the_schemas_and_descriptions_say_how_to_filter(db: Path) -> None:
    (listed,) = calls(db, [])
    tools = {tool.name: tool for tool in listed.tools}
    for name, extra in (("memory_search", {"min_score"}), ("memory_list", set())):
        tool = tools[name]
        props = tool.input_schema["properties"]
        assert {"where", "thread", "since", "until", *extra} <= set(props)
        assert ("min_score" in props) == bool(extra)
        assert "object" in json.dumps(props["where"])
        assert "$gte" in props["where"]["description"]
        assert "ISO 8601" in props["since"]["description"]
        description = tool.description or ""
        for word in ("`where`", "$in", "$or", "`thread`", "`since`", "`until`", "ISO 8601"):
            assert word in description, (name, word)
    assert "`min_score`" in (tools["memory_search"].description or "")
