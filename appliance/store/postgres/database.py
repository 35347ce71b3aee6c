"""The PostgreSQL connection: opening, migrations, transactions, the SQL the repositories share.

Why it is shaped this way:

* The repositories write ``?`` parameters (DuckDB's); ``_translate`` turns them into psycopg's
  ``%s`` outside quoted text, once per statement text.
* JSON columns are read back as their text, as DuckDB returns them (psycopg would parse them),
  and every session runs in UTC.
* A pool of connections per process (psycopg-pool); a thread's transaction holds one and every
  read the thread makes meanwhile runs on it, so a record reads its own writes. Other processes
  and hosts have their own pools; PostgreSQL orders them (session advisory locks, row locks;
  serialization failures and deadlocks become ``WriteConflict``, which the store retries).
* Migrations run under an advisory lock, so N processes opening a new database at once do not
  race to create it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ...errors import CorruptStoreError, DiskFullError, StoreError
from ..database import Connection, WriteConflict, first_row, put_meta, sql_path, versions_to_apply
from ..vectors import ENCODER_TABLES
from .migrations import MIGRATIONS, SCHEMA_LOCK

__all__ = ["PostgresDatabase", "POOL_SIZE"]

# connections per process: a server's request threads read in parallel, its writers of one
# session queue on the session's lock in the database, not on a Python lock
POOL_SIZE = 8
POOL_WAIT = 30.0  # seconds a request waits for a free connection before it is told so
# the tables that grow with every record (and every encoder's vectors)
_MAINTAINED = {"memories", "entities", "entity_history", "memory_entities", "lexical_terms", "lexical_docs"} | {
    "memory_days",
    *(table for table, _ in ENCODER_TABLES.values()),
}


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401 - needed by the database, imported where it is used
    except ImportError:
        raise StoreError(
            "a postgresql:// memory needs psycopg", hint="install the extra: pip install 'memory-appliance[postgres]'"
        ) from None
    return psycopg


@lru_cache(maxsize=4096)
def _translate(sql: str) -> str:
    """``?`` → ``%s`` and ``%`` → ``%%`` outside single-quoted text and ``$$`` bodies."""
    out: list[str] = []
    for i, part in enumerate(re.split(r"('(?:[^']|'')*'|\$\$.*?\$\$)", sql, flags=re.S)):
        out.append(part if i % 2 else part.replace("%", "%%").replace("?", "%s"))
    return "".join(out)


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


class _Result:
    """A statement's rows; none (not an error) for a write without RETURNING, as in DuckDB."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    def fetchall(self) -> list[Any]:
        return self.cursor.fetchall() if self.cursor.description is not None else []

    @property
    def description(self) -> Any:
        return self.cursor.description


EXPORT_BATCH = 5000  # rows a Parquet export holds in memory at once
# PostgreSQL column types → DuckDB's for an export (everything else, JSON included, is text)
_DUCK_TYPES = {
    "int2": "SMALLINT",
    "int4": "INTEGER",
    "int8": "BIGINT",
    "float4": "FLOAT",
    "float8": "DOUBLE",
    "bool": "BOOLEAN",
    "timestamptz": "TIMESTAMPTZ",
    "timestamp": "TIMESTAMP",
    "date": "DATE",
}


class _PgConnection:
    """The repositories' ``Connection`` over one psycopg connection."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Result:
        return _Result(self.raw.execute(_translate(sql), list(params) or None))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(_translate(sql), [list(r) for r in rows])


class PostgresDatabase:
    """One PostgreSQL database: this process's connection pool, migrations, transactions."""

    backend = "postgres"

    def __init__(self, url: str, read_only: bool = False, create: bool = True) -> None:
        psycopg = _psycopg()
        from psycopg_pool import ConnectionPool

        self.Error: type[Exception] = psycopg.Error
        self.path = _without_password(url)
        self.read_only = read_only
        self.read_only_reason = ""
        self.wal_copy: Path | None = None  # the server keeps its own log
        self.checkpoint_failed = ""
        self.closed = False
        self._bound = threading.local()  # the connection a thread's transaction or reads hold
        try:  # one plain connection first: a wrong URL or a stopped server is said as such
            psycopg.connect(url, connect_timeout=10).close()
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to {self.path}: {str(exc).strip().splitlines()[0][:200]}",
                hint="check that the server runs and the URL's host, port, user, password and database",
            ) from None
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs={"autocommit": True, "connect_timeout": 10},
            configure=self._configure,
            check=ConnectionPool.check_connection,  # a server restart costs no request
            open=False,
            name="appliance",
        )
        self._pool.open(wait=True, timeout=30)
        try:
            if not read_only:
                self._migrate(create)
            self._check()
        except Exception:
            self._pool.close()
            raise

    def _configure(self, raw: Any) -> None:
        from psycopg.types.string import TextLoader

        for name in ("json", "jsonb"):  # the text, as DuckDB returns it; the repositories parse it
            raw.adapters.register_loader(name, TextLoader)
        raw.execute("SET TIME ZONE 'UTC'")
        if self.read_only:
            raw.execute("SET default_transaction_read_only = on")

    @contextmanager
    def _connection(self) -> Iterator[_PgConnection]:
        """The thread's connection: the one its open transaction holds, else one from the pool
        for the duration (so a read inside a transaction sees the transaction's writes)."""
        held = getattr(self._bound, "con", None)
        if held is not None:
            yield held
            return
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection(timeout=POOL_WAIT) as raw:
                self._bound.con = con = _PgConnection(raw)
                try:
                    yield con
                finally:
                    self._bound.con = None
        except PoolTimeout:
            raise StoreError(
                f"no connection to {self.path} free within {POOL_WAIT:.0f} s",
                hint="the server is overloaded or unreachable",
            ) from None

    def _migrate(self, create: bool) -> None:
        with self._connection() as con, con.raw.transaction():
            con.execute("SELECT pg_advisory_xact_lock(?)", [SCHEMA_LOCK])
            exists = con.execute("SELECT to_regclass('meta') IS NOT NULL").fetchall()[0][0]
            if not exists and not create:
                raise StoreError(
                    f"no database at {self.path} holds an appliance memory",
                    hint="check the URL, or pass --create (create=True) to start a new memory there",
                )
            con.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            row = first_row(con.execute("SELECT value FROM meta WHERE key = 'db_version'"))
            for version in versions_to_apply(int(row[0]) if row else 0, MIGRATIONS):
                for stmt in MIGRATIONS[version]:
                    con.raw.execute(stmt)  # DDL with $$ bodies: not a statement of ``?`` parameters
                put_meta(con, "db_version", str(version))

    def _check(self) -> None:
        try:
            self.fetch("SELECT count(*) FROM memories LIMIT 1")
        except self.Error as exc:
            raise CorruptStoreError(f"{self.path} holds no appliance memory: {str(exc)[:200]}") from None

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """BEGIN … COMMIT on the thread's connection; ROLLBACK when the body raises; inside an
        open transaction, a savepoint. A lost race with another writer (serialization failure,
        deadlock) is a ``WriteConflict``; a full disk says so."""
        if self.read_only:
            raise StoreError("the store is open read-only")
        from psycopg import errors

        with self._connection() as con:
            try:
                with con.raw.transaction():
                    yield con
            except (errors.SerializationFailure, errors.DeadlockDetected, errors.LockNotAvailable) as exc:
                raise WriteConflict(f"write conflict: {str(exc).strip().splitlines()[0][:200]}") from None
            except errors.DiskFull:
                raise DiskFullError("the server's disk is full: nothing of this write was stored") from None

    def lock_sessions(self, con: Connection, sessions: Sequence[str]) -> None:
        """Take the sessions' advisory locks until the transaction ends: writers of one session
        in any process or host wait for each other, so what a record reads (the entity it merges
        into) is still true when it writes. Taken in sorted order: two bulk writes never deadlock."""
        for session in sorted(set(sessions)):
            con.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", [session])

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """One connection for several reads in a row, in one transaction: one snapshot of them."""
        with self._connection() as con, con.raw.transaction():
            yield con

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._connection() as con:
            return [tuple(r) for r in con.execute(sql, params).fetchall()]

    def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        with self._connection() as con:
            return first_row(con.execute(sql, params))

    def bulk(
        self, con: Connection, sql: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]
    ) -> None:
        """Run ``sql`` with ``{frame}`` standing for ``rows``: one statement over one array per
        column (``unnest``), the set-based load of imports."""
        frame = "unnest({}) AS f({})".format(
            ", ".join(f"?::{kind}[]" for _, kind in columns), ", ".join(name for name, _ in columns)
        )
        con.execute(sql.format(frame=frame), [[r[i] for r in rows] for i in range(len(columns))])

    def table_names(self) -> set[str]:
        return {r[0] for r in self.fetch("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}

    def columns(self, table: str) -> list[tuple[str, str]]:
        """(name, type) of ``table``'s columns, in order (``vector(512)``, not "USER-DEFINED")."""
        return [
            (r[0], r[1])
            for r in self.fetch(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = ?::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                [table],
            )
        ]

    def pages(self, con: Connection, sql: str, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of ``sql``, ``size`` at a time, through a server-side cursor (inside the
        caller's transaction: the server never sends a whole table at once)."""
        assert isinstance(con, _PgConnection)
        with con.raw.cursor(name="appliance_pages") as cur:
            cur.execute(_translate(sql))
            while rows := cur.fetchmany(size):
                yield rows

    def export_parquet(self, sql: str, path: Path) -> None:
        """The rows of ``sql`` written to Parquet through a DuckDB file in a temporary folder:
        they arrive from a server-side cursor ``EXPORT_BATCH`` at a time and are appended to a
        table typed from the query's columns, so memory holds one batch, not the memory."""
        import tempfile

        import duckdb
        import pandas as pd
        from psycopg.postgres import types as pg_types

        target = sql_path(path)
        with tempfile.TemporaryDirectory() as tmp, duckdb.connect(str(Path(tmp) / "export.duckdb")) as out:
            # a named cursor lives in a transaction: the server sends the rows as they are fetched
            with self._connection() as con, con.raw.transaction(), con.raw.cursor(name="appliance_export") as cur:
                cur.execute(_translate(sql))
                names = [d.name for d in cur.description]
                types = [
                    _DUCK_TYPES.get(getattr(pg_types.get(d.type_code), "name", ""), "VARCHAR") for d in cur.description
                ]
                columns = ", ".join(f'"{n}" {t}' for n, t in zip(names, types))
                out.execute(f"CREATE TABLE _rows ({columns})")
                while rows := cur.fetchmany(EXPORT_BATCH):
                    out.register("_batch", pd.DataFrame(rows, columns=names))
                    out.execute("INSERT INTO _rows SELECT * FROM _batch")
                    out.unregister("_batch")
            try:
                out.execute(f"COPY _rows TO '{target}' (FORMAT parquet)")
            except duckdb.Error as exc:
                raise StoreError(f"cannot write {path}: {str(exc).splitlines()[0][:200]}") from None

    def maintain(self) -> None:
        """Refresh the planner's statistics and the visibility map of the grown tables (what
        autovacuum does a minute later): right after a bulk import the planner knew nothing of
        the new rows, and the postings could not be read from their covering index alone.
        Tables another process is vacuuming are skipped."""
        if self.read_only:
            return
        tables = sorted(self.table_names() & _MAINTAINED)
        with self._connection() as con:
            con.raw.execute(f"VACUUM (ANALYZE, SKIP_LOCKED) {', '.join(tables)}")

    def checkpoint(self) -> None:
        """Nothing to fold: the server's log is its own."""

    def snapshot(self, target: str | Path) -> None:
        """A consistent copy of the whole memory in a new DuckDB file (``backup``)."""
        from .snapshot import copy_to_file  # the file engine, only when a backup is asked for

        copy_to_file(self, target)

    def restore_from(self, source: str | Path) -> None:
        """Fill this (empty) database with every row of the DuckDB snapshot ``source``."""
        from .snapshot import restore_from_file

        restore_from_file(self, source)

    def close(self) -> None:
        if not self.closed:
            self._pool.close()
            self.closed = True
