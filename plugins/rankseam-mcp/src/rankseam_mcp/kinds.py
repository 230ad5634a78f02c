"""What a tool does to the memory store, declared once per tool: its kind says whether it
writes (a refused write's error adds "Nothing was changed") and gives MCP's tool hints
(``readOnlyHint``, ``destructiveHint``, ``idempotentHint``; ``openWorldHint`` is false for
every tool: each reads or writes this one memory store, never an open set of outside
entities such as the web)."""

from __future__ import annotations

from typing import Any, NamedTuple

from mcp_types import ToolAnnotations

__all__ = ["DELETES", "READS", "WRITES", "ToolKind"]


class ToolKind(NamedTuple):
    """What a tool does to the store, as MCP's hints say it."""

    read_only: bool
    destructive: bool
    idempotent: bool

    @property
    def writes(self) -> bool:
        """Whether the tool may change the store (every tool that is not read-only)."""
        return not self.read_only

    def hints(self, title: str) -> Any:
        """MCP's ``ToolAnnotations`` for a tool of this kind titled ``title``."""
        return ToolAnnotations(
            title=title,
            read_only_hint=self.read_only,
            destructive_hint=self.destructive,
            idempotent_hint=self.idempotent,
            open_world_hint=False,
        )


#: Reads the store and changes nothing (search, get, list, stats, history).
READS = ToolKind(read_only=True, destructive=False, idempotent=True)
#: Writes a new memory or revision; each call writes again (add, update).
WRITES = ToolKind(read_only=False, destructive=False, idempotent=False)
#: Takes memories out of search or out of the store; doing it twice is doing it once
#: (delete, forget, reset).
DELETES = ToolKind(read_only=False, destructive=True, idempotent=True)
