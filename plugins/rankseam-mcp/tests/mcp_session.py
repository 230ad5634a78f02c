"""The tests' MCP client: the MCP SDK's own client starts `rankseam mcp` over stdio against a
real store; and what a tool's answer holds. A plain helper module the test files import."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

#: The `rankseam` command of the interpreter running the tests.
RANKSEAM = str(Path(sys.executable).parent / "rankseam")


def session(
    db: Path,
    fn: Callable[[Client], Awaitable[Any]],
    env: dict[str, str] | None = None,
    args: Sequence[str] = (),
) -> Any:
    """What ``fn`` returns, given a client of `rankseam mcp --db DB ARGS...` (the environment
    with ``env`` over it)."""
    params = StdioServerParameters(
        command=RANKSEAM,
        args=["mcp", "--db", str(db), *args],
        env={**os.environ, **(env or {})},
    )

    async def main() -> Any:
        async with Client(params, read_timeout_seconds=60) as client:
            return await fn(client)

    return asyncio.run(main())


def call_tools(
    db: Path, calls: Sequence[tuple[str, dict[str, Any]]], env: dict[str, str] | None = None
) -> list[Any]:
    """The result of each ``(tool, arguments)`` call, in order, in one session."""

    async def fn(client: Client) -> list[Any]:
        return [await client.call_tool(name, arguments) for name, arguments in calls]

    return session(db, fn, env)  # type: ignore[no-any-return]


def payload(result: Any) -> dict[str, Any]:
    """A successful call's answer (its structured content, else its one JSON text block)."""
    assert not result.is_error, result.content[0].text
    if result.structured_content is not None:
        return result.structured_content  # type: ignore[no-any-return]
    return json.loads(result.content[0].text)  # type: ignore[no-any-return]


def search_text(result: Any) -> tuple[bool, str]:
    """Whether a call failed, and its text."""
    return result.is_error, result.content[0].text
