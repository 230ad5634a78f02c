"""A search's reader that lends its snapshot to other threads
(``rankseam.plugin.ConcurrentReader``), for ``concurrent_channels=true``: the host's lexical
and vector channels then run side by side, each on a connection of its own in the one
snapshot (docs/plugins/postgres.md, "Connections and pooling"). Never for Citus, whose workers
an exported snapshot does not reach."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

from rankseam_postgres.reader import PostgresReader

if TYPE_CHECKING:
    from rankseam_postgres.pools import Router, ServerPool
    from rankseam_postgres.store import PostgresStore

__all__ = ["ConcurrentPostgresReader"]


class _Joined:
    """The connection of a sibling reader (:meth:`ConcurrentPostgresReader.siblings`): another
    transaction of the search's snapshot on the same server, begun on its first statement
    (in the thread that uses it), or the search's own connection when the pool has none to
    spare (psycopg runs one statement at a time on it: the same answers, one after the
    other). Its statements' errors are raised as the store's errors, in that thread."""

    def __init__(
        self,
        search: psycopg.Connection[Any],
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
        self._conn: psycopg.Connection[Any] | None = None

    def execute(self, query: Any, params: Any = None, /) -> psycopg.Cursor[Any]:
        conn = self._conn
        if conn is None:
            joined = self._stack.enter_context(self._router.joined(self._server, self._snapshot))
            conn = self._conn = joined if joined is not None else self._search
        try:
            return conn.execute(query, params)
        except psycopg.OperationalError as exc:
            raise self._router.failed(self._server, conn, exc) from None


class ConcurrentPostgresReader(PostgresReader):
    """The reader of a search whose transaction runs on ``server`` (through ``router``) and
    lends its snapshot."""

    def __init__(
        self,
        store: PostgresStore,
        conn: psycopg.Connection[Any],
        router: Router,
        server: ServerPool,
    ) -> None:
        super().__init__(store, conn)
        self._search = conn
        self._router = router
        self._server = server

    @contextmanager
    def siblings(self, n: int, /) -> Iterator[list[PostgresReader]]:
        """``n`` readers of this snapshot for other threads (``rankseam.plugin.ConcurrentReader``):
        this transaction's snapshot is exported (``pg_export_snapshot()``) and each sibling
        begins a transaction in it on the same server, on a spare pooled connection, at its
        first statement (with none to spare it shares this reader's connection). Their
        transactions end when the context exits."""
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
