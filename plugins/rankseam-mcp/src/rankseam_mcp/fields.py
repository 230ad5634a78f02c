"""The argument types several tools share, each declared once with the description the calling
model reads: a memory's id and namespace, and its place in a conversation (``thread``,
``position``, ``derived_from``; rankseam docs/store.md). The filter arguments are
:mod:`rankseam_mcp.filtering`'s."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

__all__ = ["DerivedFrom", "MemoryId", "Namespace", "Position", "Thread"]

#: A tool's ``memory_id`` argument: the id of a stored memory.
MemoryId = Annotated[str, Field(min_length=1)]
#: A tool's ``namespace`` argument (``None``: the server's).
Namespace = Annotated[str | None, Field(description="Default: the server's.")]
#: The thread a memory is stored in.
Thread = Annotated[
    str | None,
    Field(
        description=(
            "The conversation, session or run the memory belongs to (e.g. this chat's id), so "
            "that a search can find it with the turns around it."
        )
    ),
]
#: A memory's place in its thread.
Position = Annotated[
    float | str | None,
    Field(
        description=(
            "Its place in the thread: a sequence number, epoch seconds or an ISO 8601 date "
            "(default: when it was stored)."
        )
    ),
]
#: The memory a memory was derived from.
DerivedFrom = Annotated[
    str | None,
    Field(
        description="The memory_id of the memory this one was derived from (e.g. a message a "
        "fact was extracted from)."
    ),
]
