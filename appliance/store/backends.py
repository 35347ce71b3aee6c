"""Which engine a store runs on: a ``postgresql://`` (or ``postgres://``) URL names a PostgreSQL
database, anything else a DuckDB file (or ``:memory:``); each engine brings its vector index."""

from __future__ import annotations

from pathlib import Path

from ..config import is_server_url
from .database import Database
from .duckdb.database import DuckDatabase
from .duckdb.vectors import DuckVectors
from .postgres.database import PostgresDatabase
from .postgres.vectors import PgVectors
from .vectors import ENCODER_TABLES, VectorsRepo

__all__ = ["open_database", "vectors_repo"]


def open_database(target: str | Path, read_only: bool = False, create: bool = True) -> Database:
    """The database at ``target``: a PostgreSQL URL, else a DuckDB file (or ``:memory:``)."""
    if is_server_url(target):
        return PostgresDatabase(str(target), read_only=read_only, create=create)
    return DuckDatabase(target, read_only=read_only, create=create)


def vectors_repo(db: Database, encoder: str) -> VectorsRepo:
    if encoder not in ENCODER_TABLES:
        raise ValueError(f"unknown encoder {encoder!r}")
    if db.backend == "postgres":
        return PgVectors(db, encoder)
    return DuckVectors(db, encoder)
