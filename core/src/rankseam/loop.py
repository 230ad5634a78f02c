"""The one way rankseam runs coroutines for synchronous callers (searches, the write gate,
:class:`~rankseam.text_reranker.DocumentReranker`), with one set of exceptions.

- :func:`run_inline` drives a coroutine that declares it never suspends to the end in the
  caller's thread, without an event loop; one that suspends raises :class:`Suspended`.
- :class:`LoopRunner` runs every other coroutine on one private event loop in a daemon
  thread (cheaper than a new loop per call, and usable from inside a running loop).

The loop thread survives its plugins: a ``SystemExit`` or ``KeyboardInterrupt`` that a plugin
raises inside a task of its own is logged and the loop goes on serving. A caller that waits
longer than its timeout gets :class:`LoopTimeout`; the loop is then presumed blocked (a plugin
ran blocking code on it), is abandoned, and the next call starts a fresh one. The abandoned
thread runs on until the blocking call returns, then finishes what it still holds and ends;
Python cannot stop it sooner. A plugin that stops the loop (``loop.stop()``) ends the loop:
what ran on it raises :class:`LoopStopped`, and the next call starts a fresh one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # imported where a loop is first needed: inline runs never import asyncio
    import asyncio
    import concurrent.futures

__all__ = [
    "LoopRunner",
    "LoopStopped",
    "LoopTimeout",
    "Reentrant",
    "RunnerError",
    "Suspended",
    "run_inline",
]

T = TypeVar("T")

log = logging.getLogger("rankseam.loop")


class RunnerError(RuntimeError):
    """The runner could not bring a coroutine to its end (base of the runner's exceptions)."""


class LoopTimeout(RunnerError, TimeoutError):
    """The coroutine did not finish within the caller's timeout; its loop was abandoned."""


class LoopStopped(RunnerError):
    """The event loop running the coroutine was stopped under it (a plugin called
    ``loop.stop()``); the runner starts a fresh loop for the next call."""


class Suspended(RunnerError):
    """A coroutine run inline (:func:`run_inline`) suspended: it needs an event loop."""


class Reentrant(RunnerError):
    """A synchronous call was made from inside a coroutine of the same runner."""


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro``, which must never suspend (no I/O, no thread, no sleep), to its end in
    this thread without an event loop. Whatever it raises propagates; when it suspends it is
    closed and :class:`Suspended` is raised."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    try:
        coro.close()
    except BaseException:  # a coroutine that refuses to close: nothing more to do with it
        pass
    raise Suspended(
        "the coroutine suspended (it awaited something that needs an event loop), so it "
        "cannot run inline"
    )


class _Loop:
    """One event loop of a runner, its thread, and whether the runner asked it to end."""

    __slots__ = ("closing", "futures", "lock", "loop", "stopped", "thread")

    def __init__(self) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self.closing = False  # the runner stops it (close, abandon): not a plugin
        self.stopped = False  # it was stopped by something else (a plugin)
        self.lock = threading.Lock()
        self.futures: set[concurrent.futures.Future[Any]] = set()  # callers waiting on it
        self.thread = threading.Thread(
            target=_serve, args=(self,), name="rankseam-memory-loop", daemon=True
        )

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        import asyncio

        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        with self.lock:
            self.futures.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self.lock:
            self.futures.discard(future)

    def cancel_waiting(self) -> None:
        """Cancel every caller's future that the closed loop will never settle."""
        with self.lock:
            waiting = list(self.futures)
        for future in waiting:
            future.cancel()


class LoopRunner:
    """One private event loop in a daemon thread: runs coroutines for synchronous callers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current_loop: _Loop | None = None
        self._threads: set[threading.Thread] = set()  # every loop thread this runner started

    def _current(self) -> _Loop:
        with self._lock:
            held = self._current_loop
            if held is None or held.stopped or held.loop.is_closed():
                held = _Loop()
                held.thread.start()
                self._current_loop = held
                self._threads.add(held.thread)
            return held

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop thread and wait for its result, at most ``timeout``
        seconds (then :class:`LoopTimeout`, and the loop is replaced). :class:`LoopStopped`
        when the loop was stopped under it; :class:`Reentrant` when called from the loop
        thread itself."""
        import concurrent.futures

        if threading.current_thread() in self._threads:
            coro.close()
            raise Reentrant(
                "a synchronous Memory call was made from inside one of its own coroutines; "
                "use the async API (asearch) there"
            )
        held = self._current()
        try:
            future = held.submit(coro)
        except RuntimeError:  # the loop closed between _current() and now: use a fresh one
            held.stopped = True
            held = self._current()
            future = held.submit(coro)
        try:
            done, _pending = concurrent.futures.wait((future,), timeout=timeout)
        except BaseException:  # the caller was interrupted (Ctrl-C): stop the work too
            future.cancel()
            raise
        if not done:
            future.cancel()
            self._abandon(held)
            raise LoopTimeout(
                f"no result within {timeout:g} s; the event loop was blocked and is replaced"
            )
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if held.stopped:
                raise LoopStopped(
                    "the event loop was stopped while the call ran on it (a plugin called "
                    "loop.stop()); the next call runs on a fresh loop"
                ) from None
            raise

    def _abandon(self, held: _Loop) -> None:
        with self._lock:
            if self._current_loop is not held:
                return
            self._current_loop = None
            held.closing = True
        log.warning(
            "a plugin blocked the event-loop thread past the deadline; it is abandoned and "
            "the next search starts a fresh one",
            extra={"event": "loop.abandoned"},
        )
        try:
            held.loop.call_soon_threadsafe(_wind_down, held.loop)
        except RuntimeError:  # already closed
            pass

    def close(self) -> None:
        with self._lock:
            held, self._current_loop = self._current_loop, None
            if held is not None:
                held.closing = True
        if held is not None:
            try:
                held.loop.call_soon_threadsafe(held.loop.stop)
            except RuntimeError:
                return
            held.thread.join(timeout=5)


def _serve(held: _Loop) -> None:
    """The loop thread: run the loop until the runner stops it, whatever a plugin raises.
    A stop the runner did not ask for (a plugin's ``loop.stop()``) ends this loop: what ran on
    it is cancelled and its callers get :class:`LoopStopped`."""
    import asyncio

    loop = held.loop
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
        if not held.closing:
            held.stopped = True  # before cancelling: a cancelled caller reads it
            log.error(
                "a plugin stopped the event loop; what ran on it fails, and the next call "
                "starts a fresh loop",
                extra={"event": "loop.stopped_by_plugin"},
            )
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
        held.cancel_waiting()


def _wind_down(loop: asyncio.AbstractEventLoop) -> None:
    """On an abandoned loop, once it runs again: let what it still holds finish, then stop."""
    import asyncio

    async def drain() -> None:
        me = asyncio.current_task()
        while True:
            others = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
            if not others:
                break
            await asyncio.wait(others, timeout=1.0)
        loop.stop()

    loop.create_task(drain())
