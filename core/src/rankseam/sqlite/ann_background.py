"""When the ANN index's maintenance (:mod:`rankseam.sqlite.ann`) runs in the background:
started by a search that finds an index due, one at a time per namespace × space, stopped
when the store closes and when the process exits, and after a failure not again before an
exponential, bounded back-off has passed.

- **Exit is clean.** Maintenance runs in a daemon thread (a process never waits for a whole
  rebuild at exit) that spends most of its time in usearch's native code with the GIL
  released. An interpreter that finalises while such a thread is in there ends the thread
  with ``pthread_exit`` when it asks for the GIL back; the forced unwinding through C++
  frames calls ``std::terminate`` and the process aborts ("terminate called without an
  active exception", SIGABRT). So an :mod:`atexit` hook (atexit hooks run after
  ``threading`` has joined the non-daemon threads and before the interpreter finalises)
  stops every maintenance of the process and joins its thread, as ``close()`` does: a
  process that exits without closing its store waits for at most the current slice of
  vectors, or the current load or save.
- **A failure is not a loop.** A maintenance that fails (a full disk) is retried by a later
  search only after :data:`RETRY_FIRST_S`, doubled with each failure in a row up to
  :data:`RETRY_MAX_S`; a success starts over. Without it, every search after a failed save
  started another full rebuild (about every 7 s on the store of issue #39).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable

from rankseam.errors import StoreError

__all__ = ["RETRY_FIRST_S", "RETRY_MAX_S", "Background", "MaintenanceCancelled"]

log = logging.getLogger("rankseam.sqlite.ann")

#: After a failed maintenance, searches start the next one this many seconds later, doubling
#: with each failure in a row up to RETRY_MAX_S (a success starts over).
RETRY_FIRST_S = 60.0
RETRY_MAX_S = 3600.0

Key = tuple[str, str]  # (namespace, space)


class MaintenanceCancelled(RuntimeError):
    """A maintenance stopped because its store was closed (or the process is exiting); nothing
    was published (a background maintenance ends quietly on it)."""


#: The background maintenance of every open store of this process (see _stop_at_exit).
_LIVE: weakref.WeakSet[Background] = weakref.WeakSet()
#: Set once the interpreter exits: no maintenance starts any more.
_exiting = False


def _stop_at_exit() -> None:
    """Stop every background maintenance of the process and join its thread before the
    interpreter finalises (the module docstring says why). Registered when this module is
    imported, before any maintenance thread exists."""
    global _exiting
    _exiting = True
    for background in list(_LIVE):
        background.stop()


atexit.register(_stop_at_exit)


class Background:
    """The background maintenance of one store's ANN indexes. Thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        #: what the back-off measures its waits with
        self.clock = clock
        self._lock = threading.Lock()
        self._running: set[Key] = set()
        self._threads: list[threading.Thread] = []
        # failed maintenances in a row per index, and the clock time before which searches
        # start no other one
        self._failures: dict[Key, tuple[int, float]] = {}
        self._stopped = False
        _LIVE.add(self)

    def schedule(self, key: Key, work: Callable[[], object]) -> None:
        """Run ``work`` (a maintenance of ``key``) in a background thread, unless one of
        ``key`` runs, the back-off of its last failure has not passed, or maintenance was
        stopped."""
        with self._lock:
            if key in self._running or self._stopped or _exiting:
                return
            failure = self._failures.get(key)
            if failure is not None and self.clock() < failure[1]:
                return
            self._running.add(key)
            self._threads = [t for t in self._threads if t.is_alive()]
            counted = self._failures.get(key, (0, 0.0))[0]

        def run() -> None:
            try:
                work()
            except MaintenanceCancelled:  # the store closed: the work is moot, not a failure
                log.debug(
                    "ANN maintenance of %s cancelled: the store was closed",
                    key[0],
                    extra={"event": "ann.maintain_cancelled"},
                )
            except StoreError:  # counted and logged in the user's words by the maintenance
                pass
            except Exception:  # logged; searches stay exact or use the previous base
                if self._failures.get(key, (0, 0.0))[0] == counted:  # failed before counting
                    self.failed(key)
                log.exception(
                    "ANN maintenance of %s failed; searches stay exact (or use the previous "
                    "index) and retry it in %.0f s",
                    key[0],
                    self.retry_in(key),
                    extra={"event": "ann.maintain_failed"},
                )
            finally:
                with self._lock:
                    self._running.discard(key)

        # a daemon thread, so that a process never waits for a whole rebuild at exit; the
        # atexit hook (_stop_at_exit) stops it at its next slice and joins it instead
        thread = threading.Thread(target=run, name="rankseam-ann", daemon=True)
        with self._lock:  # started and listed together: a wait() never sees it half-made
            thread.start()
            self._threads.append(thread)

    def wait(self) -> None:
        """Wait for background maintenance to finish."""
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join()
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]

    def stop(self) -> None:
        """Stop background maintenance (a running one stops at its next
        :meth:`check_running`, publishing nothing) and wait for its thread; none starts
        afterwards."""
        self._stopped = True
        self.wait()
        _LIVE.discard(self)

    def check_running(self) -> None:
        """Raise :class:`MaintenanceCancelled` once maintenance was stopped (a maintenance
        calls it between slices of its work)."""
        if self._stopped:
            raise MaintenanceCancelled(
                "the store was closed (or the process exits) during ANN maintenance"
            )

    def failed(self, key: Key) -> float:
        """Count a failed maintenance of ``key``; the seconds before searches start the next
        (:data:`RETRY_FIRST_S`, doubled per failure in a row, at most :data:`RETRY_MAX_S`)."""
        with self._lock:
            count = self._failures.get(key, (0, 0.0))[0] + 1
            delay = min(RETRY_FIRST_S * 2.0 ** min(count - 1, 32), RETRY_MAX_S)
            self._failures[key] = (count, self.clock() + delay)
        return delay

    def succeeded(self, key: Key) -> None:
        """A maintenance of ``key`` succeeded: the back-off starts over."""
        with self._lock:
            self._failures.pop(key, None)

    def retry_in(self, key: Key) -> float:
        """Seconds before a search may start the next maintenance of ``key`` after failures
        (0 when the last one did not fail)."""
        failure = self._failures.get(key)
        return 0.0 if failure is None else max(0.0, failure[1] - self.clock())
