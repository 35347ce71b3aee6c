"""Semantic indexing off the record path: a background thread embeds memories for recall.

The recall encoder (multilingual-e5-small) takes 15–40 ms per memory on two cores, and its first
use loads the model; a record never waits for it. ``add`` queues a just-stored memory; ``notify``
asks for a pass over the store's backlog (memories without a vector of the active encoder: an
import, a file written under another encoder). Queued memories go first, a backlog is embedded
batch by batch between them, each batch in its own transaction (a kill loses at most the batch in
flight; what has no vector is embedded again on the next start). Recall calls ``settle`` first, so
a question asked right after a record finds the record by meaning too; a backlog never makes a
question wait.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from ..model.embed import Embedder
from ..store import MemoryStore

__all__ = ["VectorIndexer", "BATCH", "embed_rows"]

BATCH = 32  # memories per encode call and transaction


def embed_rows(
    store: MemoryStore, embedder: Embedder, rows: list[tuple[str, str, str]], only_stored: bool = False
) -> None:
    """Encode (memory id, session, text) rows and store their vectors in one transaction
    (``only_stored``: none for a memory deleted meanwhile)."""
    vecs = embedder.encode([text for _, _, text in rows])
    store.add_vectors([(m, s, v) for (m, s, _), v in zip(rows, vecs)], only_stored=only_stored)


class VectorIndexer:
    def __init__(self, store: MemoryStore, embedder: Embedder, on_error: Callable[[Exception], None] | None = None):
        self.store = store
        self.embedder = embedder
        self.on_error = on_error
        self._cond = threading.Condition()
        self._queued: deque[tuple[str, str, str]] = deque()  # (memory id, session, text), told here
        self._in_flight = 0  # queued memories being embedded now
        self._backlog = True  # the store may hold memories without vectors
        self._closed = False
        self._thread: threading.Thread | None = None

    def add(self, memory_id: str, session: str, text: str) -> None:
        """A memory just stored: embed it before any backlog."""
        with self._cond:
            if self._closed:
                return
            self._queued.append((memory_id, session, text))
            self._start()

    def notify(self) -> None:
        """Look for memories without a vector (an import, an older file) and embed them."""
        with self._cond:
            if self._closed:
                return
            self._backlog = True
            self._start()

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until every memory queued by ``add`` has its vector (or ``timeout`` seconds);
        whether it did."""
        with self._cond:
            return self._cond.wait_for(lambda: self._closed or not (self._queued or self._in_flight), timeout)

    def drain(self) -> None:
        """Embed the queue and the whole backlog, in the calling thread's time (benches, tests)."""
        self.notify()
        with self._cond:
            self._cond.wait_for(lambda: self._closed or not (self._queued or self._in_flight or self._backlog))

    def close(self) -> None:
        """Stop after the batch in flight (the rest is embedded on the next start)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="vector-indexer", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def _next(self) -> list[tuple[str, str, str]] | None:
        """The next batch (queued memories first), [] when idle, None when closed."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._queued or self._backlog)
            if self._closed:
                return None
            if self._queued:
                batch = [self._queued.popleft() for _ in range(min(BATCH, len(self._queued)))]
                self._in_flight = len(batch)
                return batch
        rows = self.store.vectors.missing(BATCH)
        if len(rows) < BATCH:
            with self._cond:
                self._backlog = False
        return rows

    def _run(self) -> None:
        while (batch := self._next()) is not None:
            try:
                if batch:
                    embed_rows(self.store, self.embedder, batch, only_stored=True)
            except Exception as exc:  # noqa: BLE001 - recall goes on with the other channels
                with self._cond:
                    self._backlog = False  # not again until the next notify
                if self.on_error is not None:
                    self.on_error(exc)
            finally:
                with self._cond:
                    self._in_flight = 0
                    self._cond.notify_all()
