"""Sentence vectors on DuckDB: fixed-size arrays (``FLOAT[dim]``, core
``array_cosine_similarity``, no extension) and an inverted-file index (IVF) so a query does not
compare every vector.

Why an IVF in plain SQL: comparing a question with every vector costs ~1 ms per thousand
vectors (measured: 100 ms for 100k 512-d vectors on this machine), too slow at a million. Once a
table holds more than ``BRUTE_FORCE_MAX`` vectors, k-means centroids (``lists``) are trained on
a sample and each vector is tagged with its nearest centroid; a query compares itself with the
centroids (in numpy), then only with the vectors of the ``PROBES`` nearest lists (plus any not
tagged yet). New vectors are tagged as they are written; the centroids are retrained when the
table has grown ``RETRAIN_GROWTH`` times since.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import date

import duckdb
import numpy as np

from ..database import Connection, Database, session_clause
from ..vectors import VectorTable

__all__ = ["DuckVectors", "BRUTE_FORCE_MAX", "PROBES"]

BRUTE_FORCE_MAX = 20_000  # below this, compare with every vector (≈20 ms)
PROBES = 12  # lists searched per query
SAMPLE = 16_000  # vectors k-means is trained on
RETRAIN_GROWTH = 4.0


class DuckVectors(VectorTable):
    def __init__(self, db: Database, encoder: str = "use3") -> None:
        super().__init__(db, encoder)
        self.centroid_table = f"{self.table}_centroids"
        self._centroids: np.ndarray | None = None
        self._trained_on = 0
        self._lock = threading.Lock()
        if not db.read_only:
            with db.reading() as con:
                con.execute(self._create_table(self.table, if_not_exists=True))
                con.execute(f"ALTER TABLE {self.table} ADD COLUMN IF NOT EXISTS list INTEGER")  # older files
                con.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.centroid_table} (list INTEGER PRIMARY KEY, "
                    f"vec FLOAT[{self.dim}] NOT NULL, trained_on INTEGER NOT NULL)"
                )
        self._load_centroids()

    def _create_table(self, name: str, if_not_exists: bool = False) -> str:
        """The vector table's definition (the live table and its clustered rewrite)."""
        return (
            f"CREATE TABLE {'IF NOT EXISTS ' if if_not_exists else ''}{name} (memory_id VARCHAR PRIMARY KEY, "
            f"session_id VARCHAR NOT NULL, vec FLOAT[{self.dim}] NOT NULL, list INTEGER)"
        )

    def _load_centroids(self) -> None:
        try:
            rows = self.db.fetch(f"SELECT list, vec, trained_on FROM {self.centroid_table} ORDER BY list")
        except duckdb.Error:  # read-only file without the table yet
            rows = []
        if rows:
            self._centroids = np.array([r[1] for r in rows], dtype=np.float32)
            self._trained_on = int(rows[0][2])
        else:
            self._centroids, self._trained_on = None, 0

    def _lists(self, vecs: np.ndarray) -> list[int | None]:
        if self._centroids is None:
            return [None] * len(vecs)
        return [int(x) for x in np.argmax(vecs @ self._centroids.T, axis=1)]

    def put(self, con: Connection, rows: Sequence[tuple[str, str, Sequence[float]]]) -> None:
        """Store (memory_id, session_id, vector) rows inside the caller's transaction.

        Written from a registered frame, not ``executemany``: binding 512 floats per row as
        Python values took 178 s for 50k vectors, the frame 2.5 s (an import or a backfill)."""
        import pandas as pd  # ships with gradio; zero-copy bulk inserts

        assert isinstance(con, duckdb.DuckDBPyConnection)
        rows = list({m: (m, s, v) for m, s, v in rows}.values())  # one statement: the last write of an id wins
        if not rows:
            return
        arrays = [np.asarray(v, dtype=np.float32) for _, _, v in rows]
        wrong = next((a.shape for a in arrays if a.shape != (self.dim,)), None)
        if wrong is not None:
            raise ValueError(f"{self.encoder} vectors have {self.dim} dimensions, got one of shape {wrong}")
        vecs = np.stack(arrays)
        frame = pd.DataFrame(
            {
                "memory_id": [m for m, _, _ in rows],
                "session_id": [s for _, s, _ in rows],
                "vec": list(vecs),
                "list": pd.array(self._lists(vecs), dtype="Int32"),
            }
        )
        con.register("_bulk_v", frame)
        try:
            con.execute(
                f"INSERT OR REPLACE INTO {self.table} (memory_id, session_id, vec, list) "
                f"SELECT memory_id, session_id, vec::FLOAT[{self.dim}], list FROM _bulk_v"
            )
        finally:
            con.unregister("_bulk_v")

    # --- the inverted-file index --------------------------------------------------------------
    def needs_training(self) -> bool:
        n = self.count()
        if n <= BRUTE_FORCE_MAX:
            return False
        return self._centroids is None or n >= RETRAIN_GROWTH * max(1, self._trained_on)

    def train(self, seed: int = 0) -> int:
        """Train the centroids on a sample and tag every vector with its list (k-means, a few
        rounds); returns the number of lists (0 when the table is small enough to scan)."""
        with self._lock:
            n = self.count()
            if n <= BRUTE_FORCE_MAX:
                return 0
            k = int(min(1024, max(16, np.sqrt(n))))
            sample = np.array(
                [r[0] for r in self.db.fetch(f"SELECT vec FROM {self.table} USING SAMPLE {SAMPLE} ROWS")],
                dtype=np.float32,
            )
            centroids = _kmeans(sample, k, seed)
            with self.db.transaction() as con:
                con.execute(f"DELETE FROM {self.centroid_table}")
                con.executemany(
                    f"INSERT INTO {self.centroid_table} VALUES (?, ?::FLOAT[{self.dim}], ?)",
                    [[i, c.tolist(), n] for i, c in enumerate(centroids)],
                )
            self._centroids, self._trained_on = centroids, n
            self._tag_all()
            self._cluster()
            return k

    def _cluster(self) -> None:
        """Rewrite the table in list order. A query reads the vectors of its probed lists only,
        but DuckDB reads a column block by block: scattered, every block holds some of them and
        every vector is read; clustered, a probe reads its own stretch (synthetic 100k vectors,
        10 sessions: query p50 35 → 18 ms). Vectors written later land after them, unclustered,
        until the next training."""
        new = f"{self.table}_clustered"
        cols = "memory_id, session_id, vec, list"
        with self.db.transaction() as con:
            con.execute(f"DROP TABLE IF EXISTS {new}")
            con.execute(self._create_table(new))
            con.execute(f"INSERT INTO {new} ({cols}) SELECT {cols} FROM {self.table} ORDER BY list, session_id")
            con.execute(f"DROP TABLE {self.table}")
            con.execute(f"ALTER TABLE {new} RENAME TO {self.table}")

    def _tag_all(self, batch: int = 50_000) -> None:
        import pandas as pd  # ships with gradio; zero-copy bulk updates

        assert self._centroids is not None
        offset = 0
        while True:
            rows = self.db.fetch(
                f"SELECT memory_id, vec FROM {self.table} ORDER BY memory_id LIMIT ? OFFSET ?", [batch, offset]
            )
            if not rows:
                return
            vecs = np.array([r[1] for r in rows], dtype=np.float32)
            frame = pd.DataFrame({"memory_id": [r[0] for r in rows], "list": self._lists(vecs)})
            with self.db.transaction() as con:
                assert isinstance(con, duckdb.DuckDBPyConnection)
                con.register("_lists", frame)
                try:
                    con.execute(
                        f"UPDATE {self.table} SET list = l.list FROM _lists l WHERE {self.table}.memory_id = l.memory_id"
                    )
                finally:
                    con.unregister("_lists")
            offset += batch

    def search(
        self,
        session: str | None,
        vec: Sequence[float],
        k: int = 5,
        min_score: float = 0.0,
        days: tuple[date, date] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` (memory_id, cosine) pairs closest to ``vec`` (about a day in ``days``)."""
        where, params = session_clause("v.session_id", session, "WHERE")
        where = where or " WHERE TRUE "
        query = np.asarray(vec, dtype=np.float32)
        if self._centroids is not None and self._trained_on > BRUTE_FORCE_MAX:
            probes = np.argsort(-(self._centroids @ query))[:PROBES]
            where += " AND (v.list IN (SELECT unnest(?::INTEGER[])) OR v.list IS NULL) "
            params = [*params, [int(p) for p in probes]]
        if days is not None:
            where += " AND v.memory_id IN (SELECT memory_id FROM memory_days WHERE first_day <= ? AND last_day >= ?) "
            params = [*params, days[1], days[0]]
        sql = (
            f"SELECT v.memory_id, array_cosine_similarity(v.vec, ?::FLOAT[{self.dim}]) AS score "
            f"FROM {self.table} v{where} ORDER BY score DESC LIMIT ?"
        )
        rows = self.db.fetch(sql, [query.tolist(), *params, k])
        return [(m, float(sc)) for m, sc in rows if sc is not None and sc >= min_score]


def _kmeans(x: np.ndarray, k: int, seed: int, rounds: int = 8) -> np.ndarray:
    """Spherical k-means (cosine): unit centroids, a few Lloyd rounds."""
    rng = np.random.default_rng(seed)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)
    centroids = x[rng.choice(len(x), size=min(k, len(x)), replace=False)].copy()
    for _ in range(rounds):
        assign = np.argmax(x @ centroids.T, axis=1)
        for i in range(len(centroids)):
            members = x[assign == i]
            if len(members):
                c = members.sum(axis=0)
                centroids[i] = c / max(float(np.linalg.norm(c)), 1e-9)
    return centroids.astype(np.float32)
