"""The MCP server: seven tools over one rankseam ``Memory``: ``add``, ``search``, ``get``,
``update``, ``list``, ``delete``, ``stats``.

Every tool validates its input before it touches the store. Bad input (an unknown argument, a
wrong type, an empty text, an unknown reranker, a memory that does not exist) is answered with
a tool error (``isError``) whose text says what to fix, and nothing is changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from itertools import islice
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field
from pydantic import ValidationError as SchemaError

from rankseam import Memory, __version__
from rankseam.errors import RankseamError
from rankseam.plugin import search_arguments
from rankseam.types import MemoryRef
from rankseam_mcp import __version__ as plugin_version
from rankseam_mcp.arguments import explain_invalid, refuse_unknown
from rankseam_mcp.policy import ToolPolicy
from rankseam_mcp.slot import MemorySlot

__all__ = ["DEFAULT_PAGE", "MAX_PAGE", "build_server"]

T = TypeVar("T")

_WRITES = frozenset({"add", "update", "delete"})

#: The ``list`` tool's page size: its default, and the most one call returns.
DEFAULT_PAGE, MAX_PAGE = 20, 100

INSTRUCTIONS = """\
A long-term memory. `add` stores a memory (give `memory_id` to make adding idempotent per id:
adding an id that holds something else is refused; `update` writes a new revision of it).
`search` finds memories for a question and returns each hit's exact citation (namespace,
memory_id, revision); `reranker` picks one of the rerank policies this server allows (e.g.
"mmr" for diverse results) and the result's `rerank` trace says what it did.
`get` reads a memory (or an exact revision), `list` pages through the memories in write order,
`delete` removes one from search, `stats` counts.
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


class _Server(MCPServer):
    """The SDK's server, with its tools' arguments checked in our words (unknown arguments
    refused; schema errors explained from the published schema) and each input schema
    closed (``additionalProperties: false``), so clients see what is refused."""

    _schemas: dict[str, dict[str, Any]] | None = None

    async def list_tools(self) -> Any:
        tools = await super().list_tools()
        for tool in tools:
            tool.input_schema = {**tool.input_schema, "additionalProperties": False}
        return tools

    async def _schema(self, name: str) -> dict[str, Any]:
        if self._schemas is None:
            self._schemas = {t.name: t.input_schema for t in await self.list_tools()}
        schema = self._schemas.get(name)
        if schema is None:
            raise ToolError(
                f"no tool named {name!r}; this server's tools are {', '.join(self._schemas)}"
            )
        return schema

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        schema = await self._schema(name)
        writes = name in _WRITES
        why = refuse_unknown(name, arguments, schema, writes=writes)
        if why is not None:
            raise ToolError(why)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, SchemaError):
                errors = exc.__cause__.errors(include_url=False)
                raise ToolError(explain_invalid(name, errors, schema, writes=writes)) from None
            raise


def _page(memory: Memory, namespace: str | None, offset: int, limit: int, deleted: bool) -> Any:
    """``limit`` memories from ``offset`` on, and whether more follow."""
    memories: Iterator[Any] = memory.list(namespace, include_deleted=deleted)
    try:
        page = [m.to_dict() for m in islice(memories, offset, offset + limit + 1)]
    finally:
        close = getattr(memories, "close", None)
        if callable(close):
            close()
    return page[:limit], len(page) > limit


def build_server(
    memory: Memory | MemorySlot, *, name: str = "rankseam", policy: ToolPolicy | None = None
) -> MCPServer:
    """An MCP server whose tools read and write ``memory`` (the caller owns and closes it).

    ``memory`` is an open :class:`~rankseam.Memory`, or a
    :class:`~rankseam_mcp.slot.MemorySlot` that opens its store on first use (what
    ``rankseam mcp`` gives, so that it never creates a store before ``add`` writes).
    ``policy`` says which rerankers and options the ``search`` tool accepts; by default the
    memory's ``[plugins.mcp]`` configuration, else :class:`~rankseam_mcp.policy.ToolPolicy`'s
    defaults (``"none"`` and ``"mmr"`` with its ``lambda``: no model-backed reranker).
    """
    slot = memory if isinstance(memory, MemorySlot) else MemorySlot.given(memory)
    if policy is None:
        policy = ToolPolicy.from_mapping(slot.config.plugins.get("mcp", {}))
    allowed = ", ".join(repr(r) for r in policy.rerankers) or "none"
    server = _Server(
        name=name,
        version=f"{plugin_version} (rankseam {__version__})",
        instructions=INSTRUCTIONS,
        log_level="WARNING",  # stderr stays quiet; tool errors go to the client
    )

    @server.tool(
        description=(
            "Store one memory. Returns its citation (namespace, memory_id, revision). The "
            "first add creates the store when it does not exist yet (`created_store` says where)."
        )
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
        opened, created = await _call(slot.writing)
        result = await _call(
            opened.add,
            text,
            memory_id=memory_id,
            namespace=namespace,
            importance=importance,
            metadata=metadata,
        )
        out: dict[str, Any] = {
            "stored": result.stored,
            "ref": None if result.ref is None else result.ref.to_dict(),
        }
        if created:
            out["created_store"] = opened.path
        return out

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
        opened = await _call(slot.reading)
        try:
            policy.check(reranker, reranker_options, opened.config.search.reranker)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        kwargs = search_arguments(
            namespace=namespace, reranker=reranker, reranker_options=reranker_options
        )
        result = await _guard(opened.asearch(query, limit, **kwargs))
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
        opened = await _call(slot.reading)
        if revision is None:
            stored = await _call(opened.get, memory_id, namespace=namespace)
        else:
            ns = namespace if namespace is not None else opened.config.namespace
            try:
                ref = MemoryRef(ns, memory_id, revision)
            except (TypeError, ValueError) as exc:
                raise ToolError(str(exc)) from None
            stored = await _call(opened.get, ref)
        return stored.to_dict()

    @server.tool(
        description=(
            "Write a new revision of an existing memory (the previous revision stays readable "
            "by get with its revision). `importance` and `metadata` default to the previous "
            "revision's. Returns the new citation."
        )
    )
    async def update(
        memory_id: Annotated[str, Field(min_length=1)],
        text: Annotated[str, Field(min_length=1, description="The new text.")],
        namespace: str | None = None,
        importance: Annotated[float | None, Field(ge=0.0, le=1.0)] = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        opened = await _call(slot.reading)
        ref = await _call(
            opened.update,
            memory_id,
            text,
            namespace=namespace,
            importance=importance,
            metadata=metadata,
        )
        return {"ref": ref.to_dict()}

    @server.tool(
        name="list",
        description=(
            "List a namespace's memories (current revisions), oldest last write first, one "
            f"page a call: `offset` (default 0) and `limit` (1..{MAX_PAGE}, default "
            f"{DEFAULT_PAGE}). `next_offset` is the offset of the next page, null after the "
            "last one. An update or delete between pages moves a memory (to the end, or out)."
        ),
    )
    async def list_memories(
        namespace: str | None = None,
        offset: Annotated[int, Field(ge=0)] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
        include_deleted: Annotated[
            bool, Field(description="Also list deleted memories (default false).")
        ] = False,
    ) -> dict[str, Any]:
        opened = await _call(slot.reading)
        page, more = await _call(_page, opened, namespace, offset, limit, include_deleted)
        return {
            "memories": page,
            "offset": offset,
            "next_offset": offset + len(page) if more else None,
        }

    @server.tool(description="Delete a memory from search (its revisions stay readable by get).")
    async def delete(
        memory_id: Annotated[str, Field(min_length=1)], namespace: str | None = None
    ) -> dict[str, Any]:
        opened = await _call(slot.reading)
        ref = await _call(opened.delete, memory_id, namespace=namespace)
        return {"deleted": ref.to_dict()}

    @server.tool(description="Counts: memories, revisions, namespaces, embedder, vector coverage.")
    async def stats() -> dict[str, Any]:
        opened = await _call(slot.reading)
        return await _call(opened.stats)

    return server
