"""The lifecycle part of the ``Appliance`` facade: compact, forget, end sessions, migrate.

Mixed into ``Appliance``; each method is a thin composition of the pure planners
(``compact``, ``forgetting``, ``migrate``) and the store's transactional operations.
Everything destructive has a dry run that shows exactly what the real run would do.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from .compact import Compactor
from .engine import Engine
from .errors import QueryError, SchemaError
from .forgetting import Decision, select
from .grammar import GrammarCache
from .memory import MemoryRecord
from .migrate import MigrationPlan, MigrationSpec, plan
from .schema import MemorySchema, parse_schema
from .store import MemoryStore

__all__ = ["LifecycleMixin"]


class LifecycleMixin:
    schema: MemorySchema
    schemas: dict[str, MemorySchema]
    store: MemoryStore
    grammars: GrammarCache
    _lock: threading.Lock

    # provided by Appliance
    @property
    def engine(self) -> Engine:
        raise NotImplementedError

    def set_schema(self, schema: Any, force: bool = False) -> Any:
        raise NotImplementedError

    # --- compaction ---------------------------------------------------------------------
    def compact(
        self,
        entity_type: str | None = None,
        min_records: int | None = None,
        session_id: str | None = None,
        dry_run: bool = False,
        use_model: bool = True,
    ) -> list[dict[str, Any]]:
        """Summarise entities with many uncovered memories into one summary record each.

        Thresholds come from ``retention.compact_after`` in the schema unless
        ``min_records`` is given. Returns one row per entity (the summary when not a dry run)."""
        targets = []
        for ent in self.schema.entities:
            if entity_type is not None and ent.name != entity_type:
                continue
            threshold = min_records or ent.retention.compact_after
            if threshold:
                targets.append((ent.name, threshold))
        if entity_type is not None and not targets:
            raise QueryError(
                f"no compaction threshold for {entity_type!r}",
                hint="pass min_records or set retention.compact_after in the schema",
            )
        out: list[dict[str, Any]] = []
        for etype, threshold in targets:
            for session, eid, count in self.store.entities_to_compact(etype, threshold, session_id):
                row: dict[str, Any] = {"session_id": session, "entity_type": etype, "entity_id": eid, "records": count}
                if not dry_run:
                    row.update(self._compact_one(session, etype, eid, use_model))
                out.append(row)
        return out

    def _compact_one(self, session: str, etype: str, eid: str, use_model: bool) -> dict[str, Any]:
        originals = self.store.records_by_ids(self.store.uncompacted_memories(session, etype, eid), order="m.ts")
        entity = self.store.get_entity(session, etype, eid)
        with self._lock:
            compactor = Compactor(self.schema, self.engine if use_model else None, self.grammars)
            result = compactor.summarise(session, entity, etype, eid, originals)
        stored = self.store.add_summary(result.summary, result.originals)
        return {"summary_id": stored.memory_id, "summary": stored.source_text, "note": stored.note}

    def summary_sources(self, summary_id: str) -> list[MemoryRecord]:
        """The original memories a summary record covers."""
        return self.store.records_by_ids(self.store.summary_sources(summary_id), order="m.ts")

    # --- forgetting ---------------------------------------------------------------------
    def forget(
        self, dry_run: bool = True, session_id: str | None = None, now: datetime | None = None
    ) -> list[Decision]:
        """Records the schema's retention policies select; deleted only when ``dry_run`` is False."""
        decisions = select(self.schema, self.store.record_facts(session_id), now or datetime.now(UTC))
        if not dry_run and decisions:
            self.store.forget([(d.memory_id, d.policy) for d in decisions])
        return decisions

    def end_session(self, session_id: str, dry_run: bool = False) -> list[Decision]:
        """Mark a session ended and apply the policies to it (``forget_on_session_end``)."""
        if not dry_run:
            self.store.end_session(session_id)
            return self.forget(dry_run=False, session_id=session_id)
        return select(self.schema, self.store.record_facts(session_id), datetime.now(UTC), assume_ended=True)

    # --- schema migrations ------------------------------------------------------------------
    def plan_migration(self, target: MemorySchema, spec: MigrationSpec | dict[str, Any]) -> MigrationPlan:
        """What migrating every stored record to ``target`` would change (nothing is written)."""
        spec = spec if isinstance(spec, MigrationSpec) else MigrationSpec.model_validate(spec)
        # records of the other loaded schemas are theirs, not this migration's
        keep = [target.schema_id] + [x.schema_id for d, x in self.schemas.items() if d != target.domain]
        return plan(target, spec, self.store.memories_not_under(keep), self.store.all_entities_raw())

    def migrate(self, target: MemorySchema, spec: MigrationSpec | dict[str, Any]) -> dict[str, Any]:
        """Rewrite stored records for ``target`` and switch to it; refused if any record would not fit."""
        spec = spec if isinstance(spec, MigrationSpec) else MigrationSpec.model_validate(spec)
        if target.schema_id == self.schema.schema_id:
            raise SchemaError("the new schema is the running schema: nothing to migrate")
        planned = self.plan_migration(target, spec)
        if planned.problems:
            raise SchemaError(
                f"migration refused: {len(planned.problems)} stored rows would not fit the new schema: "
                + "; ".join(planned.problems[:3]),
                hint="add renames/drops to the migration, or change the new schema",
            )
        migration_id = uuid.uuid4().hex[:12]
        journal = {
            "spec": spec.model_dump(),
            "from_schema": self.schema.to_json_dict(),
            "to_schema": target.to_json_dict(),
            "from_version": self.schema.schema_version,
            "to_version": target.schema_version,
        }
        n = self.store.apply_migration(
            migration_id, self.schema.schema_id, target.schema_id, journal, planned.memories, planned.entities
        )
        self.set_schema(target)
        return {"migration_id": migration_id, "records": n, "entities": len(planned.entities)}

    def revert_migration(self, migration_id: str) -> dict[str, Any]:
        """Restore every row a migration changed and switch back to the schema it came from."""
        found = next((m for m in self.store.list_migrations() if m["migration_id"] == migration_id), None)
        if found is None:
            raise SchemaError(f"no migration {migration_id!r}")
        n = self.store.revert_migration(migration_id)
        previous = parse_schema(found["spec"]["from_schema"])
        self.set_schema(previous)
        return {"migration_id": migration_id, "records": n, "schema_version": previous.schema_version}
