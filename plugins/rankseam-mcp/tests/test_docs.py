"""The client configurations of docs/mcp.md work as written.

Each JSON block of the page's "Claude Desktop" and "Cursor" sections is parsed; its command
must be an absolute path, which (with this test's own virtualenv's `rankseam` put in place of
the page's placeholder) must resolve to an executable file; the server is then started from it
exactly as the client would (the command and its args, the block's `env`, and a PATH that does
not hold the virtualenv, as a desktop client's does not), and the official MCP client completes
a handshake and a tool call. The URL configuration is checked against a server started with the
page's command line (on a free port: the documented 8765 may be taken on a test machine).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rankseam_mcp.http_transport import DEFAULT_HOST, DEFAULT_PORT, MCP_PATH

PAGE = Path(__file__).resolve().parents[3] / "docs" / "mcp.md"
RANKSEAM = str(Path(sys.executable).parent / "rankseam")
COMMAND_PLACEHOLDER = "/ABSOLUTE/PATH/TO/venv/bin/rankseam"
DB_PLACEHOLDER = "/ABSOLUTE/PATH/TO/memories.sqlite3"

sys.path.insert(0, str(Path(__file__).parent))
from test_http import http_server  # noqa: E402


def sections() -> dict[str, str]:
    """The page's text under each ``##``/``###`` heading."""
    if not PAGE.is_file():
        pytest.skip(f"{PAGE} is not here (the plugin is tested outside its repository)")
    parts = re.split(r"^(#{2,3} .+)$", PAGE.read_text(encoding="utf-8"), flags=re.M)
    return {parts[i].lstrip("# ").strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S)


def configurations() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for title, text in sections().items():
        if title.startswith(("Claude Desktop", "Cursor")):
            for block in blocks(text, "json"):
                for name, entry in json.loads(block)["mcpServers"].items():
                    found.append((f"{title}: {name}", entry))
    return found


def test_the_page_documents_both_clients() -> None:
    titles = [t.split(":")[0] for t, _ in configurations()]
    assert titles.count("Claude Desktop") == 1
    assert titles.count("Cursor") == 1
    assert titles.count("Cursor, over streamable HTTP") == 1


def substituted(value: str, db: Path) -> str:
    return value.replace(COMMAND_PLACEHOLDER, RANKSEAM).replace(DB_PLACEHOLDER, str(db))


@pytest.mark.parametrize(
    "title", [t for t, e in configurations() if "command" in e] if PAGE.is_file() else []
)
def test_a_documented_command_starts_the_server(title: str, tmp_path: Path) -> None:
    entry = dict(configurations())[title]
    command = entry["command"]
    # absolute as written: a desktop client neither activates the venv nor has its PATH
    assert os.path.isabs(command), command
    assert command == COMMAND_PLACEHOLDER, "the page's placeholder is what users replace"
    resolved = substituted(command, tmp_path / "m.sqlite3")
    assert os.path.isabs(resolved) and os.path.isfile(resolved), resolved
    assert os.access(resolved, os.X_OK), resolved
    args = [substituted(a, tmp_path / "m.sqlite3") for a in entry["args"]]
    assert all(os.path.isabs(a) for a in args if a.endswith(".sqlite3")), args
    env = {**os.environ, **entry.get("env", {}), "PATH": os.defpath}
    params = StdioServerParameters(command=resolved, args=args, env=env)

    async def handshake() -> tuple[Any, set[str], Any]:
        async with Client(params, read_timeout_seconds=60) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            added = await client.call_tool("memory_add", {"text": "documented", "memory_id": "d"})
            return (client.server_info, client.instructions), tools, added

    (server_info, instructions), tools, added = anyio.run(handshake)
    assert server_info is not None and server_info.name == "rankseam"
    assert instructions is not None and "memory_search" in instructions
    assert tools == {f"memory_{t}" for t in ("search", "add", "get", "update", "list")} | {
        "memory_delete",
        "memory_stats",
        "memory_history",
    }
    assert not added.is_error, added.content[0].text
    assert json.loads(added.content[0].text)["created_store"] == str(tmp_path / "m.sqlite3")


def test_the_documented_url_reaches_the_documented_command(tmp_path: Path) -> None:
    (entry,) = [e for t, e in configurations() if "url" in e]
    assert entry["url"] == f"http://{DEFAULT_HOST}:{DEFAULT_PORT}{MCP_PATH}"
    (command_line,) = [
        line
        for block in blocks(sections()["Cursor, over streamable HTTP"], "bash")
        for line in block.splitlines()
        if line.startswith(COMMAND_PLACEHOLDER)
    ]
    words = substituted(command_line, tmp_path / "m.sqlite3").split()
    assert words[:2] == [RANKSEAM, "mcp"] and "--transport" in words, words

    async def call(url: str) -> Any:
        async with Client(url, read_timeout_seconds=60) as client:
            return await client.call_tool("memory_add", {"text": "over http"})

    db = Path(words[words.index("--db") + 1])
    extra = [w for w in words[2:] if w not in ("--db", str(db))]
    with http_server(db, *[w for w in extra if w not in ("--transport", "http")]) as served:
        port = served.url.rsplit(":", 1)[1].split("/")[0]
        documented = entry["url"].replace(f":{DEFAULT_PORT}/", f":{port}/")
        assert served.url == documented
        added = anyio.run(call, documented)
    assert not added.is_error, added.content[0].text
