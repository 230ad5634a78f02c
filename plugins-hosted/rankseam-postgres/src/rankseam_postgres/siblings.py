"""A search's reader that lends its snapshot to other threads
(``rankseam.plugin.stores.ConcurrentReader``), for ``concurrent_channels=true``: the host's lexical
and vector channels then run side by side, each on a connection of its own in the one
snapshot (docs/plugins/postgres.md, "Connections and pooling"). Never for Citus, whose workers
an exported snapshot does not reach."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

from rankseam_postgres.pools import again
from rankseam_postgres.reader import PostgresReader

if TYPE_CHECKING:
    from rankseam_postgres.pools import Router, ServerPool
    from rankseam_postgres.store import PostgresStore

__all__ = ["ConcurrentPostgresReader"]


class _Guarded:
    """One transaction's connection as the readers of a search use it: one statement at a
    time, and every error raised as the store's typed error (:meth:`Router.failed`). The
    first failure is remembered: a failed statement aborts the transaction, so every later
    statement on it raises that same failure (a search's timeout, a lost connection) instead
    of the server's ``InFailedSqlTransaction``; a statement and the record of its failure
    hold one lock, so no other thread's statement comes between them."""

    def __init__(self, conn: psycopg.Connection[Any], router: Router, server: ServerPool) -> None:
        self.conn = conn
        self._router = router
        self._server = server
        self._lock = threading.Lock()
        self._failure: Exception | None = None

    def execute(self, query: Any, params: Any = None, /) -> psycopg.Cursor[Any]:
        with self._lock:
            if self._failure is not None:
                raise again(self._failure)
            try:
                return self.conn.execute(query, params)
            except psycopg.Error as exc:
                self._failure = self._router.failed(self._server, self.conn, exc)
                raise again(self._failure) from None


class _Joined:
    """The connection of a sibling reader (:meth:`ConcurrentPostgresReader.siblings`): another
    transaction of the search's snapshot on the same server, begun on its first statement
    (in the thread that uses it), or the search's own connection when the pool has none to
    spare (one statement at a time on it: the same answers, one after the other). Its
    statements' errors are raised as the store's errors, in that thread."""

    def __init__(
        self,
        search: _Guarded,
        router: Router,
        server: ServerPool,
        snapshot: str,
        stack: ExitStack,
    ) -> None:
        self._search = search
        self._router = router
        self._server = server
        self._snapshot = snapshot
        self._stack = stack
        self._conn: _Guarded | None = None

    def execute(self, query: Any, params: Any = None, /) -> psycopg.Cursor[Any]:
        conn = self._conn
        if conn is None:
            joined = self._stack.enter_context(self._router.joined(self._server, self._snapshot))
            conn = self._conn = (
                _Guarded(joined, self._router, self._server) if joined is not None else self._search
            )
        return conn.execute(query, params)


class ConcurrentPostgresReader(PostgresReader):
    """The reader of a search whose transaction runs on ``server`` (through ``router``) and
    lends its snapshot. Every store error of its statements and its siblings' is a typed
    rankseam error, whichever thread meets it (:class:`_Guarded`)."""

    def __init__(
        self,
        store: PostgresStore,
        conn: psycopg.Connection[Any],
        router: Router,
        server: ServerPool,
    ) -> None:
        self._search = _Guarded(conn, router, server)
        super().__init__(store, self._search)
        self._router = router
        self._server = server

    @contextmanager
    def siblings(self, n: int, /) -> Iterator[list[PostgresReader]]:
        """``n`` readers of this snapshot for other threads
        (``rankseam.plugin.stores.ConcurrentReader``): this transaction's snapshot is exported
        (``pg_export_snapshot()``) and each sibling begins a transaction in it on the same
        server, on a spare pooled connection, at its first statement (with none to spare it
        shares this reader's connection). Their transactions end when the context exits."""
        if n < 0:
            raise ValueError(f"n must be >= 0, not {n}")
        if n == 0:
            yield []
            return
        row = self._search.execute("SELECT pg_export_snapshot()").fetchone()
        snapshot = str(row[0])  # type: ignore[index]
        with ExitStack() as stack:
            yield [
                self.sibling(_Joined(self._search, self._router, self._server, snapshot, stack))
                for _ in range(n)
            ]
