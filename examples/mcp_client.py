"""The MCP SDK's own client starts `rankseam mcp` over stdio and calls its tools."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main(folder: Path) -> None:
    command = shutil.which("rankseam") or str(Path(sys.executable).with_name("rankseam"))
    server = StdioServerParameters(
        command=command, args=["mcp", "--db", str(folder / "mcp.sqlite3")]
    )
    async with Client(server) as client:
        print("tools:", sorted(tool.name for tool in (await client.list_tools()).tools))
        await client.call_tool(
            "memory_add", {"text": "Priya prefers window seats", "memory_id": "seat"}
        )
        found = await client.call_tool(
            "memory_search", {"query": "which seat does priya like?", "reranker": "mmr"}
        )
        answer = json.loads(found.content[0].text)
        print("hit:", answer["hits"][0]["memory_id"], "| rerank:", answer["rerank"]["status"])
        bad = await client.call_tool("memory_add", {"text": ""})
        print("bad input is a tool error:", bad.is_error)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())))
