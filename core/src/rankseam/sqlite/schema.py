"""The SQLite schema of the embedded store, and its migration path.

``SCHEMA_VERSION`` is kept in the ``meta`` table (key ``schema_version``). Opening a store runs
every migration from the stored version up to ``SCHEMA_VERSION``, each in its own transaction;
a store written by a *newer* rankseam is refused with a clear message rather than guessed at.

To change the schema: add a function ``_migrate_N_to_N1(conn)`` to :data:`MIGRATIONS` under key
``N`` and bump ``SCHEMA_VERSION``. Migrations only ever add (tables, columns, indexes) or copy;
revision rows are immutable and are never rewritten.

Tables (version 7):

- ``meta(key, value)``: schema version, FTS tokenizer, creation time.
- ``namespaces(name, version, vector_epoch)``: ``version`` increments on every committed write
  in the namespace; ``vector_epoch`` when vectors of existing revisions are (re)written. Readers
  use them to refresh a cached vector matrix (incrementally while only ``version`` moved).
- ``space_epochs(namespace, space, epoch)`` (since version 3): increments when vectors of one
  space are written for existing revisions (``put_vectors``, what re-embedding writes). A
  space's vector epoch is the namespace's ``vector_epoch`` plus this one, so re-embedding into
  one space leaves the cached matrices and ANN indexes of the other spaces valid.
- ``memories(namespace, memory_id, head_rid, head_revision, deleted, deleted_at)``: one row per
  memory; ``deleted`` is the tombstone.
- ``revisions(rid, namespace, memory_id, revision, text, importance, metadata, created_at,
  content_hash, live, retired_version, thread, position, derived_from)``: immutable
  revisions. ``live`` is 1 for the current revision of a memory that is not deleted (the
  only rows search can find); ``retired_version`` is the namespace version at which it
  stopped being live. No other column ever changes. ``thread``, ``position`` and
  ``derived_from`` (since version 4; NULL in rows written before) are the revision's place
  in a conversation (docs/store.md, "Threads, positions and sources"), indexed by
  ``revisions_thread (namespace, thread, live, position, rid)`` (a thread's memories in
  thread order: neighbours, a thread between two positions) and ``revisions_derived
  (namespace, derived_from, live)`` (the memories derived from one), both partial over the
  rows that have the field.
- ``fts``: FTS5 index (external content = ``revisions``) over the live rows only.
- ``forgotten(namespace, memory_id, forgotten_at)`` (since version 6): what a hard delete
  (``forget``, ``reset``) leaves of a memory: its id and the time, nothing else
  (docs/store.md, "Forgetting").
- ``feedback(seq, feedback_id, namespace, created_at, record)`` (since version 7): what
  applications said about search results (``Memory.feedback``), a table of its own that no
  search, history or snapshot reads (:mod:`rankseam.sqlite.feedback`; docs/store.md,
  "Feedback").
- ``spaces(key, descriptor)`` and ``vectors(space, rid, vector)``: float32 vectors per embedder
  space; a vector is only ever compared with vectors of its own space. Since version 2 a
  plain rowid table with a unique ``(space, rid)`` index: version 1 declared it ``WITHOUT
  ROWID``, whose rows may keep only about 1 kB in the b-tree, so every 1 kB vector spilled to
  an overflow page of its own (4.7 kB on disk per 256-d vector instead of 1.2 kB).

New stores use 8 kB pages: seven 256-d vector rows fit a page (three in 4 kB).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from rankseam.errors import ConfigurationError
from rankseam.sqlite.feedback import FEEDBACK
from rankseam.sqlite.rows import INDEX_VALUES

__all__ = ["SCHEMA_VERSION", "TOKENIZERS", "check_identity", "ensure_schema"]

SCHEMA_VERSION = 7
#: Page size of new stores (see the module docstring).
PAGE_SIZE = 8192

#: FTS5 tokenizers the store accepts (chosen at creation, recorded in ``meta``).
TOKENIZERS = {
    "porter": "porter unicode61 remove_diacritics 2",
    "unicode61": "unicode61 remove_diacritics 2",
}


def _create(conn: sqlite3.Connection, tokenizer: str) -> None:
    script = f"""
        CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE namespaces (
            name TEXT PRIMARY KEY,
            version INTEGER NOT NULL DEFAULT 0,
            vector_epoch INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE memories (
            namespace TEXT NOT NULL,
            memory_id TEXT NOT NULL,
            head_rid INTEGER NOT NULL,
            head_revision INTEGER NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0,
            deleted_at REAL,
            PRIMARY KEY (namespace, memory_id)
        ) WITHOUT ROWID;
        CREATE TABLE revisions (
            rid INTEGER PRIMARY KEY,
            namespace TEXT NOT NULL,
            memory_id TEXT NOT NULL,
            revision INTEGER NOT NULL,
            text TEXT NOT NULL,
            importance REAL NOT NULL,
            metadata TEXT NOT NULL,
            created_at REAL NOT NULL,
            content_hash TEXT NOT NULL,
            live INTEGER NOT NULL DEFAULT 1,
            retired_version INTEGER,
            thread TEXT,
            position REAL,
            derived_from TEXT,
            UNIQUE (namespace, memory_id, revision)
        );
        CREATE INDEX revisions_live ON revisions (namespace, live, importance DESC, rid);
        CREATE INDEX revisions_retired ON revisions (namespace, retired_version)
            WHERE retired_version IS NOT NULL;
        {STRUCTURE_INDEXES};
        CREATE TABLE spaces (key TEXT PRIMARY KEY, descriptor TEXT NOT NULL);
        CREATE TABLE vectors (
            space TEXT NOT NULL,
            rid INTEGER NOT NULL,
            vector BLOB NOT NULL,
            UNIQUE (space, rid)
        );
        CREATE TABLE space_epochs (
            namespace TEXT NOT NULL,
            space TEXT NOT NULL,
            epoch INTEGER NOT NULL,
            PRIMARY KEY (namespace, space)
        ) WITHOUT ROWID;
        {METADATA_VALUES};
        {FORGOTTEN};
        {FEEDBACK};
        CREATE VIRTUAL TABLE fts USING fts5(
            text, content='revisions', content_rowid='rid', tokenize='{TOKENIZERS[tokenizer]}'
        );
        """
    # executescript() would COMMIT the caller's transaction: run statement by statement.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.executemany(
        "INSERT INTO meta(key, value) VALUES (?, ?)",
        [
            ("schema_version", str(SCHEMA_VERSION)),
            ("tokenizer", tokenizer),
            ("created_at", repr(time.time())),
        ],
    )


#: The indexes of the structure columns (see the module docstring).
STRUCTURE_INDEXES = (
    "CREATE INDEX revisions_thread ON revisions (namespace, thread, live, position, rid) "
    "WHERE thread IS NOT NULL; "
    "CREATE INDEX revisions_derived ON revisions (namespace, derived_from, live) "
    "WHERE derived_from IS NOT NULL"
)


#: The top-level metadata values of live revisions, one row per key: what filters on metadata
#: look up through an index instead of reading every revision's JSON (docs/filters.md). ``kind``
#: is ``text``, ``number``, ``bool`` (``num_value`` 1 or 0) or ``other`` (null, a list, an
#: object: it exists, and equals nothing). Written with the revision's full-text row and removed
#: with it when the revision retires.
METADATA_VALUES = (
    "CREATE TABLE IF NOT EXISTS metadata_values (rid INTEGER NOT NULL, namespace TEXT NOT NULL, "
    "key TEXT NOT NULL, kind TEXT NOT NULL, text_value TEXT, num_value REAL); "
    "CREATE INDEX IF NOT EXISTS metadata_text ON metadata_values "
    "(namespace, key, kind, text_value, rid); "
    "CREATE INDEX IF NOT EXISTS metadata_num ON metadata_values "
    "(namespace, key, kind, num_value, rid); "
    "CREATE INDEX IF NOT EXISTS metadata_rid ON metadata_values (rid)"
)


#: What a hard delete leaves of a memory (see the module docstring).
FORGOTTEN = (
    "CREATE TABLE IF NOT EXISTS forgotten (namespace TEXT NOT NULL, memory_id TEXT NOT NULL, "
    "forgotten_at REAL NOT NULL, PRIMARY KEY (namespace, memory_id)) WITHOUT ROWID"
)


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Copy the vectors into a rowid table (see the module docstring); the freed pages are
    reused by later writes (``VACUUM`` returns them to the file system)."""
    conn.execute(
        "CREATE TABLE vectors_v2 (space TEXT NOT NULL, rid INTEGER NOT NULL, "
        "vector BLOB NOT NULL, UNIQUE (space, rid))"
    )
    conn.execute(
        "INSERT INTO vectors_v2(space, rid, vector) SELECT space, rid, vector FROM vectors "
        "ORDER BY space, rid"
    )
    conn.execute("DROP TABLE vectors")
    conn.execute("ALTER TABLE vectors_v2 RENAME TO vectors")


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """Add the per-space vector epochs (see the module docstring)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS space_epochs (namespace TEXT NOT NULL, space TEXT NOT NULL, "
        "epoch INTEGER NOT NULL, PRIMARY KEY (namespace, space)) WITHOUT ROWID"
    )


def _migrate_3_to_4(conn: sqlite3.Connection) -> None:
    """Add the structure columns (NULL in every existing row: adding a column rewrites no
    row) and their indexes (see the module docstring); those a store already has are left
    alone."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(revisions)")}
    for column in ("thread TEXT", "position REAL", "derived_from TEXT"):
        if column.split()[0] not in have:
            conn.execute(f"ALTER TABLE revisions ADD COLUMN {column}")
    for statement in STRUCTURE_INDEXES.split(";"):
        conn.execute(statement.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS"))


def _migrate_4_to_5(conn: sqlite3.Connection) -> None:
    """Add the metadata values of live revisions (see :data:`METADATA_VALUES`), filled from
    the revisions' metadata."""
    for statement in METADATA_VALUES.split(";"):
        conn.execute(statement)
    # filled once: a store that holds the table already (made to look older) keeps its rows
    if conn.execute("SELECT 1 FROM metadata_values LIMIT 1").fetchone() is None:
        conn.execute(f"{INDEX_VALUES} WHERE r.live = 1")


def _migrate_5_to_6(conn: sqlite3.Connection) -> None:
    """Add the table of forgotten memories (see :data:`FORGOTTEN`)."""
    conn.execute(FORGOTTEN)


def _migrate_6_to_7(conn: sqlite3.Connection) -> None:
    """Add the feedback table (see :data:`~rankseam.sqlite.feedback.FEEDBACK`)."""
    for statement in FEEDBACK.split(";"):
        conn.execute(statement)


#: version N -> function migrating a version-N store to N+1.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
    3: _migrate_3_to_4,
    4: _migrate_4_to_5,
    5: _migrate_5_to_6,
    6: _migrate_6_to_7,
}


def _stored_version(conn: sqlite3.Connection) -> int | None:
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    if not has_meta:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row[0]) if row else None


def _not_a_store(conn: sqlite3.Connection) -> str | None:
    """Why the database of ``conn`` is not a rankseam store, or ``None`` when it is one (or
    holds no table yet). Reads only."""
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    if not tables:
        return None
    if "meta" not in tables:
        return "it has no rankseam meta table"
    try:
        rows = dict(
            conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('schema_version', 'tokenizer')"
            ).fetchall()
        )
    except sqlite3.OperationalError:
        return "its meta table is not rankseam's"
    version = rows.get("schema_version")
    if not isinstance(version, str) or not (version.isascii() and version.isdigit()):
        return "its meta table names no rankseam schema version"
    if rows.get("tokenizer") not in TOKENIZERS:
        return "its meta table names no rankseam tokenizer"
    return None


def check_identity(path: str) -> None:
    """Refuse an existing database that is not a rankseam store, reading it only: opening
    another application's file never changes it (not even its journal mode)."""
    file = Path(path).expanduser()
    try:
        if not file.is_file() or file.stat().st_size == 0:
            return  # nothing there yet: a new store
        conn = sqlite3.connect(file.absolute().as_uri() + "?mode=ro", uri=True)
    except (OSError, sqlite3.Error):
        return  # opening it for real reports what is wrong
    try:
        why = _not_a_store(conn)
    except sqlite3.DatabaseError:
        return  # not an SQLite file, or unreadable: opening it for real reports it
    finally:
        conn.close()
    if why is not None:
        raise ConfigurationError(
            f"{path!r} is an SQLite database but not a rankseam store ({why}); it was left "
            "unchanged: choose another path (--db / RANKSEAM_DB)"
        )


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:  # SQLite ends it itself on some errors (a full disk)
        conn.execute("ROLLBACK")


def ensure_schema(conn: sqlite3.Connection, *, path: str, tokenizer: str) -> str:
    """Create or migrate the schema; return the store's FTS tokenizer name."""
    if tokenizer not in TOKENIZERS:
        raise ConfigurationError(
            f"unknown FTS tokenizer {tokenizer!r}; choose one of {sorted(TOKENIZERS)}"
        )
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _stored_version(conn)
        if version is None:
            tables = conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE type='table'"
            ).fetchone()[0]
            if tables:
                raise ConfigurationError(
                    f"{path!r} is an SQLite database but not a rankseam store; choose another "
                    "path (--db / RANKSEAM_DB)"
                )
            _create(conn, tokenizer)
            version = SCHEMA_VERSION
        if version > SCHEMA_VERSION:
            raise ConfigurationError(
                f"store {path!r} has schema version {version}, newer than this rankseam "
                f"understands ({SCHEMA_VERSION}); upgrade rankseam"
            )
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    while version < SCHEMA_VERSION:
        conn.execute("BEGIN IMMEDIATE")
        try:
            MIGRATIONS[version](conn)
            version += 1
            conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
    row = conn.execute("SELECT value FROM meta WHERE key='tokenizer'").fetchone()
    return str(row[0])
