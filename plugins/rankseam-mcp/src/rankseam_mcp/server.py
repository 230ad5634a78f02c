"""The MCP server: five tools over one rankseam ``Memory``.

Every tool validates its input before it touches the store. Bad input (a wrong type, an
empty text, an unknown reranker, a memory that does not exist) is answered with a tool error
(``isError``) whose text says what to fix, and nothing is changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from rankseam import Memory, __version__
from rankseam.errors import RankseamError
from rankseam.plugin import search_arguments
from rankseam.types import MemoryRef
from rankseam_mcp import __version__ as plugin_version
from rankseam_mcp.policy import ToolPolicy

__all__ = ["build_server"]

T = TypeVar("T")

INSTRUCTIONS = """\
A long-term memory. `add` stores a memory (give `memory_id` to make adding idempotent per id:
adding an id that exists is refused, use a new id). `search` finds memories for a question and
returns each hit's exact citation (namespace, memory_id, revision); `reranker` picks one of the
rerank policies this server allows (e.g. "mmr" for diverse results) and the result's `rerank`
trace says what it did.
`get` reads a memory (or an exact revision), `delete` removes one from search, `stats` counts.
"""


async def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking Memory call in a worker thread; rankseam errors become tool errors."""
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except RankseamError as exc:
        raise ToolError(str(exc)) from None


async def _guard(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return await coro
    except RankseamError as exc:
        raise ToolError(str(exc)) from None


def build_server(
    memory: Memory, *, name: str = "rankseam", policy: ToolPolicy | None = None
) -> MCPServer:
    """An MCP server whose tools read and write ``memory`` (the caller owns and closes it).

    ``policy`` says which rerankers and options the ``search`` tool accepts; by default the
    memory's ``[plugins.mcp]`` configuration, else :class:`~rankseam_mcp.policy.ToolPolicy`'s
    defaults (``"none"`` and ``"mmr"`` with its ``lambda``: no model-backed reranker).
    """
    if policy is None:
        policy = ToolPolicy.from_mapping(memory.config.plugins.get("mcp", {}))
    allowed = ", ".join(repr(r) for r in policy.rerankers) or "none"
    server = MCPServer(
        name=name,
        version=f"{plugin_version} (rankseam {__version__})",
        instructions=INSTRUCTIONS,
        log_level="WARNING",  # stderr stays quiet; tool errors go to the client
    )

    @server.tool(
        description="Store one memory. Returns its citation (namespace, memory_id, revision)."
    )
    async def add(
        text: Annotated[str, Field(min_length=1, description="The memory's text.")],
        memory_id: Annotated[
            str | None, Field(description="Your id for it (default: a new random id).")
        ] = None,
        namespace: Annotated[str | None, Field(description="Default: the server's.")] = None,
        importance: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        result = await _call(
            memory.add,
            text,
            memory_id=memory_id,
            namespace=namespace,
            importance=importance,
            metadata=metadata,
        )
        return {
            "stored": result.stored,
            "ref": None if result.ref is None else result.ref.to_dict(),
        }

    @server.tool(
        description=(
            "Search memories for a query. `reranker` chooses a rerank policy by name (omit it "
            f"for the configured default; this server allows {allowed}; 'none' is the coarse "
            "order) and `reranker_options` its allowed options; the `rerank` trace reports its "
            "policy id, status, selected ranks, usage and latency."
        )
    )
    async def search(
        query: Annotated[str, Field(min_length=1)],
        limit: Annotated[int, Field(ge=1, le=200)] = 5,
        namespace: str | None = None,
        reranker: str | None = None,
        reranker_options: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        try:
            policy.check(reranker, reranker_options, memory.config.search.reranker)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        kwargs = search_arguments(
            namespace=namespace, reranker=reranker, reranker_options=reranker_options
        )
        result = await _guard(memory.asearch(query, limit, **kwargs))
        trace = result.trace
        return {
            "hits": [hit.to_dict() for hit in result.hits],
            "rerank": None if trace.rerank is None else trace.rerank.to_dict(),
            "latency_ms": round(trace.latency_ms, 3),
        }

    @server.tool(
        description="Read a memory: its current revision, or exactly `revision` when given."
    )
    async def get(
        memory_id: Annotated[str, Field(min_length=1)],
        namespace: str | None = None,
        revision: Annotated[int | None, Field(ge=1)] = None,
    ) -> dict[str, Any]:
        if revision is None:
            stored = await _call(memory.get, memory_id, namespace=namespace)
        else:
            ns = namespace if namespace is not None else memory.config.namespace
            try:
                ref = MemoryRef(ns, memory_id, revision)
            except (TypeError, ValueError) as exc:
                raise ToolError(str(exc)) from None
            stored = await _call(memory.get, ref)
        return stored.to_dict()

    @server.tool(description="Delete a memory from search (its revisions stay readable by get).")
    async def delete(
        memory_id: Annotated[str, Field(min_length=1)], namespace: str | None = None
    ) -> dict[str, Any]:
        ref = await _call(memory.delete, memory_id, namespace=namespace)
        return {"deleted": ref.to_dict()}

    @server.tool(description="Counts: memories, revisions, namespaces, embedder, vector coverage.")
    async def stats() -> dict[str, Any]:
        return await _call(memory.stats)

    return server
