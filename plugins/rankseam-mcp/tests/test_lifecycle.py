"""memory_history, memory_forget and memory_reset through the MCP SDK's own client against
`rankseam mcp` over stdio: the history is always served (read-only); the hard deletes carry
destructiveHint and are served only when [plugins.mcp] destructive_tools names them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_session import payload, search_text, session

import rankseam
from rankseam.errors import ConfigurationError
from rankseam_mcp.policy import ToolPolicy


def _store(db: Path) -> None:
    with rankseam.open_memory(db) as memory:
        memory.add("I live in Lyon", memory_id="home", metadata={"kind": "place"})
        memory.update("home", "I moved to Nantes")
        memory.add("the cat is called Miso", memory_id="cat")
        memory.add("work notes", memory_id="w", namespace="work")


def _config(tmp_path: Path, tools: list[str]) -> Path:
    path = tmp_path / "rankseam.toml"
    listed = ", ".join(f'"{t}"' for t in tools)
    path.write_text(f"[plugins.mcp]\ndestructive_tools = [{listed}]\n")
    return path


def test_history_is_served_and_the_hard_deletes_are_off_by_default(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    _store(db)

    async def fn(client: Client) -> Any:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        history = payload(await client.call_tool("memory_history", {"memory_id": "home"}))
        forget = search_text(await client.call_tool("memory_forget", {"memory_id": "home"}))
        reset = search_text(
            await client.call_tool("memory_reset", {"namespace": "default", "confirm": True})
        )
        missing = search_text(await client.call_tool("memory_history", {"memory_id": "nope"}))
        return tools, history, forget, reset, missing

    tools, history, forget, reset, missing = session(db, fn)
    assert "memory_forget" not in tools and "memory_reset" not in tools
    hints = tools["memory_history"].annotations
    assert hints.read_only_hint is True and hints.destructive_hint is False
    assert history["memory_id"] == "home" and history["deleted"] is False
    assert [(r["revision"], r["text"]) for r in history["revisions"]] == [
        (1, "I live in Lyon"),
        (2, "I moved to Nantes"),
    ]
    assert history["revisions"][0]["metadata"] == {"kind": "place"}
    for is_error, text in (forget, reset):
        assert is_error and "destructive_tools" in text, text
        assert "does not offer" in text
    assert missing[0] and "no memory 'nope'" in missing[1]
    with rankseam.open_memory(db) as memory:  # nothing was erased
        assert len(memory.history("home")) == 2


def test_the_allowed_hard_deletes_erase_and_say_so(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    _store(db)
    config = _config(tmp_path, ["forget", "reset"])

    async def fn(client: Client) -> Any:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        out: dict[str, Any] = {"tools": tools}
        out["forget"] = payload(await client.call_tool("memory_forget", {"memory_id": "home"}))
        out["after"] = search_text(await client.call_tool("memory_get", {"memory_id": "home"}))
        out["unconfirmed"] = search_text(
            await client.call_tool("memory_reset", {"namespace": "work"})
        )
        out["loose"] = search_text(
            await client.call_tool("memory_reset", {"namespace": "work", "confirm": "true"})
        )
        out["reset"] = payload(
            await client.call_tool("memory_reset", {"namespace": "work", "confirm": True})
        )
        return out

    out = session(db, fn, env={"RANKSEAM_CONFIG": str(config)})
    for name in ("memory_forget", "memory_reset"):
        hints = out["tools"][name].annotations
        assert hints.destructive_hint is True and hints.read_only_hint is False, name
        assert "cannot be undone" in out["tools"][name].description
    assert out["forget"]["forgotten"]["revisions"] == 2
    assert out["after"][0] and "was forgotten" in out["after"][1]
    assert out["unconfirmed"][0] and "confirm: true" in out["unconfirmed"][1]
    assert out["loose"][0]  # a string is not true: strict types
    assert out["reset"]["reset"]["memories"] == 1
    with rankseam.open_memory(db) as memory:
        assert memory.namespaces() == ["default"]
        assert [m.ref.memory_id for m in memory.list()] == ["cat"]


def test_only_one_hard_delete_may_be_allowed_and_names_are_checked(tmp_path: Path) -> None:
    assert ToolPolicy.from_mapping({"destructive_tools": ["forget"]}).destructive_tools == (
        "forget",
    )
    assert ToolPolicy.from_mapping({}).destructive_tools == ()
    with pytest.raises(ConfigurationError, match="destructive_tools names \\['delete'\\]"):
        ToolPolicy.from_mapping({"destructive_tools": ["delete"]})
    with pytest.raises(ConfigurationError, match="list of names"):
        ToolPolicy.from_mapping({"destructive_tools": "forget"})
    db = tmp_path / "m.sqlite3"
    _store(db)
    config = _config(tmp_path, ["forget"])

    async def fn(client: Client) -> Any:
        return {t.name for t in (await client.list_tools()).tools}

    tools = session(db, fn, env={"RANKSEAM_CONFIG": str(config)})
    assert "memory_forget" in tools and "memory_reset" not in tools
