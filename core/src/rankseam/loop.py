"""Running coroutines for synchronous callers: one private event loop in a daemon thread.

The loop thread survives its plugins: a ``SystemExit`` or ``KeyboardInterrupt`` that a plugin
raises inside a task of its own is logged and the loop goes on serving. A caller that waits
longer than its timeout gets :class:`LoopTimeout`; the loop is then presumed blocked (a plugin
ran blocking code on it), is abandoned, and the next call starts a fresh one. The abandoned
thread runs on until the blocking call returns, then finishes what it still holds and ends;
Python cannot stop it sooner.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopRunner", "LoopTimeout", "complete_now"]

T = TypeVar("T")

log = logging.getLogger("rankseam.loop")


class LoopTimeout(TimeoutError):
    """The coroutine did not finish within the caller's timeout; its loop was abandoned."""


class LoopRunner:
    """One private event loop in a daemon thread: runs coroutines for synchronous callers
    (cheaper than a new loop per call, and usable from inside a running loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._threads: set[threading.Thread] = set()  # every loop thread this runner started

    def _current(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_serve, args=(loop,), name="rankseam-memory-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                self._threads.add(thread)
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop thread and wait for its result, at most ``timeout``
        seconds (then :class:`LoopTimeout`, and the loop is replaced)."""
        if threading.current_thread() in self._threads:
            coro.close()
            raise RuntimeError(
                "a synchronous Memory call was made from inside one of its own coroutines; "
                "use the async API (asearch) there"
            )
        loop = self._current()
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            done, _pending = concurrent.futures.wait((future,), timeout=timeout)
        except BaseException:  # the caller was interrupted (Ctrl-C): stop the work too
            future.cancel()
            raise
        if not done:
            future.cancel()
            self._abandon(loop)
            raise LoopTimeout(
                f"no result within {timeout:g} s; the event loop was blocked and is replaced"
            )
        return future.result()

    def _abandon(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self._loop is not loop:
                return
            self._loop = self._thread = None
        log.warning(
            "a plugin blocked the event-loop thread past the deadline; it is abandoned and "
            "the next search starts a fresh one",
            extra={"event": "loop.abandoned"},
        )
        try:
            loop.call_soon_threadsafe(_wind_down, loop)
        except RuntimeError:  # already closed
            pass

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:
                return
            thread.join(timeout=5)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The loop thread: run the loop until it is stopped, whatever a plugin raises."""
    asyncio.set_event_loop(loop)
    try:
        while True:
            try:
                loop.run_forever()
            except BaseException as exc:  # SystemExit/KeyboardInterrupt from a plugin's task
                log.error(
                    "a plugin raised %s on the event-loop thread; the loop keeps serving",
                    type(exc).__name__,
                    extra={"event": "loop.plugin_exit", "error_type": type(exc).__name__},
                )
                continue
            break
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=1.0))
    except BaseException:  # closing down: nothing may escape a daemon thread's exit
        pass
    finally:
        try:
            loop.close()
        except RuntimeError:
            pass


def _wind_down(loop: asyncio.AbstractEventLoop) -> None:
    """On an abandoned loop, once it runs again: let what it still holds finish, then stop."""

    async def drain() -> None:
        me = asyncio.current_task()
        while True:
            others = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
            if not others:
                break
            await asyncio.wait(others, timeout=1.0)
        loop.stop()

    loop.create_task(drain())


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
