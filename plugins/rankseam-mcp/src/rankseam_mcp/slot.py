"""The memory the tools use: one already open, or a store opened only when it exists.

``rankseam mcp`` never creates a store at start: a mistyped ``--db`` must not leave an empty
store (and its parent folders) behind. While the store does not exist, the reading tools
(``search``, ``get``, ``list``, ``stats``) and ``update`` and ``delete`` answer an error that
says where the server looked and how to create it; ``add`` creates it. Each call looks again,
so a store created meanwhile (``rankseam add`` in a terminal) is found.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from rankseam import Memory
from rankseam.errors import ConfigurationError

__all__ = ["MemorySlot"]

log = logging.getLogger("rankseam_mcp")

CREATE_HINT = "this server's `add` tool creates it"


class MemorySlot:
    """A :class:`~rankseam.Memory`, given open (:meth:`given`) or opened on first use
    (:meth:`on_demand`).

    ``config`` is the configuration the tools read (namespace, default reranker, the
    ``[plugins.mcp]`` table), also while no store is open.
    """

    def __init__(
        self, memory: Memory | None, opener: Callable[[bool], Memory] | None, config: Any
    ) -> None:
        self._memory = memory
        self._opener = opener
        self._config = config
        self._lock = threading.Lock()

    @classmethod
    def given(cls, memory: Memory) -> MemorySlot:
        """A memory the caller opened (and closes): :meth:`close` leaves it open."""
        return cls(memory, None, memory.config)

    @classmethod
    def on_demand(
        cls, opener: Callable[[bool], Memory], config: Any, *, opened: Memory | None = None
    ) -> MemorySlot:
        """A store ``opener(create)`` opens: for reading once it exists (``create=False``),
        for ``add`` also when it does not (``create=True``); ``opened`` is one it already
        opened. :meth:`close` closes it."""
        return cls(opened, opener, config)

    @property
    def config(self) -> Any:
        return self._config

    @property
    def is_open(self) -> bool:
        return self._memory is not None

    def reading(self) -> Memory:
        """The memory; a :class:`ToolError` saying how to create the store while it does not
        exist. Blocking: call it from a worker thread."""
        return self._open(create=False)[0]

    def writing(self) -> tuple[Memory, bool]:
        """The memory, and whether this call created its store."""
        return self._open(create=True)

    def _open(self, *, create: bool) -> tuple[Memory, bool]:
        with self._lock:
            if self._memory is not None:
                return self._memory, False
            assert self._opener is not None
            try:
                memory, created = self._opener(False), False
            except ConfigurationError as exc:
                if not create:
                    raise ToolError(f"{exc}; {CREATE_HINT}") from None
                try:
                    memory, created = self._opener(True), True
                except ConfigurationError as again:
                    raise ToolError(str(again)) from None
            self._memory, self._config = memory, memory.config
            if created:
                log.warning("created the store %s (the add tool's first write)", memory.path)
            return memory, created

    def close(self) -> None:
        with self._lock:
            if self._memory is not None and self._opener is not None:
                self._memory.close()  # only one this slot opened; a given one is the caller's
                self._memory = None
