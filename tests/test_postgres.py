"""The PostgreSQL backend against a real server (started by the test session, never a mock):
what only it has — a memory shared by processes, server-side vectors, snapshots to and from a
DuckDB file, the SQL functions it defines — and its errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from appliance.domain.records import RecordWrite, Relationship
from appliance.errors import StoreError
from appliance.store import MemoryStore, check_integrity
from tests.conftest import make_record


def _write(store: MemoryStore, session: str, text: str, eid: str, **attrs: object) -> str:
    rec = make_record(session_id=session, source_text=text, entity_type="Order", entity_id=eid, attributes=attrs)
    store.write(RecordWrite(record=rec, terms=text.lower().split()))
    return rec.memory_id


def test_a_postgres_memory_stores_recalls_and_merges_like_a_file(pg_url: str, tmp_path: Path) -> None:
    with MemoryStore(pg_url) as pg, MemoryStore(tmp_path / "same.duckdb") as file:
        for store in (pg, file):
            _write(store, "s", "order 4567 arrived broken", "4567", status="broken", city="Berlin")
            _write(store, "s", "order 4567 was replaced", "4567", status="replaced")
            _write(store, "t", "order 99 is late", "99", status="late")
        for store in (pg, file):
            entity = store.entities.get("s", "Order", "4567")
            assert entity is not None and entity.version == 2
            assert entity.attributes == {"status": "replaced", "city": "Berlin"}  # newer wins, nulls never erase
            assert [h["version"] for h in store.entities.history("s", "Order", "4567")] == [1, 2]
            assert check_integrity(store) == []
        assert pg.counts() == file.counts()
        for words in (["broken"], ["order", "4567"], ["late"]):  # the same texts in the same order
            texts = []
            for store in (pg, file):
                found = [store.get_record(m) for m, _ in store.lexical.search(None, words)]
                texts.append([r.source_text for r in found if r is not None])
            assert texts[0] == texts[1] and texts[0]
        assert pg.entities.with_values("s", "Order", {"city": "Berlin"}) == "4567"
        assert pg.entities.ids_ending_with("s", "Order", "567") == ["4567"]


def test_jaro_winkler_on_the_server_equals_duckdbs(pg_url: str) -> None:
    import duckdb

    pairs = [("martha", "marhta"), ("dwayne", "duane"), ("dixon", "dicksonx"), ("abc", "abc"), ("a", "b"), ("", "x")]
    pairs += [("jonathan", "jonathon"), ("小明", "小朋"), ("okafor", "okafur")]
    with MemoryStore(pg_url) as pg:
        server = [pg.select("SELECT jaro_winkler_similarity(?, ?)", [a, b])[0][0] for a, b in pairs]
    con = duckdb.connect()
    local = [con.execute("SELECT jaro_winkler_similarity(?, ?)", [a, b]).fetchall()[0][0] for a, b in pairs]
    assert server == pytest.approx(local, abs=1e-9)


def test_a_misspelt_name_is_matched_and_a_code_is_not(pg_url: str) -> None:
    with MemoryStore(pg_url) as pg:
        _write(pg, "s", "Jonathan called", "Jonathan")
        _write(pg, "s", "order 10236", "10236")
        found = {(e.id, k) for e, k, _ in pg.entities.matching("s", ["Jonathon", "10231"])}
        assert found == {("Jonathan", "Jonathon")}


@pytest.mark.parametrize("exact_max", [5000, 20], ids=["compared-with-each", "hnsw-index"])
def test_server_vector_search_is_exact_for_stored_vectors_across_many_sessions(
    pg_url: str, exact_max: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from appliance.store.postgres import vectors as pg_vectors

    monkeypatch.setattr(pg_vectors, "EXACT_MAX", exact_max)
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(600, 384)).astype(np.float32)
    with MemoryStore(pg_url, encoder="hashing") as pg:
        pg.write_many([make_record(memory_id=f"m{i}", session_id=f"s{i % 20}") for i in range(600)])
        pg.add_vectors([(f"m{i}", f"s{i % 20}", vecs[i].tolist()) for i in range(600)])
        for i in range(0, 600, 37):  # every session holds 30 of them: the filter keeps few per scan
            found = pg.vectors.search(f"s{i % 20}", vecs[i].tolist(), k=3)
            assert found[0][0] == f"m{i}" and found[0][1] == pytest.approx(1.0, abs=1e-5)
            assert len(found) == 3
        pg.add_vectors([("m0", "s0", vecs[1].tolist())])  # replaced, not duplicated
        assert pg.vectors.count() == 600


def test_a_backup_of_a_server_memory_is_a_duckdb_file_that_restores_into_either_engine(
    pg_url: str, tmp_path: Path
) -> None:
    from tests.postgres_server import fresh_database_url

    vec = np.ones(384, dtype=np.float32)
    with MemoryStore(pg_url, encoder="hashing") as pg:
        rec = make_record(
            source_text="Ann owns order 4567",
            entity_type="Order",
            entity_id="4567",
            attributes={"status": "late", "名字": "小明"},
            relationships=[
                Relationship(
                    type="OWNS", source_type="Customer", source_id="Ann", target_type="Order", target_id="4567"
                )
            ],
        )
        pg.write(RecordWrite(record=rec, vector=vec.tolist(), terms=["ann", "owns", "order", "4567"]))
        pg.snapshot(tmp_path / "backup.duckdb")
        before = pg.counts()
        with pytest.raises(StoreError, match="exists"):
            pg.snapshot(tmp_path / "backup.duckdb")
    for target in (tmp_path / "restored.duckdb", fresh_database_url()):
        with MemoryStore(target, encoder="hashing") as again:
            again.restore_from(tmp_path / "backup.duckdb")
            assert again.counts() == before
            got = again.get_record(rec.memory_id)
            assert got is not None and got.attributes == rec.attributes and got.timestamp == rec.timestamp
            assert got.relationships == rec.relationships
            assert again.vectors.search("s", vec.tolist(), k=1)[0][0] == rec.memory_id
            assert again.lexical.search("s", ["owns"])[0][0] == rec.memory_id
            assert check_integrity(again) == []
            with pytest.raises(StoreError, match="empty"):
                again.restore_from(tmp_path / "backup.duckdb")


def test_a_parquet_export_of_a_server_memory_streams_in_batches_and_reads_like_a_files(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from appliance.store.postgres import database as pg_database

    monkeypatch.setattr(pg_database, "EXPORT_BATCH", 2)  # five rows arrive in three batches
    exports = []
    with MemoryStore(pg_url) as pg, MemoryStore(tmp_path / "same.duckdb") as file:
        for store in (pg, file):
            for i in range(5):
                _write(store, "s", f"order {i} is late", str(i), status="late", 名字="小明" if i == 3 else None)
        for store, name in ((pg, "pg.parquet"), (file, "file.parquet")):
            assert store.records.export_parquet(tmp_path / name) == 5
            exports.append(store.records.read_parquet_rows(tmp_path / name))
    server, local = exports
    assert [r["source_text"] for r in server] == [r["source_text"] for r in local]
    for a, b in zip(server, local):
        assert a["ts"] == b["ts"] and a["confidence"] == b["confidence"]
        assert json.loads(a["attributes"]) == json.loads(b["attributes"])


def test_writers_in_two_processes_share_one_memory(pg_url: str) -> None:
    script = (
        "import sys\n"
        "from appliance.domain.records import RecordWrite\n"
        "from appliance.store import MemoryStore\n"
        "from tests.conftest import make_record\n"
        "with MemoryStore(sys.argv[1]) as s:\n"
        "    for i in range(40):\n"
        "        r = make_record(source_text=f'{sys.argv[2]} {i}', entity_type='Order', entity_id=f'o{i % 5}',\n"
        "                        attributes={sys.argv[2]: str(i)})\n"
        "        s.write(RecordWrite(record=r, terms=[sys.argv[2]]))\n"
    )
    root = Path(__file__).resolve().parent.parent
    procs = [
        subprocess.Popen([sys.executable, "-c", script, pg_url, who], cwd=root, stderr=subprocess.PIPE, text=True)
        for who in ("left", "right")
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read() if p.stderr else ""
    with MemoryStore(pg_url) as pg:
        assert pg.counts()["memories"] == 80 and pg.counts()["entities"] == 5
        for i in range(5):  # every change of both writers became one version, in order
            versions = [h["version"] for h in pg.entities.history("s", "Order", f"o{i}")]
            assert versions == list(range(1, 17))
            entity = pg.entities.get("s", "Order", f"o{i}")
            assert entity is not None and set(entity.attributes) == {"left", "right"}
        assert check_integrity(pg) == []


def test_one_process_reads_and_writes_other_sessions_while_a_session_is_held(pg_url: str) -> None:
    """The pool: a thread holding one session's record transaction blocks neither reads nor
    another session's writes of the same process (only that session's writers wait)."""
    import threading

    with MemoryStore(pg_url) as pg:
        _write(pg, "s", "first", "1")
        entered, release = threading.Event(), threading.Event()

        def hold() -> None:
            with pg.session_transaction("s"):
                _write(pg, "s", "second, not committed yet", "1")
                entered.set()
                release.wait(20)

        holder = threading.Thread(target=hold)
        holder.start()
        assert entered.wait(10)
        try:
            done = threading.Event()

            def elsewhere() -> None:
                assert pg.counts()["memories"] == 1  # the held transaction's write is not seen
                _write(pg, "t", "another session", "2")
                done.set()

            other = threading.Thread(target=elsewhere)
            other.start()
            assert done.wait(10), "a read or another session's write waited for the held session"
            other.join()
        finally:
            release.set()
            holder.join()
        assert pg.counts()["memories"] == 3


def test_an_unreachable_server_and_a_foreign_database_are_clear_errors(pg_url: str) -> None:
    with pytest.raises(StoreError, match="cannot connect") as err:
        MemoryStore("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    assert "check that the server runs" in (err.value.hint or "")
    with pytest.raises(StoreError, match="holds an appliance memory"):
        MemoryStore(pg_url, create=False)
    with MemoryStore(pg_url) as pg:  # created now: opening it again without create works
        _write(pg, "s", "kept", "1")
    with MemoryStore(pg_url, create=False) as again:
        assert again.counts()["memories"] == 1


def test_the_password_never_shows_in_the_store_path() -> None:
    from appliance.store.postgres.database import _without_password

    assert _without_password("postgresql://ann:s3cret@db.example:5433/mem") == "postgresql://ann@db.example:5433/mem"
    assert _without_password("postgresql://db.example/mem") == "postgresql://db.example/mem"


@pytest.mark.real_model
def test_the_cli_records_with_the_shipped_model_and_recalls_on_a_server_memory(pg_url: str, tmp_path: Path) -> None:
    """The CLI edge against a PostgreSQL URL, each command its own process (no server marker,
    no file lock): what one process recorded another recalls."""
    import json
    import os

    env = {**os.environ, "APPLIANCE_HOME": str(tmp_path), "APPLIANCE_SEMANTIC": "off", "OMP_WAIT_POLICY": "PASSIVE"}

    def cli(*args: str, create: bool = False) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-m", "appliance", "--db", pg_url, *(["--create"] if create else []), *args, "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    stored = cli("record", "My order 88812 arrived broken, I want to complain!", "--session", "s", create=True)
    assert stored["source_text"].startswith("My order 88812") and stored["status"] != "unparsed"  # type: ignore[union-attr]
    answer = cli("recall", "What happened to order 88812?", "--session", "s")
    assert stored["memory_id"] in json.dumps(answer)
    status = cli("db", "status")
    assert status["counts"]["memories"] == 1  # type: ignore[index]


def test_maintenance_refreshes_the_planners_statistics(pg_url: str) -> None:
    with MemoryStore(pg_url) as pg:
        pg.write_many([make_record(memory_id=f"m{i}", session_id=f"s{i % 3}") for i in range(200)])
        pg.maintain()
        analysed = pg.select("SELECT relname FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL")
        assert {"memories", "lexical_terms", "entities"} <= {r[0] for r in analysed}
        assert pg.select("SELECT reltuples FROM pg_class WHERE relname = 'memories'")[0][0] == 200
