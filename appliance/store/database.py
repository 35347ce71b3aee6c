"""What the repositories need of a database, whichever engine holds it.

Two backends implement ``Database``: the embedded DuckDB file (``store/duckdb``, the default)
and a PostgreSQL server shared by many processes and hosts (``store/postgres``). The
repositories of this package write one SQL that both engines run — ``?`` parameters,
``ON CONFLICT``, ``unnest(?::VARCHAR[])`` lists, ``strpos`` — and ask the backend for what
differs: bulk loads (``bulk``), the vector index, clustering rewrites, snapshots.

``backends.open_database`` picks the backend from the target.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from ..errors import StoreError

__all__ = [
    "Connection",
    "Database",
    "Result",
    "WriteConflict",
    "now",
    "session_clause",
    "grown_since_rewrite",
    "first_row",
    "put_meta",
    "versions_to_apply",
    "sql_path",
]


class WriteConflict(StoreError):
    """A write lost a race with another writer (an entity changed between read and write, a
    serialization failure, a deadlock): the whole transaction is rolled back and may be retried."""


class Result(Protocol):
    """The outcome of one statement: its rows (none for a write without RETURNING)."""

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """The connection a transaction runs on: statements with ``?`` parameters."""

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any: ...


class Database(Protocol):
    """One store's database: its transactions, reads and the parts that differ by engine."""

    backend: str  # "duckdb" or "postgres"
    path: str  # the file, or the server URL without its password
    read_only: bool
    read_only_reason: str
    wal_copy: Path | None
    checkpoint_failed: str
    Error: type[Exception]  # the engine's base error (statements that may fail on old files)

    def transaction(self) -> AbstractContextManager[Connection]: ...

    def reading(self) -> AbstractContextManager[Connection]: ...

    def lock_sessions(self, con: Connection, sessions: Sequence[str]) -> None: ...

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None: ...

    def bulk(
        self, con: Connection, sql: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]
    ) -> None: ...

    def table_names(self) -> set[str]: ...

    def columns(self, table: str) -> list[tuple[str, str]]: ...

    def pages(self, con: Connection, sql: str, size: int) -> Iterator[list[tuple[Any, ...]]]: ...

    def checkpoint(self) -> None: ...

    def maintain(self) -> None: ...

    def snapshot(self, target: str | Path) -> None: ...

    def restore_from(self, source: str | Path) -> None: ...

    def export_parquet(self, sql: str, path: Path) -> None: ...

    def close(self) -> None: ...


def now() -> datetime:
    return datetime.now(UTC)


def grown_since_rewrite(db: Database, rows: int, minimum: int, growth: float, meta_key: str) -> bool:
    """Whether a table of ``rows`` rows is due for its ordered rewrite: it has ``minimum`` rows
    and was never rewritten, or has grown ``growth`` times since the rewrite recorded under
    ``meta_key``. Only DuckDB reads blocks by their min/max; PostgreSQL's indexes need none."""
    if db.backend != "duckdb" or rows < minimum:
        return False
    row = db.fetch("SELECT value FROM meta WHERE key = ?", [meta_key])
    return not row or rows >= growth * int(row[0][0])


def versions_to_apply(current: int, migrations: Mapping[int, Sequence[str]]) -> list[int]:
    """The migrations a database at version ``current`` still needs, in order; a database
    written by a newer appliance is refused (and left as it is)."""
    newest = max(migrations)
    if current > newest:
        raise StoreError(
            f"database version {current} is newer than this appliance ({newest})", hint="upgrade the appliance"
        )
    return sorted(v for v in migrations if v > current)


def put_meta(con: Connection, key: str, value: str) -> None:
    con.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", [key, value])


def sql_path(path: Path) -> str:
    """A file path for COPY, which cannot take it as a bound parameter: only a plain path."""
    s = str(path)
    if "'" in s or "\x00" in s:
        raise StoreError(f"unsupported characters in export path {s!r}")
    return s


def session_clause(column: str, session: str | None, keyword: str = "AND") -> tuple[str, list[Any]]:
    """`` {keyword} {column} = ? `` and its parameter, or nothing when no session is given."""
    return (f" {keyword} {column} = ? ", [session]) if session else ("", [])


def first_row(result: Result) -> tuple[Any, ...] | None:
    """The first row of the statement just run, its result read to the end: DuckDB 2 refuses to
    register a frame (the bulk writes of vectors, postings, entities) on a connection whose last
    result is unfinished, and ``fetchone`` leaves a result so — a record that ended on a read
    failed to store its vector."""
    rows = result.fetchall()
    return tuple(rows[0]) if rows else None
