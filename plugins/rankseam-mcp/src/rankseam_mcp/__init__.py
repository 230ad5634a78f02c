"""rankseam-mcp: a Model Context Protocol server that gives agents a rankseam memory.

``rankseam mcp --db memories.sqlite3`` serves the tools ``memory_search`` (with a reranker
choice and its trace), ``memory_add``, ``memory_get``, ``memory_update``, ``memory_list``,
``memory_delete`` and ``memory_stats`` over stdio (or streamable HTTP with ``--transport http``).
:func:`build_server` builds the same server around a ``Memory`` you opened.

Importing this package does not import the MCP SDK; :func:`build_server` loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

#: The distribution's version (the one place it is written; pyproject.toml reads it).
__version__ = "0.2.0"

if TYPE_CHECKING:
    from rankseam_mcp.server import build_server

__all__ = ["__version__", "build_server"]


def __getattr__(name: str) -> Any:
    if name == "build_server":
        from rankseam_mcp.server import build_server

        return build_server
    raise AttributeError(f"module 'rankseam_mcp' has no attribute {name!r}")
