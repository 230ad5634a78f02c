"""End to end: the MCP SDK's own client starts `rankseam mcp` over stdio against a real store."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcp_session import RANKSEAM, payload, search_text, session

import rankseam
from rankseam_mcp import build_server
from rankseam_mcp.slot import MemorySlot

TOOLS = {
    "memory_add",
    "memory_search",
    "memory_get",
    "memory_update",
    "memory_list",
    "memory_delete",
    "memory_stats",
    "memory_history",
}


def snapshot(db: Path) -> list[dict[str, Any]]:
    with rankseam.open_memory(db, create=False) as memory:
        return [m.to_dict() for m in memory.list(include_deleted=True)]


def test_lists_its_tools(tmp_path: Path) -> None:
    async def fn(client: Client) -> Any:
        return await client.list_tools()

    listed = session(tmp_path / "m.sqlite3", fn)
    assert {tool.name for tool in listed.tools} == TOOLS
    search = next(t for t in listed.tools if t.name == "memory_search")
    assert "reranker" in search.input_schema["properties"]
    # every schema is closed: clients see that other arguments are refused
    assert all(t.input_schema["additionalProperties"] is False for t in listed.tools)
    paged = next(t for t in listed.tools if t.name == "memory_list").input_schema["properties"]
    assert paged["limit"]["maximum"] == 100 and paged["offset"]["minimum"] == 0


def test_add_search_get_delete_stats(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"

    async def fn(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["add"] = [
            payload(await client.call_tool("memory_add", {"text": text, "memory_id": key}))
            for key, text in [
                ("dinner-1", "Dana's birthday dinner is on Friday at the Thai place"),
                ("dinner-2", "Dana's birthday dinner is Friday at the Thai place on Main St"),
                ("standup", "Moved the weekly standup to 9:30"),
            ]
        ]
        out["coarse"] = payload(
            await client.call_tool("memory_search", {"query": "dana's birthday dinner", "limit": 2})
        )
        out["mmr"] = payload(
            await client.call_tool(
                "memory_search",
                {
                    "query": "dana's birthday dinner",
                    "limit": 2,
                    "reranker": "mmr",
                    "reranker_options": {"lambda": 0.0},
                    "verbose": True,
                },
            )
        )
        out["get"] = payload(await client.call_tool("memory_get", {"memory_id": "standup"}))
        out["delete"] = payload(await client.call_tool("memory_delete", {"memory_id": "standup"}))
        out["after"] = payload(await client.call_tool("memory_search", {"query": "weekly standup"}))
        out["stats"] = payload(await client.call_tool("memory_stats", {}))
        return out

    out = session(db, fn)
    assert [a["ref"]["memory_id"] for a in out["add"]] == ["dinner-1", "dinner-2", "standup"]
    assert out["coarse"]["rerank"] is None
    assert {h["memory_id"] for h in out["coarse"]["hits"]} == {"dinner-1", "dinner-2"}
    rerank = out["mmr"]["rerank"]
    assert rerank["policy_id"] == "rankseam.rerank.mmr.v1" and rerank["status"] == "ok"
    assert rerank["descriptor"]["lambda"] == 0.0
    mmr_ids = [h["memory_id"] for h in out["mmr"]["hits"]]
    assert len({"dinner-1", "dinner-2"} & set(mmr_ids)) == 1  # diversity
    assert out["get"]["text"] == "Moved the weekly standup to 9:30"
    assert out["get"]["revision"] == 1
    assert out["delete"]["deleted"]["memory_id"] == "standup"
    assert "standup" not in [h["memory_id"] for h in out["after"]["hits"]]
    assert out["stats"]["memories"] == 2
    # what the server wrote is in the store
    stored = {m["memory_id"]: m for m in snapshot(db)}
    assert set(stored) == {"dinner-1", "dinner-2", "standup"}
    assert stored["standup"]["deleted"] is True


def test_none_forces_the_coarse_order_over_a_configured_reranker(tmp_path: Path) -> None:
    async def fn(client: Client) -> dict[str, Any]:
        await client.call_tool("memory_add", {"text": "a note about lunch", "memory_id": "a"})
        query = {"query": "lunch", "limit": 1}
        return {
            "configured": payload(await client.call_tool("memory_search", query)),
            "none": payload(await client.call_tool("memory_search", {**query, "reranker": "none"})),
        }

    out = session(tmp_path / "m.sqlite3", fn, env={"RANKSEAM_RERANK": "mmr"})
    assert out["configured"]["rerank"]["policy_id"] == "rankseam.rerank.mmr.v1"
    assert out["none"]["rerank"] is None
    assert [h["memory_id"] for h in out["none"]["hits"]] == ["a"]


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("memory_add", {"text": ""}, "text"),
    ("memory_add", {"text": 42}, "text"),
    ("memory_add", {"text": "dup", "memory_id": "kept"}, "already exists"),
    ("memory_add", {"text": "x", "importance": 7}, "importance"),
    ("memory_search", {"query": ""}, "query"),
    ("memory_search", {"query": "x", "limit": 0}, "limit"),
    (
        "memory_search",
        {"query": "x", "reranker": "nope"},
        "reranker 'nope'; allowed: 'none', 'mmr'",
    ),
    (
        "memory_search",
        {"query": "x", "reranker": "mmr", "reranker_options": {"lambda": 3}},
        "lambda",
    ),
    ("memory_get", {"memory_id": "missing"}, "no memory 'missing'"),
    ("memory_get", {"memory_id": "kept", "revision": 9}, "revision"),
    ("memory_delete", {"memory_id": "missing"}, "does not exist"),
    ("memory_delete", {}, "memory_id"),
    ("memory_update", {"memory_id": "missing", "text": "new"}, "does not exist"),
    ("memory_update", {"memory_id": "kept", "text": ""}, "'text' must be a non-empty string"),
    ("memory_list", {"limit": 101}, "'limit' must be an integer from 1 to 100, not 101"),
    ("memory_list", {"offset": -1}, "'offset' must be an integer from 0 to 9007199254740991"),
    # strict types: nothing is converted, and integers are bounded
    (
        "memory_search",
        {"query": "x", "limit": "5"},
        "'limit' must be an integer from 1 to 200, not \"5\" (a string)",
    ),
    ("memory_search", {"query": "x", "limit": 5.0}, "'limit' must be an integer"),
    (
        "memory_search",
        {"query": "x", "limit": True},
        "'limit' must be an integer from 1 to 200, not true",
    ),
    (
        "memory_add",
        {"text": "x", "importance": True},
        "'importance' must be a number from 0.0 to 1.0, not true",
    ),
    ("memory_add", {"text": "x", "importance": "0.5"}, "'importance' must be a number"),
    ("memory_add", {"text": "x", "memory_id": 7}, "'memory_id' must be a string, not 7"),
    ("memory_add", {"text": "x", "metadata": '{"a": 1}'}, "'metadata' must be an object"),
    (
        "memory_list",
        {"include_deleted": "yes"},
        "'include_deleted' must be true or false, not \"yes\" (a string)",
    ),
    ("memory_list", {"include_deleted": 1}, "'include_deleted' must be true or false, not 1"),
    (
        "memory_list",
        {"offset": 2**63},
        "'offset' must be an integer from 0 to 9007199254740991, not 9223372036854775808",
    ),
    (
        "memory_get",
        {"memory_id": "kept", "revision": 2**63},
        "'revision' must be an integer from 1 to 9007199254740991, not 9223372036854775808",
    ),
    ("memory_get", {"memory_id": "kept", "revision": "1"}, "'revision' must be an integer"),
    ("memory_search", {"query": "x", "verbose": "true"}, "'verbose' must be true or false"),
    ("nosuchtool", {}, "nosuchtool"),
    # unknown arguments are refused, never ignored (a typo must not store the default)
    ("memory_add", {"text": "x", "importnce": 0.9}, "unknown argument 'importnce' (did you mean"),
    (
        "memory_search",
        {"query": "x", "k": 3},
        "unknown argument 'k'; memory_search takes query, limit",
    ),
    ("memory_stats", {"verbose": True}, "memory_stats takes no arguments"),
    (
        "memory_update",
        {"memory_id": "kept", "txt": "y"},
        "unknown argument 'txt' (did you mean 'text'",
    ),
]


def test_bad_tool_input_is_a_clear_tool_error_and_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    with rankseam.open_memory(db) as memory:
        memory.add("the kept memory", memory_id="kept")
    before = snapshot(db)

    async def fn(client: Client) -> list[tuple[bool, str]]:
        results = []
        for tool, args, _ in BAD_CALLS:
            results.append(search_text(await client.call_tool(tool, args)))
        # the server still answers normally afterwards
        results.append((False, json.dumps(payload(await client.call_tool("memory_stats", {})))))
        return results

    results = session(db, fn)
    for (tool, args, expected), (is_error, text) in zip(BAD_CALLS, results, strict=False):
        assert is_error, f"{tool}({args}) was not an error: {text}"
        assert expected.lower() in text.lower(), f"{tool}({args}): {text}"
        # in our words: not the validator's own text, no links to its documentation
        assert "pydantic" not in text and "validation error" not in text.lower(), text
        assert "Input should" not in text and "http" not in text, text
    assert json.loads(results[-1][1])["memories"] == 1
    assert snapshot(db) == before


def test_a_bad_config_fails_at_start_with_a_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[search]\nreranker = 'nope'\n")
    out = subprocess.run(
        [RANKSEAM, "mcp", "--db", str(tmp_path / "m.sqlite3"), "--config", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode != 0
    assert "no reranker named 'nope'" in out.stderr
    assert out.stdout == ""


def config_session(tmp_path: Path, toml: str, fn: Callable[[Client], Awaitable[Any]]) -> Any:
    config = tmp_path / "rankseam.toml"
    config.write_text(toml)
    return session(tmp_path / "m.sqlite3", fn, env={"RANKSEAM_CONFIG": str(config)})


def test_by_default_a_client_cannot_choose_a_model_backed_reranker_or_backend_options(
    tmp_path: Path,
) -> None:
    async def fn(client: Client) -> dict[str, Any]:
        await client.call_tool("memory_add", {"text": "a note about lunch", "memory_id": "a"})
        q = {"query": "lunch", "limit": 1}
        return {
            "decision": search_text(
                await client.call_tool("memory_search", {**q, "reranker": "decision"})
            ),
            "listwise": search_text(
                await client.call_tool("memory_search", {**q, "reranker": "listwise"})
            ),
            "backend": search_text(
                await client.call_tool(
                    "memory_search",
                    {**q, "reranker": "mmr", "reranker_options": {"backend": "openai"}},
                )
            ),
            "coarse_option": search_text(
                await client.call_tool("memory_search", {**q, "reranker_options": {"lambda": 0.5}})
            ),
            "mmr": payload(
                await client.call_tool(
                    "memory_search",
                    {**q, "reranker": "mmr", "reranker_options": {"lambda": 0.5}, "verbose": True},
                )
            ),
            "schema": next(
                t for t in (await client.list_tools()).tools if t.name == "memory_search"
            ),
        }

    out = session(tmp_path / "m.sqlite3", fn)
    for key in ("decision", "listwise"):
        is_error, text = out[key]
        assert is_error
        assert f"does not let clients choose the reranker '{key}'" in text, text
        assert "[plugins.mcp] rerankers" in text
    is_error, text = out["backend"]
    assert is_error and "option(s) ['backend'] of the reranker 'mmr'" in text, text
    assert "allowed: ['lambda']" in text
    is_error, text = out["coarse_option"]
    assert is_error and "coarse order" in text, text
    assert out["mmr"]["rerank"]["descriptor"]["lambda"] == 0.5
    assert "'none', 'mmr'" in out["schema"].description


def test_the_operator_chooses_what_clients_may_pick(tmp_path: Path) -> None:
    toml = '[search]\nreranker = "mmr"\n\n[plugins.mcp]\nrerankers = ["none"]\n'

    async def fn(client: Client) -> dict[str, Any]:
        await client.call_tool("memory_add", {"text": "a note about lunch", "memory_id": "a"})
        q = {"query": "lunch", "limit": 1}
        return {
            "mmr": search_text(await client.call_tool("memory_search", {**q, "reranker": "mmr"})),
            "none": payload(await client.call_tool("memory_search", {**q, "reranker": "none"})),
            "default": payload(await client.call_tool("memory_search", q)),
            "default_option": search_text(
                await client.call_tool("memory_search", {**q, "reranker_options": {"lambda": 0.1}})
            ),
        }

    out = config_session(tmp_path, toml, fn)
    assert out["mmr"][0] and "allowed: 'none'" in out["mmr"][1]
    assert out["none"]["rerank"] is None
    # the configured default still runs when the client names no reranker ...
    assert out["default"]["rerank"]["policy_id"] == "rankseam.rerank.mmr.v1"
    # ... but its options are the operator's: this list allows none for it
    assert out["default_option"][0] and "option(s) ['lambda']" in out["default_option"][1]


def test_a_bad_plugins_mcp_table_fails_at_start_with_a_message(tmp_path: Path) -> None:
    for toml, expected in [
        ("[plugins.mcp]\nrerankerz = []\n", "unknown [plugins.mcp] key(s) ['rerankerz']"),
        ("[plugins.mcp]\nrerankers = 'mmr'\n", "rerankers must be a list of names"),
        ('[plugins.mcp]\noptions = { mmr = ["lambda"] }\nrerankers = ["none"]\n', "'mmr'"),
        ("[plugins.mcp]\nmax_message_bytes = 10\n", "max_message_bytes must be an integer"),
        ("plugins = 3\n", "[plugins] must hold one table per plugin"),
    ]:
        config = tmp_path / "bad.toml"
        config.write_text(toml)
        out = subprocess.run(
            [RANKSEAM, "mcp", "--db", str(tmp_path / "m.sqlite3"), "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert out.returncode != 0, toml
        assert expected in out.stderr, (toml, out.stderr)
        assert out.stdout == ""


def test_update_and_list_pages(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    with rankseam.open_memory(db) as memory:
        for i in range(5):
            memory.add(f"note number {i}", memory_id=f"n{i}", importance=0.3)

    async def fn(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {"pages": []}
        out["update"] = payload(
            await client.call_tool(
                "memory_update", {"memory_id": "n1", "text": "note one, revised"}
            )
        )
        await client.call_tool("memory_delete", {"memory_id": "n3"})
        offset: int | None = 0
        while offset is not None:
            page = payload(await client.call_tool("memory_list", {"offset": offset, "limit": 2}))
            out["pages"].append(page)
            offset = page["next_offset"]
        out["all"] = payload(await client.call_tool("memory_list", {"include_deleted": True}))
        out["get"] = payload(await client.call_tool("memory_get", {"memory_id": "n1"}))
        out["old"] = payload(
            await client.call_tool("memory_get", {"memory_id": "n1", "revision": 1})
        )
        return out

    out = session(db, fn)
    assert out["update"]["ref"] == {"namespace": "default", "memory_id": "n1", "revision": 2}
    assert out["get"]["text"] == "note one, revised" and out["get"]["importance"] == 0.3
    assert out["old"]["text"] == "note number 1"
    pages = out["pages"]
    # in the order of each memory's last write: the update moved n1 to the end
    assert [[m["memory_id"] for m in p["memories"]] for p in pages] == [
        ["n0", "n2"],
        ["n4", "n1"],
    ]
    assert [(p["offset"], p["next_offset"]) for p in pages] == [(0, 2), (2, None)]
    assert [m["memory_id"] for m in out["all"]["memories"]] == ["n0", "n2", "n3", "n4", "n1"]
    assert out["all"]["next_offset"] is None


def test_a_missing_store_is_not_created_until_add(tmp_path: Path) -> None:
    db = tmp_path / "typo" / "nested" / "m.sqlite3"  # a mistyped --db
    reads = [
        ("search", {"query": "lunch"}),
        ("get", {"memory_id": "a"}),
        ("list", {}),
        ("stats", {}),
        ("update", {"memory_id": "a", "text": "b"}),
        ("delete", {"memory_id": "a"}),
    ]

    async def fn(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {"tools": {t.name for t in (await client.list_tools()).tools}}
        out["reads"] = [search_text(await client.call_tool(t, a)) for t, a in reads]
        out["created_anything"] = (tmp_path / "typo").exists()
        out["add"] = payload(
            await client.call_tool("memory_add", {"text": "lunch at noon", "memory_id": "a"})
        )
        out["again"] = payload(
            await client.call_tool("memory_add", {"text": "more", "memory_id": "b"})
        )
        out["search"] = payload(await client.call_tool("memory_search", {"query": "lunch"}))
        return out

    out = session(db, fn)
    assert out["tools"] == TOOLS
    for (tool, _), (is_error, text) in zip(reads, out["reads"], strict=True):
        assert is_error, (tool, text)
        assert f"no rankseam store at {db}" in text, (tool, text)
        assert "`add` tool creates it" in text, (tool, text)
    assert out["created_anything"] is False
    assert out["add"]["created_store"] == str(db)
    assert "created_store" not in out["again"]
    assert [h["memory_id"] for h in out["search"]["hits"]][:1] == ["a"]
    assert {m["memory_id"] for m in snapshot(db)} == {"a", "b"}


def test_a_store_created_meanwhile_is_found(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"

    async def fn(client: Client) -> tuple[tuple[bool, str], dict[str, Any]]:
        before = search_text(await client.call_tool("memory_stats", {}))
        with rankseam.open_memory(db) as memory:  # e.g. `rankseam add` in a terminal
            memory.add("written elsewhere", memory_id="w")
        return before, payload(await client.call_tool("memory_stats", {}))

    before, after = session(db, fn)
    assert before[0] and "no rankseam store" in before[1]
    assert after["memories"] == 1


def test_build_server_in_process_around_a_memory_the_caller_owns(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"

    async def calls(server: Any) -> dict[str, Any]:
        async with Client(server) as client:
            return {
                "add": payload(await client.call_tool("memory_add", {"text": "tea at five"})),
                "typo": search_text(await client.call_tool("memory_list", {"limt": 5})),
                "list": payload(await client.call_tool("memory_list", {})),
            }

    with rankseam.open_memory(db) as memory:
        out = asyncio.run(calls(build_server(memory)))
        assert memory.stats()["memories"] == 1  # still open: the caller closes it
    assert "created_store" not in out["add"]
    assert out["typo"][0] and "unknown argument 'limt' (did you mean 'limit'?)" in out["typo"][1]
    assert [m["text"] for m in out["list"]["memories"]] == ["tea at five"]

    fresh = tmp_path / "new" / "m.sqlite3"
    opened: list[bool] = []

    def opener(create: bool) -> rankseam.Memory:
        opened.append(create)
        return rankseam.open_memory(fresh, create=create)

    with rankseam.open_memory(":memory:") as scratch:
        slot = MemorySlot.on_demand(opener, scratch.config)
    try:
        out = asyncio.run(calls(build_server(slot)))
    finally:
        slot.close()
    assert out["add"]["created_store"] == str(fresh)
    assert opened == [False, True]  # looked for it, then created it for add


# What each tool does to its environment, as MCP's annotations say it:
# (readOnlyHint, destructiveHint, idempotentHint); openWorldHint is false for all (one store).
ANNOTATIONS = {
    "memory_search": (True, False, True),
    "memory_get": (True, False, True),
    "memory_list": (True, False, True),
    "memory_stats": (True, False, True),
    "memory_add": (False, False, False),  # without memory_id, each call adds one more
    "memory_update": (False, False, False),  # each call writes a new revision
    "memory_delete": (False, True, True),  # a second delete changes nothing (and says so)
    "memory_history": (True, False, True),
}


def test_tools_carry_annotations_and_say_when_to_call_them(tmp_path: Path) -> None:
    async def listing(client: Client) -> Any:
        return await client.list_tools()

    listed = session(tmp_path / "m.sqlite3", listing)
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == set(ANNOTATIONS)
    for name, (read_only, destructive, idempotent) in ANNOTATIONS.items():
        hints = tools[name].annotations
        assert hints is not None, name
        assert hints.read_only_hint is read_only, name
        assert hints.destructive_hint is destructive, name
        assert hints.idempotent_hint is idempotent, name
        assert hints.open_world_hint is False, name
        assert hints.title, name
        assert "call" in tools[name].description.lower(), (name, tools[name].description)
        assert "{" not in tools[name].description, tools[name].description  # names filled in
    # the descriptions tell a model when: search before answering, add what lasts, delete
    # only on request, list to review rather than to find
    assert "before answering" in tools["memory_search"].description
    assert "worth remembering" in tools["memory_add"].description
    assert "only when the user asks" in tools["memory_delete"].description
    assert "to find something, call memory_search" in tools["memory_list"].description
    assert "find its memory_id with memory_search first" in tools["memory_update"].description


CORPUS = [
    (f"n{i}", f"Note {i}: Dana's birthday dinner is on Friday at the Thai place, table for {i}")
    for i in range(25)
]


def test_answers_are_compact_unless_verbose(tmp_path: Path) -> None:
    """The default answer is the citation and the text, as compact JSON; `verbose: true`
    gives every score, timestamp and hash and the full rerank trace. Sizes printed (-s)."""
    db = tmp_path / "m.sqlite3"
    with rankseam.open_memory(db) as memory:
        for key, text in CORPUS:
            memory.add(text, memory_id=key, metadata={"source": "chat"})
    query = {"query": "birthday dinner thai", "limit": 5, "reranker": "mmr"}

    async def fn(client: Client) -> dict[str, Any]:
        calls = {
            "search": ("memory_search", query),
            "search_verbose": ("memory_search", {**query, "verbose": True}),
            "list": ("memory_list", {}),
            "list_verbose": ("memory_list", {"verbose": True}),
        }
        out = {}
        for key, (tool, args) in calls.items():
            result = await client.call_tool(tool, args)
            assert not result.is_error, result.content[0].text
            assert result.structured_content is None and len(result.content) == 1
            out[key] = result.content[0].text
        return out

    out = session(db, fn)
    sizes = {key: len(text.encode()) for key, text in out.items()}
    print(f"\n  answer sizes (bytes of the text block): {sizes}")
    search, full = json.loads(out["search"]), json.loads(out["search_verbose"])
    assert search["namespace"] == "default" and search["rerank"] == {
        "policy_id": "rankseam.rerank.mmr.v1",
        "status": "ok",
    }
    assert [set(h) for h in search["hits"]] == [
        {"memory_id", "revision", "score", "text", "metadata"}
    ] * 5
    assert [h["memory_id"] for h in search["hits"]] == [h["memory_id"] for h in full["hits"]]
    assert full["rerank"]["selected_ranks"] and full["rerank"]["records"]
    assert {"channel_scores", "content_hash", "created_at"} <= set(full["hits"][0])
    listed, full_list = json.loads(out["list"]), json.loads(out["list_verbose"])
    assert [set(m) for m in listed["memories"]] == [
        {"memory_id", "revision", "text", "metadata"}
    ] * 20
    assert listed["next_offset"] == full_list["next_offset"] == 20
    assert {"importance", "created_at", "content_hash"} <= set(full_list["memories"][0])
    # compact JSON, no indentation; a third of the verbose answer or less
    assert "\n" not in out["search"] and '": ' not in out["search"]
    assert sizes["search"] * 3 <= sizes["search_verbose"]
    assert sizes["list"] * 2 <= sizes["list_verbose"]


def test_tool_prefix_and_the_old_names(tmp_path: Path) -> None:
    """The 0.1 names still work on tools/call (not listed); `--tool-prefix ""` lists them
    again; `[plugins.mcp] tool_prefix` chooses another prefix."""

    async def old_names(client: Client) -> Any:
        added = await client.call_tool("add", {"text": "tea at five", "memory_id": "t"})
        return added, await client.call_tool("search", {"query": "tea"})

    added, found = session(tmp_path / "a.sqlite3", old_names)
    assert not added.is_error and not found.is_error
    assert [h["memory_id"] for h in json.loads(found.content[0].text)["hits"]] == ["t"]

    async def names(client: Client) -> set[str]:
        return {t.name for t in (await client.list_tools()).tools}

    assert session(tmp_path / "b.sqlite3", names, args=["--tool-prefix", ""]) == {
        "add",
        "search",
        "get",
        "update",
        "list",
        "delete",
        "stats",
        "history",
    }
    configured = config_session(tmp_path, '[plugins.mcp]\ntool_prefix = "work_"\n', names)
    assert configured == {f"work_{t}" for t in ("add", "search", "get", "update", "list")} | {
        "work_delete",
        "work_stats",
        "work_history",
    }
    bad = subprocess.run(
        [RANKSEAM, "mcp", "--db", str(tmp_path / "c.sqlite3"), "--tool-prefix", "my tools"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert bad.returncode != 0 and "--tool-prefix must be at most 64" in bad.stderr
