"""Running coroutines for synchronous callers: one private event loop in a daemon thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopRunner", "complete_now"]

T = TypeVar("T")


class LoopRunner:
    """One private event loop in a daemon thread: runs coroutines for synchronous callers
    (cheaper than a new loop per call, and usable from inside a running loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="rankseam-memory-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            loop = self._loop
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "a synchronous Memory call was made from inside one of its own coroutines; "
                "use the async API (asearch) there"
            )
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()


def complete_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (the seam with no reranker, or with one that
    declares ``needs_event_loop = False``) without a loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError(
        "coroutine suspended; it needs an event loop (a reranker that declares "
        "needs_event_loop = False must not await anything that suspends; remove the "
        "declaration or the await)"
    )
