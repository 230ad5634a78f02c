"""Connections to the servers of a store: one pool per server (the primary and each standby),
every wait bounded by ``connect_timeout``, a typed error for a server that cannot be reached,
and the routing of searches to standbys with read-your-writes (docs/plugins/postgres.md,
"Outages" and "Read replicas").

- **Bounded waits.** A call waits at most ``connect_timeout`` for a connection. A pooled
  connection that a server restart broke is found by the call's first statement, discarded
  and replaced, within the same bound (that first statement changed nothing, so it is safe to
  run on another connection).
- **Outage.** Once a server was found down, each call first tries one direct connection
  (libpq bounds it by ``connect_timeout``): refused, it raises
  :class:`~rankseam.errors.StoreUnavailableError` at once with libpq's reason; accepted, the
  call runs on it and the pool refills as calls need it. So nothing blocks longer than the
  connect timeout while the server is down, and the first call after a restart succeeds.
- **Replicas.** A search goes to a standby (round robin) unless this store object wrote
  something the standby has not replayed yet: then to the primary, until
  ``pg_last_wal_replay_lsn()`` on that standby has passed the write's commit
  (``pg_current_wal_lsn()`` after the commit). What the primary held when the store object
  opened counts as written by it (the schema's creation or migration included), so a search
  never reads a standby that lacks the store's tables.
- **Standbys are checked in the background.** A standby joins the searches' rotation once a
  background check (started when the store opens) has reached it and found the pgvector
  type in its database; one that cannot be reached, or lacks the extension (it has not
  replayed ``CREATE EXTENSION vector`` yet), is left out, with the reason in the log and in
  ``stats()``, and checked again every :data:`REPLICA_RETRY_S` seconds, in the background. So
  a standby that is down costs no search the connect timeout, except the one search that
  finds it gone while it was in the rotation.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeAlias

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from rankseam.errors import (
    ConfigurationError,
    StoreError,
    StoreUnavailableError,
    ValidationError,
)
from rankseam_postgres.url import SCHEMES, StoreURL, redact

__all__ = [
    "REPLICA_RETRY_S",
    "Router",
    "ServerPool",
    "again",
    "configuration_error",
    "lsn_value",
]

log = logging.getLogger("rankseam_postgres")

#: Seconds between the background checks of a standby left out of the searches' rotation
#: (it could not be reached, or lacks the pgvector extension).
REPLICA_RETRY_S = 30.0
#: Why a standby whose database has no pgvector type is left out.
_NO_VECTOR = (
    "its database has no pgvector extension: it has not replayed the primary's `CREATE "
    "EXTENSION vector` yet (it rejoins the searches once it has), or it is not a standby of "
    "this store's primary"
)

#: How a search's read transaction begins (one snapshot for all its statements).
_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
#: Seconds :meth:`ServerPool.spare` gives the pool (an idle connection is handed over at once).
_NO_WAIT = 0.001
#: What ``pg_export_snapshot()`` answers (``00000003-0000001B-1``).
_SNAPSHOT_ID = re.compile(r"[0-9A-F]+-[0-9A-F]+-[0-9]+")

Connection: TypeAlias = psycopg.Connection[Any]

#: What a statement on a standby raises for a table, type or schema of the store it has not
#: replayed yet.
_MISSING = (
    psycopg.errors.UndefinedTable,
    psycopg.errors.UndefinedObject,
    psycopg.errors.UndefinedFunction,
    psycopg.errors.InvalidSchemaName,
)


def lsn_value(text: str | None) -> int:
    """A ``pg_lsn`` (``16/B374D848``) as an integer (``None``: 0)."""
    if not text:
        return 0
    high, _, low = str(text).partition("/")
    return (int(high, 16) << 32) + int(low, 16)


First = str | Callable[[Connection], Any] | None


def _run(conn: Connection, first: First) -> Any:
    if first is None:
        return None
    if isinstance(first, str):
        conn.execute(first)
        return None
    return first(conn)


def again(err: Exception) -> Exception:
    """A new exception like ``err`` (its type, message and fields), to raise it once more
    elsewhere (another statement, another thread) without sharing one traceback."""
    if isinstance(err, StoreUnavailableError):
        return StoreUnavailableError(str(err), maybe_committed=err.maybe_committed)
    if isinstance(err, StoreError):
        return StoreError(str(err), reason=err.reason)
    if isinstance(err, ConfigurationError | ValidationError):
        return type(err)(str(err))
    return err


def _register_if_there(conn: Connection) -> None:
    """``register_vector`` on a standby's connection, unless its database has no pgvector
    type (yet): the search that gets the connection finds that and says so (a connection the
    pool cannot configure would only be retried until the connect timeout)."""
    try:
        register_vector(conn)
    except psycopg.ProgrammingError:  # "vector type not found in the database"
        pass


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def configuration_error(url: StoreURL, what: str, exc: BaseException) -> ConfigurationError:
    """The error for a store that cannot work as configured (at open: no such host, a wrong
    password, no database)."""
    return ConfigurationError(
        f"{what} the PostgreSQL store {url.display}: {url.scrub(first_line(exc))}; check the "
        "URL, the PG* environment variables (PGHOST, PGUSER, PGPASSWORD ...) and that the "
        "server is reachable"
    )


class ServerPool:
    """One server's connection pool, its health, and (for a standby) how far it replayed."""

    def __init__(
        self,
        url: StoreURL,
        conninfo: str,
        display: str,
        *,
        role: str,
        min_size: int,
        name: str,
    ) -> None:
        self.url = url
        self.conninfo = conninfo
        self.display = display
        self.role = role
        self.timeout = float(url.connect_timeout)
        self._kwargs: dict[str, Any] = {"autocommit": True, **url.connect_kwargs}
        self._configure = register_vector if role == "primary" else _register_if_there
        self.pool = ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=url.pool_max,
            kwargs=self._kwargs,
            configure=self._configure,
            open=False,
            name=name,
            timeout=self.timeout,
            # a failed reconnection gives up soon; the next call that needs a connection
            # starts a new attempt at once (no backoff of minutes after a long outage)
            reconnect_timeout=self.timeout,
        )
        #: When the server was last found unreachable (``None``: not since it last answered).
        self.down_since: float | None = None
        #: The highest ``pg_last_wal_replay_lsn()`` seen on this standby.
        self.replayed = 0
        #: Searches served (for ``stats()``).
        self.searches = 0
        #: A standby: whether searches may go to it (once a background check reached it).
        self.in_rotation = role == "primary"
        #: A standby left out: why (shown in ``stats()`` and the log), and when it is checked
        #: again.
        self.problem: str | None = None
        self.retry_at = 0.0

    def note_replayed(self, lsn: str | None) -> None:
        self.replayed = max(self.replayed, lsn_value(lsn))

    def probe(self) -> str | None:
        """Check a standby on a connection of its own (never the pool's, never a search's):
        None when it answers and its database has the pgvector type, else what is wrong."""
        try:
            conn = psycopg.connect(self.conninfo, **self._kwargs)
        except psycopg.Error as exc:
            return f"it cannot be reached: {self.url.scrub(first_line(exc))}"
        try:
            with conn:
                row = conn.execute(
                    "SELECT pg_last_wal_replay_lsn()::text, to_regtype('vector') IS NOT NULL"
                ).fetchone()
        except psycopg.Error as exc:
            return f"a check on it failed: {self.url.scrub(first_line(exc))}"
        if row is None or not row[1]:
            return _NO_VECTOR
        self.note_replayed(row[0])
        return None

    def open(self, *, wait: bool) -> None:
        self.pool.open(wait=wait, timeout=self.timeout)

    def close(self) -> None:
        self.pool.close()

    def unavailable(
        self, what: str, exc: BaseException | None, *, maybe_committed: bool = False
    ) -> StoreUnavailableError:
        """The error for this server not answering (and the mark that it is down)."""
        if self.down_since is None:
            self.down_since = time.monotonic()
        detail = f": {self.url.scrub(first_line(exc))}" if exc is not None else ""
        role = "" if self.role == "primary" else f" (standby {self.display})"
        return StoreUnavailableError(
            f"{what} the PostgreSQL store {self.url.display}{role}{detail}; the server cannot "
            f"be reached (connect_timeout={self.url.connect_timeout} s). Retry once it is "
            "back: the store reconnects by itself",
            maybe_committed=maybe_committed,
        )

    def acquire(self, first: First = None) -> tuple[Connection, bool, Any]:
        """A connection on which ``first`` ran (a statement, or a function of the connection,
        that changes nothing: it is repeated on another connection when the first was broken),
        whether it came from the pool, and what ``first`` returned; within ``connect_timeout``."""
        deadline = time.monotonic() + self.timeout
        while True:
            if self.down_since is not None:
                return self._direct(first)
            try:
                conn = self.pool.getconn(timeout=max(deadline - time.monotonic(), 0.001))
            except PoolTimeout:
                raise self.unavailable(
                    "no connection within the connect timeout to", None
                ) from None
            try:
                return conn, True, _run(conn, first)
            except psycopg.OperationalError as exc:
                broken = conn.broken or conn.closed
                self.pool.putconn(conn)  # a broken connection is discarded and replaced
                if not broken:
                    raise
                if time.monotonic() >= deadline:
                    raise self.unavailable("lost the connection to", exc) from None
                # the server restarted or is gone: another pooled connection, or (once none
                # is left) a direct one, which says which
                if self.pool.get_stats().get("pool_available", 0) == 0:
                    self.down_since = time.monotonic()
            except BaseException:
                self.pool.putconn(conn)
                raise

    def spare(self, begin: str) -> Connection | None:
        """A pooled connection on which ``begin`` ran, if one is idle now (else ``None``,
        after asking the pool to open one for next time); never a direct connection, never
        a wait."""
        if self.down_since is not None:
            return None
        try:
            conn = self.pool.getconn(timeout=_NO_WAIT)
        except PoolTimeout:
            return None
        try:
            conn.execute(begin)
        except psycopg.Error:
            self.pool.putconn(conn)  # rolled back; a broken one is discarded and replaced
            return None
        return conn

    def _direct(self, first: First) -> tuple[Connection, bool, Any]:
        """One connection outside the pool (libpq bounds it by ``connect_timeout``)."""
        try:
            conn = psycopg.connect(self.conninfo, **self._kwargs)
        except psycopg.OperationalError as exc:
            self.down_since = time.monotonic()
            raise self.unavailable("cannot connect to", exc) from None
        try:
            self._configure(conn)
            result = _run(conn, first)
        except psycopg.OperationalError as exc:
            broken = conn.broken
            conn.close()
            if not broken:
                raise
            raise self.unavailable("lost the connection to", exc) from None
        except BaseException:
            conn.close()
            raise
        self.down_since = None
        return conn, False, result

    def release(self, conn: Connection, pooled: bool) -> None:
        if pooled:
            self.pool.putconn(conn)
        else:
            conn.close()


def replica_conninfo(primary: StoreURL, spec: str) -> tuple[str, str]:
    """The conninfo and the shown name of the standby ``spec``: a whole ``postgresql://`` URL,
    else a host (or Unix socket folder) with an optional ``:port`` that replaces the
    primary's, every other parameter (user, database, password, TLS) kept."""
    if spec.startswith(tuple(f"{s}://" for s in SCHEMES)):
        extra = {"connect_timeout": primary.connect_timeout}
        return make_conninfo(spec, **extra), redact(spec)
    host, port = spec, None
    if not spec.startswith("/") and spec.count(":") == 1:
        host, _, port = spec.partition(":")
    params: dict[str, Any] = {"host": host}
    if port:
        params["port"] = port
    return make_conninfo(primary.conninfo, **params), spec


class Router:
    """The primary's pool, the standbys' pools, and which one serves the next search."""

    def __init__(self, url: StoreURL, name: str) -> None:
        self.url = url
        self.primary = ServerPool(
            url, url.conninfo, url.display, role="primary", min_size=url.pool_min, name=name
        )
        self.replicas: list[ServerPool] = []
        for i, spec in enumerate(url.replicas):
            conninfo, shown = replica_conninfo(url, spec)
            self.replicas.append(
                ServerPool(url, conninfo, shown, role="standby", min_size=0, name=f"{name}:r{i}")
            )
        self._turn = itertools.count()
        self._lock = threading.Lock()
        #: The commit position of this store object's latest write (0: none yet); at open,
        #: the primary's position then (the store's creation or migration included).
        self.written = 0
        #: The background checks of standbys left out of the rotation (:meth:`_check_standbys`).
        self._checker: threading.Thread | None = None
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._search_timeout = ""
        if url.search_timeout > 0:
            ms = max(1, round(url.search_timeout * 1000))
            self._search_timeout = f"; SET LOCAL statement_timeout = {ms}"
        self._search_begin = _READ + self._search_timeout

    def open(self) -> None:
        self.primary.open(wait=self.url.pool_min > 0)
        for replica in self.replicas:
            replica.open(wait=False)
        if self.replicas:
            self._checker = threading.Thread(
                target=self._check_standbys, name="rankseam-pg-standby-check", daemon=True
            )
            self._checker.start()

    def close(self) -> None:
        self._closing.set()
        self._wake.set()  # the checker ends at its next step (never waited for here)
        for server in (self.primary, *self.replicas):
            server.close()

    def _check_standbys(self) -> None:
        """The background checks: each standby out of the rotation is probed at once, then
        every :data:`REPLICA_RETRY_S` seconds until it answers (and holds pgvector); a search
        that finds one gone wakes this up."""
        while not self._closing.is_set():
            pause: float | None = None
            for replica in self.replicas:
                if replica.in_rotation:
                    continue
                left = replica.retry_at - time.monotonic()
                if left > 0:
                    pause = left if pause is None else min(pause, left)
                    continue
                problem = replica.probe()
                if self._closing.is_set():
                    return
                if problem is None:
                    if replica.problem is not None:
                        log.warning(
                            "standby %s of %s is back in the searches' rotation",
                            replica.display,
                            self.url.display,
                        )
                    replica.problem = None
                    replica.in_rotation = True
                else:
                    self._leave_out(replica, problem)
                    pause = REPLICA_RETRY_S if pause is None else min(pause, REPLICA_RETRY_S)
            self._wake.wait(pause)
            self._wake.clear()

    def wrote(self, lsn: str | None) -> None:
        """Record a committed write's position (read-your-writes)."""
        value = lsn_value(lsn)
        with self._lock:
            self.written = max(self.written, value)

    # -- calls -----------------------------------------------------------------------------

    def fetch(self, query: Any, args: Any = None, *, one: bool = False) -> Any:
        """One read statement on the primary (repeated on another connection when the pool's
        was broken by a server restart): its rows, or its first row with ``one``."""

        def run(conn: Connection) -> Any:
            cur = conn.execute(query, args)
            return cur.fetchone() if one else cur.fetchall()

        try:
            conn, pooled, rows = self.primary.acquire(run)
        except psycopg.Error as exc:  # the server answered: not an outage
            raise configuration_error(self.url, "a statement failed on", exc) from None
        self.primary.release(conn, pooled)
        return rows

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A primary's connection in autocommit mode."""
        conn, pooled, _r = self.primary.acquire()
        try:
            yield conn
        except psycopg.Error as exc:
            raise self.failed(self.primary, conn, exc) from None
        finally:
            self.primary.release(conn, pooled)

    @contextmanager
    def transaction(self, begin: str) -> Iterator[Connection]:
        """One transaction on the primary: ``begin`` runs first (on another connection when
        the pool's was broken), COMMIT last. A connection lost before COMMIT left nothing
        (the server rolls the transaction back); one lost during COMMIT may have committed."""
        conn, pooled, _r = self.primary.acquire(begin)
        try:
            yield from self._body(self.primary, conn, write=not begin.endswith("READ ONLY"))
        finally:
            self.primary.release(conn, pooled)

    @contextmanager
    def search(self) -> Iterator[tuple[ServerPool, Connection]]:
        """A search's read transaction: on a standby when one may serve it, else the primary;
        ``search_timeout`` is its ``statement_timeout``. Yields the server and the connection
        (:meth:`joined` opens more transactions of its snapshot on that server)."""
        server, conn, pooled = self._search_connection()
        try:
            yield from self._body(server, conn, write=False, shown=(server, conn))
        finally:
            server.release(conn, pooled)

    @contextmanager
    def joined(self, server: ServerPool, snapshot: str) -> Iterator[Connection | None]:
        """Another read transaction on ``server`` in the exported ``snapshot`` (a search's
        transaction, whose ``pg_export_snapshot()`` it is): it sees exactly what that one
        sees, under the same ``statement_timeout``. ``None`` when the server's pool has no
        connection to spare right now (the caller then shares the search's own): a search
        never waits for a second connection, so many threads searching at once cannot
        starve the pool."""
        if not _SNAPSHOT_ID.fullmatch(snapshot):
            raise ValidationError(f"not an exported snapshot: {snapshot!r}")
        begin = f"{_READ}; SET TRANSACTION SNAPSHOT '{snapshot}'{self._search_timeout}"
        spare = server.spare(begin)
        if spare is None:
            yield None
            return
        try:
            yield from self._body(server, spare, write=False)
        finally:
            server.pool.putconn(spare)

    def _body(
        self, server: ServerPool, conn: Connection, *, write: bool, shown: Any = None
    ) -> Iterator[Any]:
        """The body of a transaction on ``conn``: yields ``shown`` (default: ``conn``); an
        error rolls back and is raised as the store's error; the end commits."""
        try:
            yield conn if shown is None else shown
        except BaseException as exc:
            if not (conn.broken or conn.closed):
                try:
                    conn.execute("ROLLBACK")
                except psycopg.Error:
                    pass
            if isinstance(exc, psycopg.Error):
                raise self.failed(server, conn, exc) from None
            raise
        try:
            if write and self.replicas:  # where the commit is in the WAL, when it wrote
                cur = conn.execute(
                    "SELECT pg_current_xact_id_if_assigned()::text; COMMIT; "
                    "SELECT pg_current_wal_lsn()::text"
                )
                wrote = cur.fetchone()
                cur.nextset()
                cur.nextset()
                lsn = cur.fetchone()
                if wrote and wrote[0] is not None and lsn:
                    self.wrote(lsn[0])
            else:
                conn.execute("COMMIT")
        except psycopg.errors.SerializationFailure as exc:  # pragma: no cover - defensive
            raise ValidationError(f"a write to {self.url.display} conflicted: {exc}") from None
        except psycopg.Error as exc:
            if write and (conn.broken or conn.closed):
                raise server.unavailable(
                    "lost the connection while committing to", exc, maybe_committed=True
                ) from None
            raise self.failed(server, conn, exc) from None

    def failed(self, server: ServerPool, conn: Connection, exc: Exception) -> Exception:
        """The error for ``exc`` raised by a statement on ``conn`` (before any COMMIT)."""
        if conn.broken or conn.closed:
            return server.unavailable("lost the connection to", exc)
        if isinstance(exc, psycopg.errors.SerializationFailure) and server.role != "primary":
            return StoreError(
                f"a search on the standby {server.display} of {self.url.display} was "
                f"cancelled by its recovery ({first_line(exc)}); retry it, and set "
                "hot_standby_feedback = on on the standby",
                reason="conflict",
            )
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return StoreError(
                f"a statement on {self.url.display} was cancelled by the server ({first_line(exc)}"
                f"); a search's limit is search_timeout={self.url.search_timeout:g} s",
                reason="timeout",
            )
        if server.role != "primary" and isinstance(exc, _MISSING):
            return StoreError(
                f"the standby {server.display} of {self.url.display} lacks part of the store "
                f"({first_line(exc)}): it has not replayed the store's creation or migration "
                "yet; retry once it has caught up",
                reason="lagging",
            )
        return configuration_error(self.url, "a statement failed on", exc)

    def _search_connection(self) -> tuple[ServerPool, Connection, bool]:
        """The server, connection (the search's BEGIN run on it) and pooled flag."""
        begin = self._search_begin
        for replica in self._rotation():

            def start(conn: Connection, replica: ServerPool = replica) -> str | None:
                """BEGIN the search on ``conn`` unless the standby is behind this store's last
                write (checked while it may be; remembered once it is not) or lacks pgvector:
                None, else why not."""
                if self.written > replica.replayed:
                    row = conn.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()
                    replica.note_replayed(row[0] if row else None)
                    if self.written > replica.replayed:
                        return "behind"
                if conn.adapters.types.get("vector") is None:
                    try:
                        register_vector(conn)
                    except psycopg.ProgrammingError:
                        return _NO_VECTOR
                conn.execute(begin)
                return None

            try:
                conn, pooled, refused = replica.acquire(start)
            except (StoreUnavailableError, psycopg.Error) as exc:
                self._skip(replica, f"it cannot be used: {first_line(exc)}")
                continue
            if refused is not None:
                replica.release(conn, pooled)
                if refused != "behind":
                    self._skip(replica, refused)
                continue  # behind this store's last write: another one, or the primary
            replica.searches += 1
            return replica, conn, pooled
        conn, pooled, _r = self.primary.acquire(begin)
        self.primary.searches += 1
        return self.primary, conn, pooled

    def _rotation(self) -> Sequence[ServerPool]:
        if not self.replicas:
            return ()
        start = next(self._turn) % len(self.replicas)
        order = self.replicas[start:] + self.replicas[:start]
        return [r for r in order if r.in_rotation]

    def _skip(self, replica: ServerPool, why: str) -> None:
        """A search found ``replica`` unusable: out of the rotation until the background
        check finds it usable again."""
        self._leave_out(replica, why)
        self._wake.set()

    def _leave_out(self, replica: ServerPool, why: str) -> None:
        replica.in_rotation = False
        replica.retry_at = time.monotonic() + REPLICA_RETRY_S
        if why != replica.problem:  # said once, not at every check
            log.warning(
                "standby %s of %s left out of searches (checked again every %.0f s in the "
                "background): %s",
                replica.display,
                self.url.display,
                REPLICA_RETRY_S,
                self.url.scrub(why),
            )
        replica.problem = why

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"primary_searches": self.primary.searches}
        if self.replicas:
            out["replicas"] = [
                {
                    "replica": r.display,
                    "searches": r.searches,
                    "in_rotation": r.in_rotation,
                    "problem": None if r.problem is None else self.url.scrub(r.problem),
                }
                for r in self.replicas
            ]
        return out
