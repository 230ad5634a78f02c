"""The options of the PostgreSQL store, declared once with their types; the host checks them
(docs/writing-plugins.md, "Factories and options"). Light: no database driver is imported
here."""

from __future__ import annotations

import attrs

from rankseam.plugin import option

__all__ = ["PostgresStoreOptions"]

_IDENT = r"[a-z_][a-z0-9_]{0,62}"
_IDENT_WORDS = "a lower-case SQL identifier (letters, digits, '_', at most 63 characters)"


@attrs.frozen
class PostgresStoreOptions:
    """``[stores.postgres]``: each also a URL parameter (unset here: the URL's; the option
    wins)."""

    password: str | None = option(
        None,
        env=True,
        secret=True,
        help="the password apart from the URL; else the URL's, PGPASSWORD or ~/.pgpass",
    )
    schema: str | None = option(
        None,
        pattern=_IDENT,
        expect=_IDENT_WORDS,
        default_doc="the URL's schema=, else rankseam",
        help="the PostgreSQL schema that holds the store's tables",
    )
    pool_min: int | None = option(
        None, ge=0, default_doc="the URL's pool_min=, else 1", help="connections kept open"
    )
    pool_max: int | None = option(
        None, ge=1, default_doc="the URL's pool_max=, else 10", help="most connections at once"
    )
    connect_timeout: int | None = option(
        None,
        ge=2,
        default_doc="the URL's connect_timeout=, else 5",
        help="seconds a store call waits for a connection before StoreUnavailableError",
    )
    search_timeout: float | None = option(
        None,
        ge=0,
        default_doc="the URL's search_timeout=, else 30",
        help="statement_timeout of a search's read transaction, seconds (0: none)",
    )
    concurrent_channels: bool | None = option(
        None,
        default_doc="the URL's concurrent_channels=, else false",
        help="run a search's lexical and vector statements side by side on two connections "
        "of its snapshot (lower latency while the server has idle cores; not with Citus)",
    )
    replicas: tuple[str, ...] | None = option(
        None,
        default_doc="the URL's replica= parameters, else none",
        help="standbys that serve searches: host, host:port, socket folder or postgresql:// URL",
    )
    text_search: str | None = option(
        None,
        pattern=_IDENT,
        expect="the name of a text search configuration of the server, e.g. english or simple",
        default_doc="the URL's text_search=, else english",
        help="text search configuration of a new store",
    )
