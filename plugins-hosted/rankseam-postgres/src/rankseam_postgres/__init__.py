"""rankseam-postgres: a PostgreSQL + pgvector store for rankseam.

Registers the store ``postgres`` for ``postgresql://`` and ``postgres://`` targets
(``open_memory("postgresql://user@host/db")``, ``rankseam search --db postgresql://...``) and
its candidate sources ``lexical`` (full text, BM25), ``vector`` (pgvector) and ``importance``,
which run on that store only. See docs/plugins/postgres.md.

Options (``[stores.postgres]``): ``password`` (a string or ``{"$env" = "NAME"}``; else the
URL's, ``PGPASSWORD`` or ``~/.pgpass``), ``schema``, ``pool_min``, ``pool_max``,
``text_search`` (each also a URL parameter; the option wins).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rankseam.plugin import CandidateSourceRegister, hookimpl

if TYPE_CHECKING:
    from rankseam_postgres.store import PostgresStore

__version__ = "0.1.0"

__all__ = ["STORE_OPTIONS", "__version__", "open_store"]

#: Options of ``[stores.postgres]``.
STORE_OPTIONS = ("password", "schema", "pool_min", "pool_max", "text_search")


def open_store(url: str, options: Mapping[str, Any] | None = None) -> PostgresStore:
    """Open (creating or migrating its schema) the store at ``url`` with ``options``."""
    from rankseam_postgres.store import PostgresStore
    from rankseam_postgres.url import with_options

    return PostgresStore(with_options(url, options or {}))


def _lexical(options: Mapping[str, Any], context: object) -> Any:
    from rankseam_postgres.sources import PgLexicalSource

    return PgLexicalSource.from_options(options)


def _vector(options: Mapping[str, Any], context: object) -> Any:
    from rankseam_postgres.sources import PgVectorSource

    return PgVectorSource.from_options(options)


def _importance(options: Mapping[str, Any], context: object) -> Any:
    from rankseam_postgres.sources import PgImportanceSource

    return PgImportanceSource.from_options(options)


@hookimpl
def register_candidate_sources(register: CandidateSourceRegister) -> None:
    register(
        "lexical",
        _lexical,
        summary="PostgreSQL full text, BM25 over OR-joined query terms",
        options=("ranking", "normalization", "stopwords", "max_df", "max_postings"),
        store="postgres",  # type: ignore[call-arg]
    )
    register(
        "vector",
        _vector,
        summary="pgvector cosine over stored vectors of the active embedder (HNSW when large)",
        options=("min_score",),
        store="postgres",  # type: ignore[call-arg]
    )
    register(
        "importance",
        _importance,
        summary="importance prior over admitted candidates",
        options=(),
        store="postgres",  # type: ignore[call-arg]
    )
