from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import duckdb
import pytest

from appliance.domain.records import MemoryRecord, Relationship
from appliance.errors import CorruptStoreError, StaleUpdateError, StoreLockedError
from appliance.store import MemoryStore
from appliance.store.duckdb.migrations import DB_VERSION

from .conftest import make_record

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def _rec(mid: str, eid: str = "4567", state: str | None = "paid", **attrs) -> MemoryRecord:  # type: ignore[no-untyped-def]
    return make_record(
        memory_id=mid,
        timestamp=NOW,
        entity_type="Order",
        entity_id=eid,
        state=state,
        attributes=attrs,
        relationships=[
            Relationship(type="OWNS", source_type="User", source_id="u1", target_type="Order", target_id=eid)
        ],
    )


def test_record_entities_relationships_history(tmp_path) -> None:  # type: ignore[no-untyped-def]
    s = MemoryStore(tmp_path / "a.duckdb")
    s.add_record(_rec("m1", amount=10.0))
    s.add_record(_rec("m2", state="shipped", payment_status="paid"))
    e = s.entities.get("s", "Order", "4567")
    assert e is not None and e.state == "shipped" and e.version == 2
    assert e.attributes == {"amount": 10.0, "payment_status": "paid"}  # merged, not replaced
    assert [h["state"] for h in s.entities.history("s", "Order", "4567")] == ["paid", "shipped"]
    assert s.entities.get("s", "User", "u1") is not None
    assert len(s.list_relationships("s")) == 1


def test_failed_transaction_leaves_nothing(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    s = MemoryStore(tmp_path / "a.duckdb")
    s.add_record(_rec("m1"))
    before = s.counts()
    original = s.entities.upsert

    def boom(*a, **k):  # type: ignore[no-untyped-def]
        original(*a, **k)
        raise RuntimeError("crash in the middle of a record")

    monkeypatch.setattr(s.entities, "upsert", boom)
    with pytest.raises(RuntimeError):
        s.add_record(_rec("m2", eid="777"))
    monkeypatch.undo()
    assert s.counts() == before
    assert s.get_record("m2") is None and s.entities.get("s", "Order", "777") is None


def test_optimistic_locking_refuses_stale_update(tmp_path) -> None:  # type: ignore[no-untyped-def]
    s = MemoryStore(tmp_path / "a.duckdb")
    s.add_record(_rec("m1"))
    seen = s.entities.get("s", "Order", "4567")
    assert seen is not None
    s.entities.update("s", "Order", "4567", seen.version, state="shipped")
    with pytest.raises(StaleUpdateError) as err:
        s.entities.update("s", "Order", "4567", seen.version, state="cancelled")
    assert "version" in err.value.message and err.value.hint
    fresh = s.entities.get("s", "Order", "4567")
    assert fresh is not None and fresh.state == "shipped"
    s.entities.update("s", "Order", "4567", fresh.version, state="delivered")  # the retry path works
    assert s.entities.get("s", "Order", "4567").state == "delivered"  # type: ignore[union-attr]


def test_committed_data_survives_reopen(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "a.duckdb"
    with MemoryStore(p) as s:
        s.add_record(_rec("m1"))
    with MemoryStore(p) as s:
        assert s.get_record("m1") is not None


@pytest.mark.duckdb_only
def test_corrupt_file_is_refused_and_left_untouched(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "bad.duckdb"
    p.write_bytes(b"this is not a database" * 100)
    before = p.read_bytes()
    with pytest.raises(CorruptStoreError) as err:
        MemoryStore(p)
    assert err.value.hint
    assert p.read_bytes() == before


@pytest.mark.duckdb_only
def test_foreign_duckdb_file_is_migrated_not_destroyed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "other.duckdb"
    con = duckdb.connect(str(p))
    con.execute("CREATE TABLE mine (x INT)")
    con.execute("INSERT INTO mine VALUES (42)")
    con.close()
    MemoryStore(p).close()
    con = duckdb.connect(str(p))
    assert con.execute("SELECT x FROM mine").fetchall() == [(42,)]
    con.close()


@pytest.mark.duckdb_only
def test_second_process_gets_a_clear_lock_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "a.duckdb"
    s = MemoryStore(p)
    code = (
        "import sys\nfrom appliance.store import MemoryStore\nfrom appliance.errors import StoreLockedError\n"
        f"try:\n    MemoryStore({str(p)!r})\nexcept StoreLockedError as e:\n    print('LOCKED', e.hint)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    s.close()
    assert out.stdout.startswith("LOCKED"), out.stdout + out.stderr
    assert StoreLockedError.default_hint in out.stdout


def test_bulk_insert_matches_single_inserts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    one = MemoryStore(tmp_path / "one.duckdb")
    bulk = MemoryStore(tmp_path / "bulk.duckdb")
    recs = [_rec("m1", amount=10.0), _rec("m2", state="shipped", payment_status="paid"), _rec("m3", eid="9")]
    for r in recs:
        one.add_record(r)
    assert bulk.write_many(recs) == 3
    for s in (one, bulk):
        e = s.entities.get("s", "Order", "4567")
        assert e is not None and e.state == "shipped"
        assert e.attributes == {"amount": 10.0, "payment_status": "paid"}
        assert len(s.list_relationships("s")) == 2
    assert one.counts()["memories"] == bulk.counts()["memories"] == 3


@pytest.mark.duckdb_only
def test_migration_from_v1_adds_index(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "old.duckdb"
    MemoryStore(p).close()
    con = duckdb.connect(str(p))
    con.execute("DROP INDEX relationships_memory")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'db_version'")
    con.close()
    MemoryStore(p).close()
    con = duckdb.connect(str(p))
    names = [r[0] for r in con.execute("SELECT index_name FROM duckdb_indexes()").fetchall()]
    assert "relationships_memory" in names
    assert con.execute("SELECT value FROM meta WHERE key = 'db_version'").fetchone() == (str(DB_VERSION),)
    con.close()


@pytest.mark.duckdb_only
def test_vector_lists_are_trained_clustered_and_still_exact_for_a_stored_vector(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Past the brute-force size the vectors get k-means lists and the table is rewritten in list
    order: nothing is lost, the key still holds (a vector can be replaced), and a stored vector
    is its own nearest neighbour, in its session only; vectors written after training are found."""
    import numpy as np

    from appliance.store.duckdb import vectors as vectors_module

    monkeypatch.setattr(vectors_module, "BRUTE_FORCE_MAX", 300)
    rng = np.random.default_rng(3)
    store = MemoryStore(tmp_path / "v.duckdb", encoder="use3")
    vecs = rng.normal(size=(600, 512)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    store.add_vectors([(f"m{i}", f"s{i % 3}", v.tolist()) for i, v in enumerate(vecs)])
    assert store.vectors.needs_training()
    store.maintain()
    assert not store.vectors.needs_training() and store.vectors.count() == 600
    lists = [r[0] for r in store.db.fetch(f"SELECT list FROM {store.vectors.table}")]
    assert None not in lists and lists == sorted(lists)  # clustered by list
    for i in (0, 1, 299, 598):
        found = store.vectors.search(f"s{i % 3}", vecs[i].tolist(), k=3)
        assert found[0][0] == f"m{i}" and found[0][1] > 0.99
        assert all(int(m[1:]) % 3 == i % 3 for m, _ in found)
    late = rng.normal(size=512).astype(np.float32)
    store.add_vectors([("late", "s0", (late / np.linalg.norm(late)).tolist()), ("m0", "s0", vecs[1].tolist())])
    assert store.vectors.search("s0", late.tolist(), k=1)[0][0] == "late"
    assert store.vectors.count() == 601  # m0 replaced, not duplicated
    store.close()


def test_a_vector_batch_keeps_the_last_write_of_an_id_and_refuses_a_wrong_dimension(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Vectors are written in one statement from a frame: an id repeated in the batch is written
    once (its last vector), and a vector of another encoder's size is refused before anything
    is written."""
    import numpy as np
    import pytest

    store = MemoryStore(tmp_path / "v.duckdb", encoder="use3")
    first, last = np.eye(512, dtype=np.float32)[0], np.eye(512, dtype=np.float32)[1]
    store.add_vectors([("a", "s", first.tolist()), ("b", "s", first.tolist()), ("a", "s", last.tolist())])
    assert store.vectors.count() == 2
    found = dict(store.vectors.search("s", last.tolist(), k=2))
    assert found["a"] > 0.99 and found["b"] < 0.01
    with pytest.raises(ValueError, match="512 dimensions"):
        store.add_vectors([("c", "s", first.tolist()), ("d", "s", [0.1] * 384)])
    assert store.vectors.count() == 2
    store.close()


def _bm25_postings(store: MemoryStore) -> list[tuple[str, str, list[str]]]:
    words = ["tea", "margaret", "cake", "train", "paris", "sugar", "dog", "rain"]
    return [(f"m{i}", f"s{i % 3}", [words[(i * k) % len(words)] for k in range(1, 2 + i % 5)]) for i in range(300)]


@pytest.mark.duckdb_only
def test_lexical_postings_from_a_v5_file_get_their_lengths_and_rank_the_same(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "v5.duckdb"
    store = MemoryStore(p)
    store.add_terms(_bm25_postings(store))
    before = store.lexical.search("s1", ["tea", "cake"], 20)
    store.close()
    con = duckdb.connect(str(p))
    con.execute("DROP INDEX lexical_terms_term")  # a v5 table: the column did not exist
    con.execute("DROP INDEX lexical_terms_memory")
    con.execute("ALTER TABLE lexical_terms DROP COLUMN length")
    con.execute("CREATE INDEX lexical_terms_term ON lexical_terms (session_id, term)")
    con.execute("CREATE INDEX lexical_terms_memory ON lexical_terms (memory_id)")
    con.execute("UPDATE meta SET value = '5' WHERE key = 'db_version'")
    con.close()
    store = MemoryStore(p)
    assert store.db.fetch("SELECT count(*) FROM lexical_terms WHERE length IS NULL")[0][0] == 0
    assert store.lexical.search("s1", ["tea", "cake"], 20) == before and before
    store.close()


@pytest.mark.duckdb_only
def test_lexical_postings_are_clustered_as_they_grow_and_rank_the_same(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Past the clustering size the postings are rewritten in (session, term) order: same
    scores, indexes back, later postings found, and no rewrite again until they have doubled."""
    from appliance.store import lexical as lexical_module

    monkeypatch.setattr(lexical_module, "CLUSTER_MIN", 500)
    store = MemoryStore(tmp_path / "l.duckdb")
    store.add_terms(_bm25_postings(store))
    queries = [("s0", ["tea", "margaret"]), ("s1", ["cake"]), ("s2", ["rain", "dog", "paris"])]
    before = [store.lexical.search(s, q, 30) for s, q in queries]
    assert store.lexical.needs_clustering()
    store.maintain()
    assert not store.lexical.needs_clustering()
    rows = store.db.fetch("SELECT session_id, term FROM lexical_terms")
    assert rows == sorted(rows)
    names = {r[0] for r in store.db.fetch("SELECT index_name FROM duckdb_indexes() WHERE table_name = 'lexical_terms'")}
    assert names == {"lexical_terms_term", "lexical_terms_memory"}
    assert [store.lexical.search(s, q, 30) for s, q in queries] == before
    store.add_terms([("late", "s0", ["zebra", "tea"])])
    assert store.lexical.search("s0", ["zebra"], 5)[0][0] == "late"
    store.close()


@pytest.mark.duckdb_only
def test_entities_are_clustered_by_session_as_they_grow_and_match_the_same(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Past the clustering size the entities are rewritten in (session, type) order: every one
    kept with its values and history, the key still enforced, names matched as before, later
    entities found, and no rewrite again until they have doubled."""
    from appliance.store import entities as entities_module

    monkeypatch.setattr(entities_module, "CLUSTER_MIN", 50)
    store = MemoryStore(tmp_path / "e.duckdb")
    store.write_many(
        [
            _rec(f"m{i}", eid=f"{9000 + i}", amount=float(i)).model_copy(update={"session_id": f"s{i % 3}"})
            for i in range(60)
        ]
    )
    before = [store.entities.matching(f"s{i % 3}", [str(9000 + i)]) for i in (0, 7, 59)]
    assert store.entities.needs_clustering()
    store.maintain()
    assert not store.entities.needs_clustering()
    rows = store.db.fetch("SELECT session_id, entity_type FROM entities")
    assert rows == sorted(rows) and len(rows) == 60 + 3  # 60 orders, one owner per session
    assert [store.entities.matching(f"s{i % 3}", [str(9000 + i)]) for i in (0, 7, 59)] == before
    assert store.entities.get("s1", "Order", "9007").attributes["amount"] == 7.0  # type: ignore[union-attr]
    assert len(store.entities.history("s1", "Order", "9007")) == 1
    with pytest.raises(duckdb.ConstraintException):
        store.db.con.execute("INSERT INTO entities SELECT * FROM entities LIMIT 1")
    store.write_many([_rec("late", eid="7777", amount=1.0).model_copy(update={"session_id": "s0"})])
    assert store.entities.matching("s0", ["7777"])[0][0].id == "7777"
    assert not store.entities.needs_clustering()
    store.close()


def test_a_code_matches_itself_or_a_part_of_it_and_a_name_its_misspelling(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A question's key finds an entity whose id equals or contains it ("4567" → order 1234567),
    and a misspelt name its entity ("Priyah" → "Priya"); a code one digit away is another
    entity, never a near match (order 10236 is not order 10231)."""
    store = MemoryStore(tmp_path / "m.duckdb")
    store.add_record(_rec("m1", eid="10231"))
    store.add_record(_rec("m2", eid="1234567"))
    store.add_record(_rec("m4", eid="TR-22"))
    store.add_record(make_record(memory_id="m3", entity_type="Person", entity_id="Priya", attributes={}))
    assert [e.id for e, _, _ in store.entities.matching("s", ["10231"])] == ["10231"]
    assert store.entities.matching("s", ["10236"]) == []
    assert store.entities.matching("s", ["A-10232"]) == []
    assert [e.id for e, _, _ in store.entities.matching("s", ["4567"])] == ["1234567"]
    assert store.entities.matching("s", ["TR-2"]) == [] and store.entities.matching("s", ["12345"]) == []
    assert [e.id for e, _, _ in store.entities.matching("s", ["TR-22"])] == ["TR-22"]
    assert [e.id for e, _, _ in store.entities.matching("s", ["Priyah"])] == ["Priya"]
    store.close()


def test_a_record_whose_last_step_reads_an_unchanged_entity_stores_its_vector(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A record mentioning an entity already stored, unchanged, ends its entity work on a read;
    its vector is written after that in the same transaction (DuckDB 2 refused the vector's
    frame while the read's result was unfinished, and the record was lost)."""
    import numpy as np

    from appliance.domain.records import EntityRef, RecordWrite

    store = MemoryStore(tmp_path / "v.duckdb")
    store.add_record(_rec("m1", eid="10231"))
    vec = np.ones(store.vectors.dim, dtype=np.float32)
    mention = make_record(
        memory_id="m2", entity_type=None, entity_id=None, mentions=[EntityRef(type="Order", id="10231")]
    )
    store.write(RecordWrite(record=mention, vector=vec, terms=("order",)))
    assert store.records.by_ids(["m2"])[0].memory_id == "m2"
    assert store.db.fetch(f"SELECT count(*) FROM {store.vectors.table} WHERE memory_id = 'm2'") == [(1,)]
    store.close()


def test_the_schema_a_conversation_is_in_is_its_newest_record_within_the_window(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Routing keeps a conversation in the schema of its last record: the newest one between
    the window's ends (a record told after the message being routed, or long before it, does
    not count), in that session only."""
    from datetime import timedelta

    s = MemoryStore(tmp_path / "a.duckdb")
    hour = timedelta(hours=1)
    s.add_record(make_record(schema_id="cars", timestamp=NOW - 3 * hour, event_type=None))
    s.add_record(make_record(schema_id="meals", timestamp=NOW - hour / 2, event_type=None))
    s.add_record(make_record(schema_id="flights", timestamp=NOW + hour, event_type=None))
    s.add_record(make_record(schema_id="hotels", session_id="other", timestamp=NOW, event_type=None))
    assert s.records.latest_schema("s", NOW - hour, NOW) == "meals"
    assert s.records.latest_schema("s", NOW - 4 * hour, NOW - hour) == "cars"
    assert s.records.latest_schema("s", NOW - hour / 4, NOW) is None
    assert s.records.latest_schema("nobody", NOW - hour, NOW) is None
    s.close()


def test_the_background_indexer_embeds_every_memory_and_skips_one_deleted_meanwhile(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from appliance.lifecycle.indexing import BATCH, VectorIndexer
    from appliance.testing import FakeEmbedder

    from .conftest import make_record

    store = MemoryStore(tmp_path / "i.duckdb", encoder="hashing")
    store.write_many([make_record(source_text=f"turn number {i} about apples") for i in range(BATCH * 2 + 5)])
    indexer = VectorIndexer(store, FakeEmbedder())
    indexer.drain()  # the backlog: memories stored before it started
    assert store.vectors.count() == BATCH * 2 + 5 and store.vectors.missing() == []
    more = make_record(source_text="one more")
    store.write_many([more])
    indexer.add(more.memory_id, more.session_id, more.source_text)
    assert indexer.settle(30) and store.vectors.count() == BATCH * 2 + 6
    gone = make_record(source_text="deleted while it was being embedded")
    indexer.add(gone.memory_id, gone.session_id, gone.source_text)  # never stored (or deleted)
    assert indexer.settle(30) and store.vectors.count() == BATCH * 2 + 6
    indexer.close()
    indexer.add(more.memory_id, more.session_id, more.source_text)  # closed: no thread writes any more
    store.close()


def test_a_failing_encoder_never_blocks_a_question(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from appliance.lifecycle.indexing import VectorIndexer

    from .conftest import make_record

    class Broken:
        name, dim = "hashing", 384

        def encode(self, texts):  # type: ignore[no-untyped-def]
            raise RuntimeError("encoder gone")

    errors: list[Exception] = []
    store = MemoryStore(tmp_path / "b.duckdb", encoder="hashing")
    rec = make_record(source_text="a memory")
    store.write_many([rec])
    indexer = VectorIndexer(store, Broken(), on_error=errors.append)  # type: ignore[arg-type]
    indexer.add(rec.memory_id, rec.session_id, rec.source_text)
    assert indexer.settle(30) and store.vectors.count() == 0 and errors
    indexer.close()
    store.close()
