"""The embedded backend: one DuckDB file — opening, migrations, transactions, checkpoints.

Why it is shaped this way:

* One connection per file, one lock: DuckDB lets one process write a file; in-process writers
  are serialised by an ``RLock`` and a second process gets ``StoreLockedError`` with a hint.
* ``transaction()`` is the only way to write: BEGIN … COMMIT, or ROLLBACK on any error. A
  committed transaction survives SIGKILL (DuckDB's WAL); an uncommitted one disappears whole.
* Migrations run on open (``meta.db_version``); the file is never silently recreated, and a
  file written by a newer appliance is refused unmodified.
* ``checkpoint()`` folds the WAL into the file, so a copy of the ``.duckdb`` file alone holds
  every committed record (a stop on SIGTERM calls it; ``close`` does too).
* Extensions are never auto-installed (that would download): only built-ins (json, parquet).
* A write-ahead log left by an unclean stop is copied aside before DuckDB replays it
  (``keep_wal_copy``): a damaged log would otherwise lose its tail without a word.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from ...errors import CorruptStoreError, DiskFullError, StoreError, StoreLockedError
from ..database import Connection, WriteConflict, first_row, put_meta, sql_path, versions_to_apply
from .migrations import MIGRATIONS

__all__ = ["DuckDatabase", "keep_wal_copy", "out_of_space", "WAL_COPIES_KEPT"]


WAL_COPIES_KEPT = 3


def _held_by_another(db: Path) -> bool:
    """Whether another process holds DuckDB's write lock on ``db`` (a POSIX record lock):
    its write-ahead log is live, not left by an unclean stop."""
    try:
        import fcntl
    except ImportError:  # no POSIX locks here: DuckDB's own open decides
        return False
    fd = os.open(db, os.O_RDONLY)
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # also releases the probe's shared lock
    return False


def out_of_space(error: str) -> bool:
    """Whether a DuckDB error is the disk being full."""
    low = error.lower()
    return "no space left" in low or "disk is full" in low or "disk full" in low


def _write_failure(exc: duckdb.TransactionException) -> StoreError:
    """What a failed transaction tells the caller: a full disk (no retry helps), else a conflict."""
    if out_of_space(str(exc)):
        return DiskFullError("the disk is full: nothing of this write was stored")
    return WriteConflict(f"write conflict: {str(exc).splitlines()[0][:200]}")


def _unwritable(error: str) -> bool:
    low = error.lower()
    return "read-only file system" in low or "permission denied" in low


def keep_wal_copy(db: Path) -> Path | None:
    """Before DuckDB replays a write-ahead log left by an unclean stop, a copy of it beside the
    file (``<db>.wal.<time>.replayed``), the newest ``WAL_COPIES_KEPT`` kept. DuckDB replays a
    damaged log up to its last whole entry without an error and then deletes it: a cut log
    would lose the commits after the cut silently. With the copy those bytes still exist, and
    the appliance says so when it opens (``Appliance.recovered``)."""
    wal = db.with_name(db.name + ".wal")
    try:
        if not wal.is_file() or wal.stat().st_size == 0 or _held_by_another(db):
            return None  # a live writer's log is no leftover (and DuckDB will refuse the open)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        copy = wal.with_name(f"{wal.name}.{stamp}.replayed")
        shutil.copy2(wal, copy)
    except OSError:
        return None  # no room or no right to copy: opening is still better than refusing
    for old in sorted(wal.parent.glob(wal.name + ".*.replayed"))[:-WAL_COPIES_KEPT]:
        old.unlink(missing_ok=True)
    return copy


class DuckDatabase:
    """One DuckDB file (or ``:memory:``) with its lock, migrations and transactions."""

    backend = "duckdb"
    Error: type[Exception] = duckdb.Error

    def __init__(self, path: str | Path, read_only: bool = False, create: bool = True) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            p = Path(self.path)
            if not p.exists() and not create:
                raise StoreError(
                    f"no database at {self.path}",
                    hint="check the path, or pass --create (create=True) to start a new database there",
                )
            if p.exists() and p.is_dir():
                raise StoreError(f"{self.path} is a directory, not a database file")
            p.parent.mkdir(parents=True, exist_ok=True)
        config: dict[str, str | bool | int | float | list[str]] = {"autoinstall_known_extensions": False}
        self.wal_copy = keep_wal_copy(Path(self.path)) if self.path != ":memory:" and not read_only else None
        self.read_only_reason = ""
        self.checkpoint_failed = ""
        try:
            try:
                self.con = duckdb.connect(self.path, read_only=read_only, config=config)
            except duckdb.IOException as exc:
                # a read-only filesystem or a file the user may not write: reading still works
                if read_only or not Path(self.path).is_file() or not _unwritable(str(exc)):
                    raise
                self.con = duckdb.connect(self.path, read_only=True, config=config)
                read_only = True
                self.read_only_reason = str(exc).splitlines()[0][:200]
        except duckdb.IOException as exc:
            text = str(exc)
            if "lock" in text.lower():
                raise StoreLockedError(
                    f"database {self.path} is in use by another process: {text.splitlines()[0][:200]}"
                ) from None
            raise CorruptStoreError(f"cannot open database {self.path}: {text[:300]}") from None
        except duckdb.Error as exc:
            raise CorruptStoreError(f"cannot open database {self.path}: {str(exc)[:300]}") from None
        self.lock = threading.RLock()
        self._open = False  # a transaction is open (by the thread holding the lock)
        self.read_only = read_only
        self.closed = False
        try:
            if not read_only:
                self._migrate()
            self._check()
        except Exception:
            self.con.close()
            raise

    def _migrate(self) -> None:
        with self.lock:
            self.con.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            row = first_row(self.con.execute("SELECT value FROM meta WHERE key = 'db_version'"))
            for version in versions_to_apply(int(row[0]) if row else 0, MIGRATIONS):
                self.con.execute("BEGIN TRANSACTION")
                try:
                    for stmt in MIGRATIONS[version]:
                        self.con.execute(stmt)
                    put_meta(self.con, "db_version", str(version))
                    self.con.execute("COMMIT")
                except Exception:
                    self.con.execute("ROLLBACK")
                    raise

    def _check(self) -> None:
        try:
            first_row(self.con.execute("SELECT count(*) FROM memories"))
        except duckdb.Error as exc:
            raise CorruptStoreError(f"{self.path} is not an appliance database: {str(exc)[:200]}") from None

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """BEGIN … COMMIT under the lock; ROLLBACK when the body raises. Inside another
        transaction of this thread it is part of that one (DuckDB has no savepoints): the
        outer one commits or rolls back the whole."""
        if self.read_only:
            raise StoreError(
                "the store is open read-only" + (f" ({self.read_only_reason})" if self.read_only_reason else ""),
                hint="reading, recall and export work; to write, make the file and its folder writable"
                if self.read_only_reason
                else "",
            )
        with self.lock:
            if self._open:
                yield self.con
                return
            self.con.execute("BEGIN TRANSACTION")
            self._open = True
            try:
                yield self.con
            except duckdb.TransactionException as exc:
                self._open = False
                self.con.execute("ROLLBACK")
                raise _write_failure(exc) from None
            except BaseException:
                self._open = False
                self.con.execute("ROLLBACK")
                raise
            self._open = False
            try:
                self.con.execute("COMMIT")
            except duckdb.TransactionException as exc:
                raise _write_failure(exc) from None

    def lock_sessions(self, con: Connection, sessions: Sequence[str]) -> None:
        """Nothing to take: one process writes the file, its writers are serialised by ``lock``."""

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """The connection for several reads in a row, under the lock."""
        with self.lock:
            yield self.con

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one read statement under the lock."""
        with self.lock:
            return self.con.execute(sql, list(params)).fetchall()

    def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        with self.lock:
            return first_row(self.con.execute(sql, list(params)))

    def bulk(
        self, con: Connection, sql: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]
    ) -> None:
        """Run ``sql`` with ``{frame}`` standing for ``rows`` (named ``columns``), registered as
        a DataFrame: one set-based statement (binding row by row cost 70× more on imports)."""
        import pandas as pd  # ships with gradio; zero-copy bulk inserts

        assert isinstance(con, duckdb.DuckDBPyConnection)
        con.register("_bulk_rows", pd.DataFrame(list(rows), columns=[name for name, _ in columns]))
        try:
            con.execute(sql.format(frame="_bulk_rows"))
        finally:
            con.unregister("_bulk_rows")

    def table_names(self) -> set[str]:
        return {
            r[0] for r in self.fetch("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()")
        }

    def columns(self, table: str) -> list[tuple[str, str]]:
        """(name, type) of ``table``'s columns, in order."""
        return [
            (r[0], r[1])
            for r in self.fetch(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
                "AND table_catalog = current_database() ORDER BY ordinal_position",
                [table],
            )
        ]

    def pages(self, con: Connection, sql: str, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of ``sql`` on ``con``, ``size`` at a time."""
        result = con.execute(sql)
        while rows := result.fetchmany(size):
            yield rows

    def export_parquet(self, sql: str, path: Path) -> None:
        """Write the rows of ``sql`` (a SELECT written in this package) to a Parquet file."""
        with self.lock:
            try:
                self.con.execute(f"COPY ({sql}) TO '{sql_path(path)}' (FORMAT parquet)")
            except duckdb.Error as exc:
                raise StoreError(f"cannot write {path}: {str(exc).splitlines()[0][:200]}") from None

    def maintain(self) -> None:
        """Nothing engine-wide: the repositories rewrite their own tables as they grow."""

    def checkpoint(self) -> None:
        """Fold the WAL into the database file (a copy of the file alone then holds everything)."""
        if self.read_only or self.closed:
            return
        with self.lock:
            self.con.execute("CHECKPOINT")

    def snapshot(self, target: str | Path) -> None:
        """Write a consistent, self-contained copy of the whole database (every table: memories,
        entities and their timeline, merge/forget logs, migrations, indexes' data) to a new
        file ``target``, while this connection stays open and serving: under the lock no write
        is half-done, and the copy is one read transaction."""
        dest = Path(target)
        if dest.exists():
            raise StoreError(f"{dest} exists", hint="choose a new file name (a backup never overwrites)")
        catalog = self.fetch_one("SELECT current_database()")
        with self.lock:
            try:
                self.con.execute("ATTACH ? AS appliance_snapshot", [str(dest)])
                try:
                    self.con.execute(
                        f'COPY FROM DATABASE "{catalog[0] if catalog else "memory"}" TO appliance_snapshot'
                    )
                finally:
                    self.con.execute("DETACH appliance_snapshot")
            except duckdb.Error as exc:
                for p in (dest, dest.with_name(dest.name + ".wal")):
                    p.unlink(missing_ok=True)
                raise StoreError(f"backup to {dest} failed: {str(exc).splitlines()[0][:200]}") from None
        DuckDatabase(dest).close()  # the copy opens as an appliance database (and is checkpointed)

    def restore_from(self, source: str | Path) -> None:
        """Fill this (empty) database with every row of the snapshot ``source`` exactly as it
        was: ids, timestamps, entity history, logs, migrations."""
        src = DuckDatabase(source, read_only=True, create=False)
        try:  # its version and tables are checked; the rows are copied by name, the columns both have
            shared = {t: {c for c, _ in src.columns(t)} for t in src.table_names() & self.table_names()}
        finally:
            src.close()
        with self.lock:
            self.con.execute("ATTACH ? AS appliance_restore (READ_ONLY)", [str(source)])
            try:
                with self.transaction() as con:
                    if first_row(con.execute("SELECT count(*) FROM memories")) != (0,):
                        raise StoreError(
                            "restore needs an empty database",
                            hint="restore into a new --db file, or move this one away",
                        )
                    for table, columns in sorted(shared.items()):
                        names = ", ".join(f'"{c}"' for c, _ in self.columns(table) if c in columns)
                        con.execute(f'DELETE FROM "{table}"')
                        con.execute(
                            f'INSERT INTO "{table}" ({names}) SELECT {names} FROM appliance_restore.main."{table}"'
                        )
            finally:
                self.con.execute("DETACH appliance_restore")

    def close(self) -> None:
        """Checkpoint and close. A checkpoint that fails (a full disk) loses nothing — the
        committed records stay in the WAL beside the file and are replayed on the next open —
        but the file alone no longer holds them: ``checkpoint_failed`` says so."""
        with self.lock:
            if self.closed:
                return
            try:
                self.checkpoint()
            except duckdb.Error as exc:  # closing still closes; the WAL keeps what the file lacks
                self.checkpoint_failed = str(exc).splitlines()[0][:200]
            self.con.close()
            self.closed = True
