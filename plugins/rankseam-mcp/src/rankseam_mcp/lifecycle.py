"""The tools of a memory's history and of the hard deletes: ``memory_history`` (read-only,
always served), ``memory_forget`` and ``memory_reset`` (destructive: served only when the
operator names them in ``[plugins.mcp] destructive_tools``, :mod:`rankseam_mcp.policy`).

``memory_delete`` tombstones a memory (every revision stays readable); ``memory_forget``
removes every revision's text, metadata and vectors for good; ``memory_reset`` forgets a whole
namespace and takes ``confirm: true`` besides (docs/mcp.md, "Forgetting").
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from rankseam import Memory
from rankseam_mcp.fields import MemoryId, Namespace
from rankseam_mcp.kinds import DELETES, READS
from rankseam_mcp.policy import DESTRUCTIVE_TOOLS, ToolPolicy

__all__ = ["LIFECYCLE_TOOLS", "serve_lifecycle", "unserved"]

#: The tools of this module, by their base names.
LIFECYCLE_TOOLS = ("history", "forget", "reset")

#: Runs ``Memory.method(memory, *args, **kwargs)`` on the server's memory, off the event loop.
OnMemory = Callable[..., Coroutine[Any, Any, Any]]


def _revision(data: dict[str, Any]) -> dict[str, Any]:
    """A revision as ``memory_history`` answers it: its number, text and time, and its
    metadata and place in a thread when it has them."""
    out = {k: data[k] for k in ("revision", "text", "created_at")}
    for key in ("metadata", "thread", "position", "derived_from"):
        if data.get(key):
            out[key] = data[key]
    return out


def unserved(policy: ToolPolicy, names: Mapping[str, str]) -> dict[str, str]:
    """The served name of each hard-delete tool the policy leaves out, and why (what a call
    of it answers)."""
    return {
        names[base]: (
            f"this server does not offer {names[base]}: hard deletes are off unless the "
            "operator allows them in rankseam.toml under [plugins.mcp], e.g. "
            f'destructive_tools = ["{base}"]; {names["delete"]} tombstones a memory instead'
        )
        for base in DESTRUCTIVE_TOOLS
        if base not in policy.destructive_tools
    }


def serve_lifecycle(
    server: Any,
    names: Mapping[str, str],
    policy: ToolPolicy,
    *,
    on_memory: OnMemory,
) -> None:
    """Register ``memory_history``, and ``memory_forget`` / ``memory_reset`` where
    ``policy`` allows them, on ``server`` (``on_memory(Memory.method, *args, **kwargs)`` runs
    a ``Memory`` method on the server's memory as the other tools do)."""
    n = names

    @server.serve(
        n["history"],
        "History of a memory",
        READS,
        description=(
            "Every revision of one memory, oldest first: what it said and when, and whether it "
            "is deleted. Call it when the user asks how a stored fact changed over time or what "
            f"it said before; {n['get']} reads only one revision."
        ),
    )
    async def history(
        memory_id: MemoryId,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        revisions = await on_memory(Memory.history, memory_id, namespace=namespace)
        first = revisions[0].ref
        return {
            "namespace": first.namespace,
            "memory_id": first.memory_id,
            "deleted": revisions[-1].deleted,
            "revisions": [_revision(r.to_dict()) for r in revisions],
        }

    if "forget" in policy.destructive_tools:

        @server.serve(
            n["forget"],
            "Erase a memory permanently",
            DELETES,
            description=(
                "Erase a memory for good: every revision's text, metadata and vectors leave the "
                "store (only its id and the time stay); it cannot be undone or read back. Call "
                "it only when the user explicitly asks that something be erased permanently, "
                f"not just forgotten in search (that is {n['delete']}, which keeps the history)."
            ),
        )
        async def forget(
            memory_id: MemoryId,
            namespace: Namespace = None,
        ) -> dict[str, Any]:
            done = await on_memory(Memory.forget, memory_id, namespace=namespace)
            return {"forgotten": {**done.to_dict(), "memory_id": memory_id}}

    if "reset" in policy.destructive_tools:

        @server.serve(
            n["reset"],
            "Erase a whole namespace",
            DELETES,
            description=(
                "Erase EVERY memory of a namespace for good (text, metadata, vectors and "
                "history); it cannot be undone. Call it only when the user explicitly asks to "
                "wipe that whole namespace, naming it, and pass `confirm: true`."
            ),
        )
        async def reset(
            namespace: Annotated[str, Field(min_length=1, description="The namespace to wipe.")],
            confirm: Annotated[
                bool, Field(description="Must be true: the user asked for this wipe.")
            ] = False,
        ) -> dict[str, Any]:
            if confirm is not True:
                raise ToolError(
                    f"{n['reset']} erases every memory of namespace {namespace!r} for good; "
                    "call it again with `confirm: true` once the user has asked for exactly "
                    "that. Nothing was changed"
                )
            done = await on_memory(Memory.reset, namespace, confirm=True)
            return {"reset": done.to_dict()}
