"""Backups of a PostgreSQL memory as a DuckDB file, and restores of a DuckDB file into one.

The snapshot format is the one the embedded backend writes (``backup`` of a DuckDB memory): a
``.duckdb`` file at the same ``db_version``. So a team's server memory can be carried to a
laptop and back, and a backup restores into either engine. The copy reads one consistent
snapshot of the server (``REPEATABLE READ``), table by table, a page at a time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import StoreError
from ..database import Database
from ..duckdb.database import DuckDatabase
from ..duckdb.vectors import DuckVectors
from ..vectors import ENCODER_TABLES
from .vectors import PgVectors, vector_text

__all__ = ["copy_to_file", "restore_from_file"]

PAGE = 20_000
_ENCODER_OF = {table: encoder for encoder, (table, _) in ENCODER_TABLES.items()}
_SKIPPED = {f"{t}_centroids" for t in _ENCODER_OF}  # DuckDB's IVF lists: retrained, never copied


def _copied_tables(src: Database, dst: Database) -> list[str]:
    return sorted((src.table_names() & dst.table_names()) - _SKIPPED)


def _converter(src_type: str, dst_type: str) -> Any:
    """How a value read from one engine is written to the other (vectors change form)."""
    if dst_type.startswith("vector"):  # PostgreSQL's pgvector, from DuckDB's list of floats
        return lambda v: None if v is None else vector_text(v)
    if src_type.startswith("vector"):  # pgvector's text form, to DuckDB's FLOAT[n]
        return lambda v: None if v is None else json.loads(v)
    return None


def _copy_table(src: Database, src_con: Any, dst: Database, dst_con: Any, table: str) -> None:
    src_types = dict(src.columns(table))
    dst_columns = [(name, kind) for name, kind in dst.columns(table) if name in src_types]
    names = ", ".join(name for name, _ in dst_columns)
    converters = [_converter(src_types[name], kind) for name, kind in dst_columns]
    sql = f"INSERT INTO {table} ({names}) SELECT " + ", ".join(f"CAST({name} AS {kind})" for name, kind in dst_columns)
    for page in src.pages(src_con, f"SELECT {names} FROM {table}", PAGE):
        rows: Sequence[Sequence[Any]] = page
        if any(converters):
            rows = [[c(v) if c else v for c, v in zip(converters, row)] for row in page]
        dst.bulk(dst_con, sql + " FROM {frame}", dst_columns, rows)


def copy_to_file(src: Database, target: str | Path) -> None:
    """Write every table of ``src`` to a new DuckDB file ``target`` (``backup``)."""
    dest = Path(target)
    if dest.exists():
        raise StoreError(f"{dest} exists", hint="choose a new file name (a backup never overwrites)")
    dst = DuckDatabase(dest)
    try:
        for table in sorted(src.table_names() & set(_ENCODER_OF)):
            DuckVectors(dst, _ENCODER_OF[table])
        with src.reading() as src_con, dst.transaction() as dst_con:
            src_con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            for table in _copied_tables(src, dst):
                dst_con.execute(f"DELETE FROM {table}")
                _copy_table(src, src_con, dst, dst_con, table)
        dst.close()
    except Exception:
        dst.close()
        for p in (dest, dest.with_name(dest.name + ".wal")):
            p.unlink(missing_ok=True)
        raise


def restore_from_file(dst: Database, source: str | Path) -> None:
    """Fill the (empty) ``dst`` with every row of the DuckDB snapshot ``source`` (``restore``)."""
    src = DuckDatabase(source, read_only=True, create=False)
    try:
        for table in sorted(src.table_names() & set(_ENCODER_OF)):
            PgVectors(dst, _ENCODER_OF[table])
        with dst.transaction() as dst_con, src.reading() as src_con:
            if dst_con.execute("SELECT count(*) FROM memories").fetchall()[0][0]:
                raise StoreError(
                    "restore needs an empty database", hint="restore into a new database, or empty this one"
                )
            for table in _copied_tables(src, dst):
                dst_con.execute(f"DELETE FROM {table}")
                _copy_table(src, src_con, dst, dst_con, table)
    finally:
        src.close()
