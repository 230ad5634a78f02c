"""The MCP server: tools over one rankseam ``Memory``, named ``memory_search``,
``memory_add``, ``memory_get``, ``memory_update``, ``memory_list``, ``memory_delete``,
``memory_stats`` and ``memory_history``, and the hard deletes ``memory_forget`` and
``memory_reset`` where the operator allows them (:mod:`rankseam_mcp.lifecycle`). The prefix
is ``[plugins.mcp] tool_prefix``; ``""`` gives the bare names of rankseam-mcp 0.1, which are
also still accepted on ``tools/call``.

Every tool validates its input before it touches the store, strictly (no value is converted:
``"5"`` is not an integer). Bad input (an unknown argument, a wrong type, an empty text, an
unknown reranker, a memory that does not exist) is answered with a tool error (``isError``)
whose text says what to fix, and nothing is changed.

Each answer is one text block of compact JSON. ``memory_search`` and ``memory_list`` answer
the essentials by default (the citation and the text); ``verbose: true`` adds every score,
timestamp and hash, and the full rerank trace.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Iterator, Mapping
from itertools import islice
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from rankseam import Memory, __version__
from rankseam.errors import RankseamError
from rankseam.plugin.adapters import search_arguments
from rankseam.types import MemoryRef
from rankseam_mcp import __version__ as plugin_version
from rankseam_mcp.arguments import check_arguments, refuse_unknown
from rankseam_mcp.compact import compact_hit, compact_memory, compact_rerank
from rankseam_mcp.fields import DerivedFrom, MemoryId, Namespace, Position, Thread
from rankseam_mcp.filtering import FILTERING, MinScore, Since, ThreadScope, Until, Where, scope
from rankseam_mcp.kinds import DELETES, READS, WRITES, ToolKind
from rankseam_mcp.lifecycle import LIFECYCLE_TOOLS, serve_lifecycle, unserved
from rankseam_mcp.policy import ToolPolicy, check_tool_prefix
from rankseam_mcp.slot import MemorySlot

__all__ = ["DEFAULT_PAGE", "MAX_INT", "MAX_PAGE", "TOOLS", "build_server", "tool_names"]

T = TypeVar("T")

log = logging.getLogger("rankseam_mcp")

#: The tools, by their base names (each is served as ``tool_prefix + name``).
TOOLS = ("search", "add", "get", "update", "list", "delete", "stats", *LIFECYCLE_TOOLS)
_WRITES = frozenset({"add", "update", "delete"})

#: The ``list`` tool's page size: its default, and the most one call returns.
DEFAULT_PAGE, MAX_PAGE = 20, 100
#: The largest revision and offset accepted: the largest integer every JSON client reads
#: exactly (2**53 - 1); a store holds fewer.
MAX_INT = 2**53 - 1


def tool_names(prefix: str) -> dict[str, str]:
    """Each tool's base name and the name it is served under."""
    return {base: f"{prefix}{base}" for base in TOOLS}


def _instructions(names: Mapping[str, str]) -> str:
    n = names
    return f"""\
The user's long-term memory, kept across conversations. Call `{n["search"]}` before answering
anything that may depend on what the user told you before (preferences, people, plans,
decisions, facts about their work); cite hits by memory_id. Call `{n["add"]}` when the user
states something lasting worth remembering or asks you to remember it (one self-contained fact
per call); `{n["update"]}` when a stored fact changed; `{n["delete"]}` only when the user asks
to forget something. `{n["get"]}` reads one memory in full, `{n["history"]}` every revision of
one, `{n["list"]}` pages through all of them (for review, not to find facts), `{n["stats"]}`
describes the store.
"""


def _compact_json(data: Any) -> CallToolResult:
    """One text block of compact JSON (no indentation, non-ASCII text kept as is)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return CallToolResult(content=[TextContent(type="text", text=text)])


async def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking Memory call in a worker thread; rankseam errors become tool errors."""
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except RankseamError as exc:
        raise ToolError(str(exc)) from None


def _on_memory(slot: MemorySlot) -> Callable[..., Coroutine[Any, Any, Any]]:
    """``on_memory(Memory.method, *args, **kwargs)``: the ``Memory`` method run on the
    slot's memory (opened for reading: the store must exist) as :func:`_call` runs it."""

    async def on_memory(method: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        opened = await _call(slot.reading)
        return await _call(method, opened, *args, **kwargs)

    return on_memory


async def _guard(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return await coro
    except RankseamError as exc:
        raise ToolError(str(exc)) from None


class _Server(MCPServer):
    """The SDK's server, with its tools' arguments checked in our words and strictly (unknown
    arguments refused; every value of the type and range its published schema says, nothing
    converted) and each input schema closed (``additionalProperties: false``), so clients
    see what is refused. The tool functions are called directly with the checked arguments
    (the SDK's own validation converts values, e.g. a string ``"null"`` to null)."""

    _schemas: dict[str, dict[str, Any]] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handlers: dict[str, Callable[..., Coroutine[Any, Any, Any]]] = {}
        self.writes: set[str] = set()
        self.aliases: dict[str, str] = {}  # the 0.1 names, still accepted on tools/call
        self.refused: dict[str, str] = {}  # tools the policy leaves out, and why
        self._warned: set[str] = set()

    def serve(
        self, name: str, title: str, kind: ToolKind, *, description: str
    ) -> Callable[[Callable[..., Coroutine[Any, Any, Any]]], Any]:
        """Register an async tool function under ``name`` (its schema from its signature),
        titled ``title``, with ``kind``'s hints (:mod:`rankseam_mcp.kinds`)."""

        def decorator(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Any:
            self.tool(
                name=name,
                title=title,
                description=description,
                annotations=kind.hints(title),
                structured_output=False,
            )(fn)
            self.handlers[name] = fn
            if kind.writes:
                self.writes.add(name)
            return fn

        return decorator

    async def list_tools(self) -> Any:
        tools = await super().list_tools()
        for tool in tools:
            tool.input_schema = {**tool.input_schema, "additionalProperties": False}
        return tools

    async def _schema(self, name: str) -> dict[str, Any]:
        if self._schemas is None:
            self._schemas = {t.name: t.input_schema for t in await self.list_tools()}
        schema = self._schemas.get(name)
        if schema is None and name in self.refused:
            raise ToolError(self.refused[name])
        if schema is None:
            raise ToolError(
                f"no tool named {name!r}; this server's tools are {', '.join(self._schemas)}"
            )
        return schema

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if name not in self.handlers and name in self.aliases:
            if name not in self._warned:
                self._warned.add(name)
                log.warning(
                    "a client called the tool %r by its rankseam-mcp 0.1 name; it is now %r "
                    '(set [plugins.mcp] tool_prefix = "" to keep the old names)',
                    name,
                    self.aliases[name],
                )
            name = self.aliases[name]
        schema = await self._schema(name)
        writes = name in self.writes
        why = refuse_unknown(name, arguments, schema, writes=writes) or check_arguments(
            name, arguments, schema, writes=writes
        )
        if why is not None:
            raise ToolError(why)
        return _compact_json(await self.handlers[name](**arguments))


def _page(
    memory: Memory,
    namespace: str | None,
    offset: int,
    limit: int,
    deleted: bool,
    filters: Mapping[str, Any],
) -> Any:
    """``limit`` memories from ``offset`` on (those that pass ``filters``, ``Memory.list``'s
    filter arguments), and whether more follow."""
    memories: Iterator[Any] = memory.list(namespace, include_deleted=deleted, **filters)
    try:
        page = [m.to_dict() for m in islice(memories, offset, offset + limit + 1)]
    finally:
        close = getattr(memories, "close", None)
        if callable(close):
            close()
    return page[:limit], len(page) > limit


def build_server(
    memory: Memory | MemorySlot,
    *,
    name: str = "rankseam",
    policy: ToolPolicy | None = None,
    tool_prefix: str | None = None,
) -> MCPServer:
    """An MCP server whose tools read and write ``memory`` (the caller owns and closes it).

    ``memory`` is an open :class:`~rankseam.Memory`, or a
    :class:`~rankseam_mcp.slot.MemorySlot` that opens its store on first use (what
    ``rankseam mcp`` gives, so that it never creates a store before ``add`` writes).
    ``policy`` says which rerankers and options the search tool accepts and the tools' name
    prefix; by default the memory's ``[plugins.mcp]`` configuration, else
    :class:`~rankseam_mcp.policy.ToolPolicy`'s defaults (``"none"`` and ``"mmr"`` with its
    ``lambda``: no model-backed reranker; tools named ``memory_search``, ``memory_add``, ...).
    ``tool_prefix``, when given, overrides the policy's.
    """
    slot = memory if isinstance(memory, MemorySlot) else MemorySlot.given(memory)
    if policy is None:
        policy = ToolPolicy.from_mapping(slot.config.plugins.get("mcp", {}))
    prefix = policy.tool_prefix if tool_prefix is None else check_tool_prefix(tool_prefix)
    n = tool_names(prefix)
    allowed = ", ".join(repr(r) for r in policy.rerankers) or "none"
    server = _Server(
        name=name,
        version=f"{plugin_version} (rankseam {__version__})",
        instructions=_instructions(n),
        log_level="WARNING",  # stderr stays quiet; tool errors go to the client
    )
    if prefix:
        server.aliases = {base: full for base, full in n.items()}
    on_memory = _on_memory(slot)

    @server.serve(
        n["search"],
        "Search memories",
        READS,
        description=(
            "Search the user's long-term memory for what they told you before. Call it before "
            "answering anything that may depend on the user's preferences, people, plans, past "
            "decisions or facts about their work, and before storing a fact (it may be stored "
            "already). Returns the best hits, each with its citation (memory_id, revision) and "
            "text. `reranker` picks a rerank policy by name (omit it for the configured default;"
            f" this server allows {allowed}; 'none' is the coarse order, 'mmr' diversifies) "
            "and `reranker_options` its allowed options. "
            f"{FILTERING} `min_score` leaves out hits scored below it. "
            "The answer is compact; `verbose: true` "
            "adds each hit's channel scores, timestamps and hash and the full rerank trace "
            "(selected ranks, usage, latency): for debugging the ranking, not for answering."
        ),
    )
    async def search(
        query: Annotated[str, Field(min_length=1, description="What to look for, in words.")],
        limit: Annotated[int, Field(ge=1, le=200, description="How many hits (1..200).")] = 5,
        namespace: Namespace = None,
        reranker: str | None = None,
        reranker_options: dict[str, Any] | None = None,
        verbose: Annotated[
            bool, Field(description="Also every score, timestamp and the full rerank trace.")
        ] = False,
        where: Where = None,
        thread: ThreadScope = None,
        since: Since = None,
        until: Until = None,
        min_score: MinScore = None,
    ) -> dict[str, Any]:
        opened = await _call(slot.reading)
        try:
            policy.check(reranker, reranker_options, opened.config.search.reranker)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        kwargs = search_arguments(
            namespace=namespace,
            reranker=reranker,
            reranker_options=reranker_options,
            min_score=min_score,
            **scope(where, thread, since, until),
        )
        result = await _guard(opened.asearch(query, limit, **kwargs))
        trace = result.trace
        rerank = None if trace.rerank is None else trace.rerank.to_dict()
        if verbose:
            return {
                "hits": [hit.to_dict() for hit in result.hits],
                "rerank": rerank,
                "latency_ms": round(trace.latency_ms, 3),
            }
        ns = namespace if namespace is not None else opened.config.namespace
        return {
            "namespace": ns,
            "hits": [compact_hit(hit.to_dict(), ns) for hit in result.hits],
            "rerank": compact_rerank(rerank),
        }

    @server.serve(
        n["add"],
        "Remember something",
        WRITES,
        description=(
            "Store one new memory. Call it when the user states something lasting worth "
            "remembering across conversations (a preference, a decision, a plan, a fact about "
            "themselves or their work) or asks you to remember something: one self-contained "
            f"fact per call, in plain words. When a stored fact changed, call {n['update']} "
            "instead. Give `memory_id` to make adding idempotent per id (an id that holds other "
            "text is refused). Returns its citation (namespace, memory_id, revision); the first "
            "add creates the store when it does not exist yet (`created_store` says where)."
        ),
    )
    async def add(
        text: Annotated[str, Field(min_length=1, description="The memory's text.")],
        memory_id: Annotated[
            str | None, Field(description="Your id for it (default: a new random id).")
        ] = None,
        namespace: Namespace = None,
        importance: Annotated[
            float, Field(ge=0.0, le=1.0, description="0..1 (default 0.5); a search prior.")
        ] = 0.5,
        metadata: dict[str, Any] | None = None,
        thread: Thread = None,
        position: Position = None,
        derived_from: DerivedFrom = None,
    ) -> dict[str, Any]:
        opened, created = await _call(slot.writing)
        result = await _call(
            opened.add,
            text,
            memory_id=memory_id,
            namespace=namespace,
            importance=float(importance),
            metadata=metadata,
            thread=thread,
            position=position,
            derived_from=derived_from,
        )
        out: dict[str, Any] = {
            "stored": result.stored,
            "ref": None if result.ref is None else result.ref.to_dict(),
        }
        if created:
            out["created_store"] = opened.path
        return out

    @server.serve(
        n["get"],
        "Read a memory",
        READS,
        description=(
            "Read one memory in full by its memory_id (one a search or a listing cited): its "
            "current revision, or exactly `revision` when given. Call it when a hit's text is "
            "not enough, or to quote an exact earlier revision."
        ),
    )
    async def get(
        memory_id: MemoryId,
        namespace: Namespace = None,
        revision: Annotated[int | None, Field(ge=1, le=MAX_INT)] = None,
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

    @server.serve(
        n["update"],
        "Update a memory",
        WRITES,
        description=(
            "Replace a stored memory's text. Call it when the user corrects or changes a fact "
            f"already stored (find its memory_id with {n['search']} first). Writes a new "
            "revision; the previous one stays readable by get with its revision. `importance`, "
            "`metadata`, `thread`, `position` and `derived_from` default to the previous "
            "revision's. Returns the new citation."
        ),
    )
    async def update(
        memory_id: MemoryId,
        text: Annotated[str, Field(min_length=1, description="The new text.")],
        namespace: Namespace = None,
        importance: Annotated[float | None, Field(ge=0.0, le=1.0)] = None,
        metadata: dict[str, Any] | None = None,
        thread: Thread = None,
        position: Position = None,
        derived_from: DerivedFrom = None,
    ) -> dict[str, Any]:
        ref = await on_memory(
            Memory.update,
            memory_id,
            text,
            namespace=namespace,
            importance=None if importance is None else float(importance),
            metadata=metadata,
            thread=thread,
            position=position,
            derived_from=derived_from,
        )
        return {"ref": ref.to_dict()}

    @server.serve(
        n["list"],
        "List memories",
        READS,
        description=(
            "List the stored memories page by page (current revisions, oldest last write "
            "first). Call it only when the user wants to review or audit what is stored; to "
            f"find something, call {n['search']}. `offset` (default 0) and `limit` "
            f"(1..{MAX_PAGE}, default {DEFAULT_PAGE}) choose the page; `next_offset` is the "
            "next page's offset, null after the last. An update or delete between pages moves "
            "a memory (to the end, or out). "
            f"{FILTERING} Compact by default; `verbose: true` adds each "
            "memory's importance, timestamp and hash."
        ),
    )
    async def list_memories(
        namespace: Namespace = None,
        offset: Annotated[int, Field(ge=0, le=MAX_INT)] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
        include_deleted: Annotated[
            bool, Field(description="Also list deleted memories (default false).")
        ] = False,
        verbose: Annotated[
            bool, Field(description="Also importance, timestamps and hashes.")
        ] = False,
        where: Where = None,
        thread: ThreadScope = None,
        since: Since = None,
        until: Until = None,
    ) -> dict[str, Any]:
        opened = await _call(slot.reading)
        filters = scope(where, thread, since, until)
        page, more = await _call(_page, opened, namespace, offset, limit, include_deleted, filters)
        next_offset = offset + len(page) if more else None
        if verbose:
            return {"memories": page, "offset": offset, "next_offset": next_offset}
        ns = namespace if namespace is not None else opened.config.namespace
        return {
            "namespace": ns,
            "memories": [compact_memory(m, ns) for m in page],
            "offset": offset,
            "next_offset": next_offset,
        }

    @server.serve(
        n["delete"],
        "Forget a memory",
        DELETES,
        description=(
            "Forget a memory: search stops finding it (its revisions stay readable by get). "
            "Call it only when the user asks you to forget something, or confirms that a "
            f"stored fact is wrong and should not be replaced (else {n['update']})."
        ),
    )
    async def delete(
        memory_id: MemoryId,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        ref = await on_memory(Memory.delete, memory_id, namespace=namespace)
        return {"deleted": ref.to_dict()}

    @server.serve(
        n["stats"],
        "Memory store statistics",
        READS,
        description=(
            "Describe the memory store: how many memories, revisions and namespaces, which "
            "embedder, how many have vectors. Call it when the user asks about the store "
            "itself, never to find facts."
        ),
    )
    async def stats() -> dict[str, Any]:
        return await on_memory(Memory.stats)  # type: ignore[no-any-return]

    server.refused = unserved(policy, n)
    serve_lifecycle(server, n, policy, on_memory=on_memory)
    return server
