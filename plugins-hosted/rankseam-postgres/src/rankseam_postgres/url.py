"""Store URLs: what rankseam reads from a ``postgresql://`` URL, what it hands to libpq, and the
redacted form that is the only one ever shown (repr, stats, logs, errors).

A URL is a libpq connection URI (``postgresql://user:password@host:port/dbname?param=value``);
every part may be left out and libpq fills it from the standard ``PG*`` environment variables
(``PGHOST``, ``PGPORT``, ``PGUSER``, ``PGPASSWORD``, ``PGDATABASE``, ``PGSSLMODE`` ...) and
``~/.pgpass``. rankseam takes its own parameters out of the query string before libpq sees it:

- ``schema`` (default ``rankseam``): the PostgreSQL schema that holds the store's tables, so one
  database can hold several stores;
- ``pool_min`` / ``pool_max`` (default 1 / 10): the connection pool's size per process;
- ``text_search`` (default ``english``): the text search configuration of a new store (a store
  keeps the one it was created with);
- ``connect_timeout`` (default 5, whole seconds >= 2, libpq's own minimum): the longest a store
  call waits for a connection; a server that cannot be reached within it raises
  :class:`~rankseam.errors.StoreUnavailableError`. libpq reads it too (one connection attempt);
- ``search_timeout`` (default 30 seconds, 0 = none): the server-side ``statement_timeout`` of a
  search's read transaction;
- ``replica`` (repeatable): a standby that serves searches, as ``host``, ``host:port``, a Unix
  socket folder, or a whole ``postgresql://`` URL (percent-encoded); see docs/plugins/postgres.md;
- ``concurrent_channels`` (default ``false``): ``true`` runs a search's lexical and vector
  statements side by side, each on a connection of its own in the search's one snapshot (a
  lower latency while the server has idle cores; more work per search when it has none; never
  with Citus, whose workers an exported snapshot does not reach).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import attrs

from rankseam.errors import ConfigurationError
from rankseam.plugin import parse_options
from rankseam.plugin.stores import StoreTarget
from rankseam_postgres.options import PostgresStoreOptions

__all__ = ["SCHEMES", "StoreURL", "parse_url", "redact", "with_options"]

#: URL schemes this store answers to.
SCHEMES = ("postgresql", "postgres")

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_SECRET_PARAMS = {"password", "sslpassword"}
_OWN = {
    "schema",
    "pool_min",
    "pool_max",
    "text_search",
    "connect_timeout",
    "search_timeout",
    "concurrent_channels",
}
_TRUE = {"true", "1", "on", "yes"}
_FALSE = {"false", "0", "off", "no"}
#: Default seconds of ``connect_timeout`` and ``search_timeout``.
CONNECT_TIMEOUT = 5
SEARCH_TIMEOUT = 30.0


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` (the host's redaction, the one form every
    message shows)."""
    return StoreTarget(url, "postgresql").redacted


@attrs.frozen(repr=False)
class StoreURL:
    """A parsed store URL. ``conninfo`` goes to libpq and is never shown; ``display`` is the
    redacted URL."""

    conninfo: str
    display: str
    schema: str = "rankseam"
    pool_min: int = 1
    pool_max: int = 10
    text_search: str = "english"
    connect_timeout: int = CONNECT_TIMEOUT
    search_timeout: float = SEARCH_TIMEOUT
    #: Whether a search's channels run side by side on two connections of one snapshot.
    concurrent_channels: bool = False
    #: Standbys for searches (``replica=`` parameters or the ``replicas`` option), as given.
    replicas: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    #: A password given apart from the URL (``[stores.postgres] password``); never shown.
    password: str | None = None

    @property
    def connect_kwargs(self) -> dict[str, str]:
        """Keyword arguments for ``psycopg.connect`` besides the conninfo."""
        return {} if self.password is None else {"password": self.password}

    def __repr__(self) -> str:
        return f"StoreURL({self.display!r})"

    def scrub(self, message: str) -> str:
        """``message`` with every secret of this URL replaced by ``***`` (for errors that
        quote what libpq or the server said)."""
        for secret in self.secrets:
            if secret:
                message = message.replace(secret, "***")
                message = message.replace(quote(secret, safe=""), "***")
        return message


def _int_param(name: str, value: str, low: int, display: str) -> int:
    try:
        out = int(value)
    except ValueError:
        out = low - 1
    if out < low:
        raise ConfigurationError(
            f"the store URL {display} has {name}={value!r}; it must be an integer >= {low}"
        )
    return out


def _seconds(name: str, value: str, display: str) -> float:
    try:
        out = float(value)
    except ValueError:
        out = -1.0
    if not 0 <= out < float("inf"):
        raise ConfigurationError(
            f"the store URL {display} has {name}={value!r}; it must be a number of seconds >= 0"
        )
    return out


def _bool_param(name: str, value: str, display: str) -> bool:
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ConfigurationError(
        f"the store URL {display} has {name}={value!r}; it must be true or false"
    )


def _display(url: str) -> str:
    """The redacted URL, its ``replica=`` URLs redacted too."""
    display = redact(url)
    parts = urlsplit(display)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if not any(k == "replica" and "://" in v for k, v in query):
        return display
    query = [(k, redact(v) if k == "replica" and "://" in v else v) for k, v in query]
    return urlunsplit(parts._replace(query=urlencode(query, safe="/:@*")))


def parse_url(url: str) -> StoreURL:
    """Parse a ``postgresql://`` store URL (see the module docstring)."""
    try:
        display = _display(url)
    except ValueError:
        display = redact(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigurationError(f"cannot parse the store URL {display}: {exc}") from None
    if parts.scheme not in SCHEMES:
        raise ConfigurationError(
            f"the store URL {display} is not a PostgreSQL URL; write postgresql://user@host/db"
        )
    secrets: list[str] = []
    if parts.password:
        secrets.extend({parts.password, unquote(parts.password)})
    own: dict[str, str] = {}
    passed: list[tuple[str, str]] = []
    replicas: list[str] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "replica":
            if not value.strip():
                raise ConfigurationError(
                    f"the store URL {display} has an empty replica=; name a standby there "
                    "(host, host:port, a Unix socket folder or a postgresql:// URL), or leave "
                    "the parameter out"
                )
            if value.startswith(tuple(f"{s}://" for s in SCHEMES)):
                secrets.extend(_url_secrets(value))
            replicas.append(value)
        elif key in _OWN:
            own[key] = value
        else:
            if key in _SECRET_PARAMS:
                secrets.append(value)
            passed.append((key, value))
    schema = own.get("schema", "rankseam")
    if not _IDENT.match(schema):
        raise ConfigurationError(
            f"the store URL {display} has schema={schema!r}; use a lower-case SQL identifier "
            "(letters, digits, '_', at most 63 characters)"
        )
    text_search = own.get("text_search", "english")
    if not _IDENT.match(text_search):
        raise ConfigurationError(
            f"the store URL {display} has text_search={text_search!r}; name a text search "
            "configuration of the server, e.g. english or simple"
        )
    pool_min = _int_param("pool_min", own.get("pool_min", "1"), 0, display)
    pool_max = _int_param("pool_max", own.get("pool_max", "10"), 1, display)
    if pool_max < pool_min:
        raise ConfigurationError(
            f"the store URL {display} has pool_max={pool_max} < pool_min={pool_min}"
        )
    connect_timeout = _int_param(
        "connect_timeout", own.get("connect_timeout", str(CONNECT_TIMEOUT)), 2, display
    )
    search_timeout = _seconds("search_timeout", own.get("search_timeout", "30"), display)
    concurrent = _bool_param(
        "concurrent_channels", own.get("concurrent_channels", "false"), display
    )
    # libpq bounds one connection attempt by the same timeout; over TCP, a server host that
    # vanished without closing its connections is found by keepalives after about as long
    passed.append(("connect_timeout", str(connect_timeout)))
    if not any(key.startswith(("keepalives", "tcp_user_timeout")) for key, _v in passed):
        passed += [
            ("keepalives_idle", str(connect_timeout)),
            ("keepalives_interval", "1"),
            ("keepalives_count", "3"),
        ]
    conninfo = urlunsplit(
        ("postgresql", parts.netloc, parts.path, urlencode(passed, safe="/"), parts.fragment)
    )
    return StoreURL(
        conninfo=conninfo,
        display=display,
        schema=schema,
        pool_min=pool_min,
        pool_max=pool_max,
        text_search=text_search,
        connect_timeout=connect_timeout,
        search_timeout=search_timeout,
        concurrent_channels=concurrent,
        replicas=tuple(replicas),
        secrets=tuple(secrets),
    )


def _url_secrets(url: str) -> list[str]:
    """The passwords a ``postgresql://`` URL holds (to scrub from messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [parts.password, unquote(parts.password)] if parts.password else []
    found += [v for k, v in parse_qsl(parts.query) if k in _SECRET_PARAMS]
    return found


def with_options(url: str, options: PostgresStoreOptions | Mapping[str, Any]) -> StoreURL:
    """The store URL ``url`` with ``[stores.postgres]`` options applied (an option wins over
    the URL's parameter): as the host checked them, or the table (checked here)."""
    if not isinstance(options, PostgresStoreOptions):
        options = parse_options(PostgresStoreOptions, options, "stores.postgres")
    parsed = parse_url(url)
    changes: dict[str, Any] = {
        key: getattr(options, key)
        for key in (
            "schema",
            "text_search",
            "pool_min",
            "pool_max",
            "search_timeout",
            "concurrent_channels",
        )
        if getattr(options, key) is not None
    }
    if options.connect_timeout is not None:
        changes["connect_timeout"] = options.connect_timeout
        conninfo = _set_param(parsed.conninfo, "connect_timeout", options.connect_timeout)
        if "keepalives" not in url and "tcp_user_timeout" not in url:  # our default follows
            conninfo = _set_param(conninfo, "keepalives_idle", options.connect_timeout)
        changes["conninfo"] = conninfo
    if options.replicas is not None:
        empty = [i for i, spec in enumerate(options.replicas, 1) if not spec.strip()]
        if empty:  # (the entries themselves are not shown: a URL may hold a password)
            raise ConfigurationError(
                f"[stores.postgres] replicas has an empty entry (number {empty[0]} of "
                f"{len(options.replicas)}); name a standby in each (host, host:port, a Unix "
                "socket folder or a postgresql:// URL)"
            )
        changes["replicas"] = options.replicas
        changes["secrets"] = (
            *parsed.secrets,
            *(s for r in options.replicas for s in _url_secrets(r)),
        )
    if options.password is not None:
        changes["password"] = options.password
        changes["secrets"] = (*changes.get("secrets", parsed.secrets), options.password)
    out = attrs.evolve(parsed, **changes)
    if out.pool_max < out.pool_min:
        raise ConfigurationError(
            f"the store {out.display} has pool_max={out.pool_max} < pool_min={out.pool_min}"
        )
    return out


def _set_param(conninfo: str, key: str, value: object) -> str:
    """``conninfo`` (a URL) with its query parameter ``key`` set to ``value``."""
    parts = urlsplit(conninfo)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != key]
    query.append((key, str(value)))
    return urlunsplit(parts._replace(query=urlencode(query, safe="/")))
