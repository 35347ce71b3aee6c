from __future__ import annotations

import threading

from appliance.api import Appliance
from appliance.errors import StaleUpdateError
from appliance.testing import FakeEngine


def test_threads_recording_and_updating_one_entity_lose_nothing(settings) -> None:  # type: ignore[no-untyped-def]
    app = Appliance(db=settings.home / "m.duckdb", model=FakeEngine(preferences={"Order": 5.0}), settings=settings)
    app.record("order 4567 is late", "c")
    ent = app.store.entities.get("c", "Order", "4567")
    assert ent is not None
    errors: list[BaseException] = []
    stale = [0]
    updates = [0]

    def recorder(n: int) -> None:
        try:
            for i in range(10):
                app.record(f"order 4567 note {n}-{i}", "c")
        except BaseException as exc:  # noqa: BLE001 - any failure fails the test
            errors.append(exc)

    def updater(n: int) -> None:
        try:
            for i in range(10):
                while True:  # the documented retry path: re-read, re-apply
                    cur = app.store.entities.get("c", "Order", "4567")
                    assert cur is not None
                    try:
                        app.store.entities.update("c", "Order", "4567", cur.version, attributes={f"note_{n}_{i}": "x"})
                        updates[0] += 1
                        break
                    except StaleUpdateError:
                        stale[0] += 1
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=recorder, args=(k,)) for k in range(3)]
    threads += [threading.Thread(target=updater, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    final = app.store.entities.get("c", "Order", "4567")
    assert final is not None
    assert updates[0] == 30
    assert all(f"note_{n}_{i}" in final.attributes for n in range(3) for i in range(10))  # no lost update
    assert app.store.counts()["memories"] == 31
    history = app.store.entities.history("c", "Order", "4567")
    assert [h["version"] for h in history] == list(range(1, len(history) + 1))  # no version lost or reused
