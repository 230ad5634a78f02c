"""rankseam-postgres: a PostgreSQL + pgvector store for rankseam.

Registers the store ``postgres`` for ``postgresql://`` and ``postgres://`` targets
(``open_memory("postgresql://user@host/db")``, ``rankseam search --db postgresql://...``). The
host's candidate sources (lexical, vector, importance) run on it through its reader: BM25 over
``tsvector`` and pgvector cosine in PostgreSQL's dialect. See docs/plugins/postgres.md.

Options (``[stores.postgres]``): ``password`` (a string or ``{"$env" = "NAME"}``; else the
URL's, ``PGPASSWORD`` or ``~/.pgpass``), ``schema``, ``pool_min``, ``pool_max``,
``text_search``, ``connect_timeout``, ``search_timeout``, ``replicas`` (each also a URL
parameter, ``replica=`` for each standby; the option wins).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rankseam.plugin import FactoryContext, StoreRegister, hookimpl
from rankseam.plugin.stores import StoreTarget
from rankseam_postgres.options import PostgresStoreOptions
from rankseam_postgres.url import SCHEMES

if TYPE_CHECKING:
    from rankseam_postgres.store import PostgresStore

__version__ = "0.1.0"

__all__ = ["SCHEMES", "PostgresStoreOptions", "__version__", "open_store"]


def open_store(
    url: str,
    options: PostgresStoreOptions | Mapping[str, Any] | None = None,
    *,
    create: bool = True,
) -> PostgresStore:
    """Open the store at ``url`` with ``[stores.postgres]`` ``options``: its schema is
    created (``create=True``) or migrated on open."""
    from rankseam_postgres.store import PostgresStore
    from rankseam_postgres.url import with_options

    return PostgresStore(with_options(url, options or {}), create=create)


def _store(target: StoreTarget, options: PostgresStoreOptions, context: FactoryContext) -> Any:
    return open_store(target.url, options, create=target.create)


@hookimpl
def register_stores(register: StoreRegister) -> None:
    register(
        "postgres",
        _store,
        schemes=SCHEMES,
        summary="PostgreSQL + pgvector: one store for many processes and machines",
        options=PostgresStoreOptions,
    )
