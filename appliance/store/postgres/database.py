"""The PostgreSQL connection: opening, migrations, transactions, the SQL the repositories share.

Why it is shaped this way:

* The repositories write ``?`` parameters (DuckDB's); ``_translate`` turns them into psycopg's
  ``%s`` outside quoted text, once per statement text.
* JSON columns are read back as their text, as DuckDB returns them (psycopg would parse them),
  and every session runs in UTC.
* One connection per process, serialised by an ``RLock`` like the DuckDB backend: the
  repositories' reads and writes keep the same shape. Other processes and hosts open their own;
  PostgreSQL orders them (row locks, ``SERIALIZABLE`` failures and deadlocks become
  ``WriteConflict``, which the store retries).
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
from ..database import Connection, WriteConflict, first_row, put_meta, sql_path
from .migrations import DB_VERSION, MIGRATIONS, SCHEMA_LOCK

__all__ = ["PostgresDatabase", "DB_VERSION"]


def _psycopg() -> Any:
    try:
        import psycopg
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
    """One PostgreSQL database with this process's connection, lock, migrations, transactions."""

    backend = "postgres"

    def __init__(self, url: str, read_only: bool = False, create: bool = True) -> None:
        psycopg = _psycopg()
        self.Error: type[Exception] = psycopg.Error
        self.path = _without_password(url)
        self.read_only = read_only
        self.read_only_reason = ""
        self.wal_copy: Path | None = None  # the server keeps its own log
        self.checkpoint_failed = ""
        self.lock = threading.RLock()
        self.closed = False
        try:
            raw = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to {self.path}: {str(exc).strip().splitlines()[0][:200]}",
                hint="check that the server runs and the URL's host, port, user, password and database",
            ) from None
        self._raw = raw
        self.con = _PgConnection(raw)
        try:
            self._configure(psycopg)
            if not read_only:
                self._migrate(create)
            self._check()
        except Exception:
            raw.close()
            raise

    def _configure(self, psycopg: Any) -> None:
        from psycopg.types.string import TextLoader

        for name in ("json", "jsonb"):  # the text, as DuckDB returns it; the repositories parse it
            self._raw.adapters.register_loader(name, TextLoader)
        self._raw.execute("SET TIME ZONE 'UTC'")
        if self.read_only:
            self._raw.execute("SET default_transaction_read_only = on")

    def _migrate(self, create: bool) -> None:
        with self.lock, self._raw.transaction():
            self._raw.execute("SELECT pg_advisory_xact_lock(%s)", [SCHEMA_LOCK])
            exists = self._raw.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()[0]
            if not exists and not create:
                raise StoreError(
                    f"no database at {self.path} holds an appliance memory",
                    hint="check the URL, or pass --create (create=True) to start a new memory there",
                )
            self._raw.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            row = self._raw.execute("SELECT value FROM meta WHERE key = 'db_version'").fetchone()
            current = int(row[0]) if row else 0
            if current > DB_VERSION:
                raise StoreError(
                    f"database version {current} is newer than this appliance ({DB_VERSION})",
                    hint="upgrade the appliance",
                )
            for version in sorted(v for v in MIGRATIONS if v > current):
                for stmt in MIGRATIONS[version]:
                    self._raw.execute(stmt)
                put_meta(self.con, "db_version", str(version))

    def _check(self) -> None:
        try:
            self._raw.execute("SELECT count(*) FROM memories LIMIT 1").fetchall()
        except self.Error as exc:
            raise CorruptStoreError(f"{self.path} holds no appliance memory: {str(exc)[:200]}") from None

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """BEGIN … COMMIT under the lock; ROLLBACK when the body raises. A lost race with another
        writer (serialization failure, deadlock) is a ``WriteConflict``; a full disk says so."""
        if self.read_only:
            raise StoreError("the store is open read-only")
        from psycopg import errors

        with self.lock:
            try:
                with self._raw.transaction():
                    yield self.con
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
        """The connection for several reads in a row, under the lock: one snapshot of them."""
        with self.lock, self._raw.transaction():
            yield self.con

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.lock:
            return [tuple(r) for r in self.con.execute(sql, params).fetchall()]

    def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        with self.lock:
            return first_row(self.con.execute(sql, params))

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
        with self._raw.cursor(name="appliance_pages") as cur:
            cur.execute(_translate(sql))
            while rows := cur.fetchmany(size):
                yield rows

    def export_parquet(self, sql: str, path: Path) -> None:
        """The rows of ``sql`` written to Parquet by an in-memory DuckDB (one file, one write)."""
        import duckdb
        import pandas as pd

        target = sql_path(path)
        with self.reading() as con:
            result = con.execute(sql)
            names = [d.name for d in result.description]
            rows = result.fetchall()
        with duckdb.connect() as out:
            out.register("_rows", pd.DataFrame(rows, columns=names))
            try:
                out.execute(f"COPY _rows TO '{target}' (FORMAT parquet)")
            except duckdb.Error as exc:
                raise StoreError(f"cannot write {path}: {str(exc).splitlines()[0][:200]}") from None

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
        with self.lock:
            if self.closed:
                return
            self._raw.close()
            self.closed = True
