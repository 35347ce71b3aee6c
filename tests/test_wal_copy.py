"""A write-ahead log left by an unclean stop is copied aside before DuckDB replays it: DuckDB
replays a cut log up to its last whole entry without an error and deletes it, so without the copy
the commits after the cut would be gone without a trace."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from appliance.store import MemoryStore
from appliance.store.duckdb.database import WAL_COPIES_KEPT

WRITER = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {root!r})
    from appliance.store import MemoryStore
    from tests.conftest import make_record
    store = MemoryStore({db!r})
    store.write_many([make_record(source_text=f"memory number {{i}}") for i in range(60)])
    os._exit(0)  # killed: no checkpoint, the memories are in the log only
    """
)


pytestmark = pytest.mark.duckdb_only  # the write-ahead log, lock and disk of a DuckDB file


def _crash_with_log(db: Path) -> Path:
    root = str(Path(__file__).resolve().parents[1])
    subprocess.run([sys.executable, "-c", WRITER.format(root=root, db=str(db))], check=True, cwd=root)
    wal = db.with_name(db.name + ".wal")
    assert wal.stat().st_size > 0
    return wal


def test_a_cut_log_is_kept_aside_before_it_is_replayed(tmp_path: Path) -> None:
    db = tmp_path / "m.duckdb"
    wal = _crash_with_log(db)
    whole = wal.read_bytes()
    wal.write_bytes(whole[: len(whole) // 2])  # the disk lost the log's second half
    with MemoryStore(db) as store:
        copy = store.db.wal_copy
        assert copy is not None and copy.read_bytes() == whole[: len(whole) // 2]
        assert len(store.records.ids()) < 60  # what DuckDB could replay
    assert copy.exists()  # still there after the replay deleted the log itself


def test_a_clean_stop_leaves_no_copy_and_copies_do_not_pile_up(tmp_path: Path) -> None:
    db = tmp_path / "m.duckdb"
    MemoryStore(db).close()
    with MemoryStore(db) as store:
        assert store.db.wal_copy is None
    for _ in range(WAL_COPIES_KEPT + 2):
        _crash_with_log(db)
        MemoryStore(db).close()
    assert len(list(tmp_path.glob("m.duckdb.wal.*.replayed"))) == WAL_COPIES_KEPT


def test_a_file_that_cannot_be_written_is_opened_for_reading(tmp_path: Path, monkeypatch, settings) -> None:  # type: ignore[no-untyped-def]
    import duckdb
    import pytest

    from appliance.api import Appliance
    from appliance.errors import StoreError
    from appliance.store.duckdb import database
    from appliance.testing import FakeEngine

    db = tmp_path / "m.duckdb"
    with Appliance(db=db, model=FakeEngine(), settings=settings, embedder=None) as app:
        app.record("order 4567 arrived broken", session_id="s")
    real_connect = duckdb.connect

    def read_only_fs(path: str, read_only: bool = False, config: object = None) -> object:
        if not read_only:  # what a read-only mount answers (the tests run as root: chmod cannot)
            raise duckdb.IOException(f'IO Error: Cannot open file "{path}": Read-only file system')
        return real_connect(path, read_only=True, config=config)

    monkeypatch.setattr(database.duckdb, "connect", read_only_fs)
    with Appliance(db=db, model=FakeEngine(), settings=settings, embedder=None) as app:
        assert app.status()["counts"]["memories"] == 1
        assert app.list_records()[0].source_text == "order 4567 arrived broken"
        assert app.export_jsonl(tmp_path / "out.jsonl") == 1
        app.recall("what arrived broken?", session_id="s")
        with pytest.raises(StoreError, match="(?i)read-only file system"):
            app.record("order 4568 arrived", session_id="s")


def test_a_full_disk_is_named_and_a_failed_final_checkpoint_is_told(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import duckdb
    import pytest

    from appliance.errors import DiskFullError
    from tests.conftest import make_record

    store = MemoryStore(tmp_path / "m.duckdb")
    store.write_many([make_record(source_text="kept before the disk filled")])

    def full(*_: object, **__: object) -> None:
        raise duckdb.TransactionException("TransactionContext Error: Failed to commit: No space left on device")

    monkeypatch.setattr(store, "_write", full)
    from appliance.domain.records import RecordWrite

    with pytest.raises(DiskFullError, match="disk is full"):
        store.write(RecordWrite(record=make_record(source_text="lost to a full disk")))

    def no_room() -> None:
        raise duckdb.IOException("IO Error: Could not write file: No space left on device")

    monkeypatch.setattr(store.db, "checkpoint", no_room)
    store.close()
    assert "No space left" in store.db.checkpoint_failed
    with MemoryStore(tmp_path / "m.duckdb") as again:  # the WAL was replayed: nothing lost
        assert len(again.records.ids()) == 1


def test_a_live_writers_log_is_not_copied(tmp_path: Path) -> None:
    import pytest

    from appliance.errors import StoreLockedError

    db = tmp_path / "m.duckdb"
    root = str(Path(__file__).resolve().parents[1])
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER.format(root=root, db=str(db)).replace("os._exit(0)", "import time; time.sleep(60)"),
        ],
        cwd=root,
    )
    try:
        wal = db.with_name(db.name + ".wal")
        for _ in range(300):  # until the writer has committed
            if wal.exists() and wal.stat().st_size > 0:
                break
            subprocess.run(["sleep", "0.1"])
        with pytest.raises(StoreLockedError):
            MemoryStore(db)
        assert list(tmp_path.glob("m.duckdb.wal.*.replayed")) == []  # nothing copied, nothing pruned
    finally:
        holder.kill()
        holder.wait()
