"""The memory lifecycle: compact, forget, end sessions, migrate — each record by its own schema.

Each operation is a thin composition of the pure planners (``compact``, ``forgetting``,
``migrate``) and the store's transactional operations. Everything destructive has a dry run
that shows exactly what the real run would do. With several schemas loaded, compaction uses
each schema's own thresholds for its own entity types and forgetting applies to each record
the policies of the schema it was written under (``forgetting.schema_of``).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..domain.loading import parse_schema
from ..domain.records import MemoryRecord, RecordWrite
from ..domain.schema import MemorySchema
from ..errors import QueryError, SchemaError
from ..model.engine import Engine
from ..model.grammar import GrammarCache
from ..store import MemoryStore
from .compact import Compactor
from .forgetting import Decision, select
from .migrate import MigrationPlan, MigrationSpec, plan

__all__ = ["LifecycleService"]


class LifecycleService:
    def __init__(
        self,
        store: MemoryStore,
        grammars: GrammarCache,
        schemas: Callable[[], list[MemorySchema]],
        engine: Callable[[], Engine],
        model_lock: threading.Lock,
    ) -> None:
        self.store = store
        self.grammars = grammars
        self._schemas = schemas  # the loaded schemas, first = default (read at each call)
        self._engine = engine
        self._lock = model_lock

    # --- compaction ---------------------------------------------------------------------
    def compact(
        self,
        entity_type: str | None = None,
        min_records: int | None = None,
        session_id: str | None = None,
        dry_run: bool = False,
        use_model: bool = True,
        progress: Callable[[str, int, int | None], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Summarise entities with many uncovered memories into one summary record each.

        Thresholds come from ``retention.compact_after`` of the schema declaring the entity
        type unless ``min_records`` is given. Returns one row per entity (the summary when not
        a dry run)."""
        targets: dict[str, tuple[MemorySchema, int]] = {}
        for schema in self._schemas():
            for ent in schema.entities:
                if entity_type is not None and ent.name != entity_type:
                    continue
                threshold = min_records or ent.retention.compact_after
                if threshold and ent.name not in targets:
                    targets[ent.name] = (schema, threshold)
        if entity_type is not None and not targets:
            raise QueryError(
                f"no compaction threshold for {entity_type!r}",
                hint="pass min_records or set retention.compact_after in the schema",
            )
        found = [
            (schema, etype, busy)
            for etype, (schema, threshold) in targets.items()
            for busy in self.store.lifecycle.entities_to_compact(etype, threshold, session_id)
        ]
        out: list[dict[str, Any]] = []
        for i, (schema, etype, (session, eid, count)) in enumerate(found, 1):
            row: dict[str, Any] = {"session_id": session, "entity_type": etype, "entity_id": eid, "records": count}
            if not dry_run:
                row.update(self._compact_one(schema, session, etype, eid, use_model))
                if progress:
                    progress("compacting", i, len(found))
            out.append(row)
        return out

    def _compact_one(self, schema: MemorySchema, session: str, etype: str, eid: str, use_model: bool) -> dict[str, Any]:
        originals = self.store.records.by_ids(
            self.store.lifecycle.uncompacted_memories(session, etype, eid), order="m.ts"
        )
        entity = self.store.entities.get(session, etype, eid)
        with self._lock:
            compactor = Compactor(schema, self._engine() if use_model else None, self.grammars)
            result = compactor.summarise(session, entity, etype, eid, originals)
        stored = self.store.write(RecordWrite(record=result.summary, summary_of=tuple(result.originals)))
        return {"summary_id": stored.memory_id, "summary": stored.source_text, "note": stored.note}

    def summary_sources(self, summary_id: str) -> list[MemoryRecord]:
        """The original memories a summary record covers."""
        return self.store.records.by_ids(self.store.lifecycle.summary_sources(summary_id), order="m.ts")

    # --- forgetting ---------------------------------------------------------------------
    def forget(
        self, dry_run: bool = True, session_id: str | None = None, now: datetime | None = None
    ) -> list[Decision]:
        """Records their schemas' retention policies select; deleted only when ``dry_run`` is False."""
        decisions = select(self._schemas(), self.store.lifecycle.record_facts(session_id), now or datetime.now(UTC))
        if not dry_run and decisions:
            self.store.lifecycle.forget([(d.memory_id, d.policy) for d in decisions])
        return decisions

    def end_session(self, session_id: str, dry_run: bool = False) -> list[Decision]:
        """Mark a session ended and apply the policies to it (``forget_on_session_end``)."""
        if not dry_run:
            self.store.lifecycle.end_session(session_id)
            return self.forget(dry_run=False, session_id=session_id)
        return select(
            self._schemas(), self.store.lifecycle.record_facts(session_id), datetime.now(UTC), assume_ended=True
        )

    # --- schema migrations ------------------------------------------------------------------
    def plan_migration(self, target: MemorySchema, spec: MigrationSpec | dict[str, Any]) -> MigrationPlan:
        """What migrating every stored record to ``target`` would change (nothing is written)."""
        spec = spec if isinstance(spec, MigrationSpec) else MigrationSpec.model_validate(spec)
        # records of the other loaded schemas are theirs, not this migration's
        keep = [target.schema_id] + [x.schema_id for x in self._schemas() if x.domain != target.domain]
        return plan(target, spec, self.store.lifecycle.memories_not_under(keep), self.store.entities.all_raw())

    def migrate(
        self,
        current: MemorySchema,
        target: MemorySchema,
        spec: MigrationSpec | dict[str, Any],
        then: Callable[[Any], None] | None = None,
    ) -> dict[str, Any]:
        """Rewrite stored records for ``target``; refused if any record would not fit.
        ``then`` runs in the migration's transaction (the caller stores the new schema there)."""
        spec = spec if isinstance(spec, MigrationSpec) else MigrationSpec.model_validate(spec)
        if target.schema_id == current.schema_id:
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
            "from_schema": current.to_json_dict(),
            "to_schema": target.to_json_dict(),
            "from_version": current.schema_version,
            "to_version": target.schema_version,
        }
        n = self.store.lifecycle.apply_migration(
            migration_id, current.schema_id, target.schema_id, journal, planned.memories, planned.entities, then
        )
        return {"migration_id": migration_id, "records": n, "entities": len(planned.entities)}

    def migration_source(self, migration_id: str) -> MemorySchema:
        """The schema a migration came from (what reverting it switches back to)."""
        found = next((m for m in self.store.lifecycle.list_migrations() if m["migration_id"] == migration_id), None)
        if found is None:
            raise SchemaError(f"no migration {migration_id!r}", hint="see `appliance schema migrations`")
        return parse_schema(found["spec"]["from_schema"])

    def revert_migration(self, migration_id: str, then: Callable[[Any], None] | None = None) -> dict[str, Any]:
        """Restore every row a migration changed; ``then`` runs in the same transaction."""
        previous = self.migration_source(migration_id)
        n = self.store.lifecycle.revert_migration(migration_id, then)
        return {"migration_id": migration_id, "records": n, "schema_version": previous.schema_version}
