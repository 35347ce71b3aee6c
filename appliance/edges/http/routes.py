"""The HTTP API's endpoints: each checks the caller's grant (``edges/access.py``) for the session
it touches, then calls the ``Appliance`` facade. Sessions are the access boundary: a key scoped to
some sessions cannot read, list, change or forget anything outside them; listing without a
session and asking across sessions need an admin key. Every listed row names its session."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import FileResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field
from starlette.background import BackgroundTask

from ...api import Appliance
from ...domain.inputs import parse_moment
from ...domain.loading import parse_schema, schema_problems
from ...domain.records import MemoryRecord, RecallQuery, RecallResult
from ...errors import NotFoundError
from ..access import AccessPolicy, Grant
from .contract import documented

__all__ = ["add_routes"]

TEXT_LIMIT = 20_000


class RecordIn(BaseModel):
    text: str = Field(max_length=TEXT_LIMIT)
    session_id: str = "default"
    schema_name: str | None = Field(default=None, description="loaded schema domain; default: chosen per text")
    at: str | None = Field(default=None, description="when the text was said, ISO 8601 (default: now)")
    request_id: str | None = Field(
        default=None, max_length=200, description="client id of this request: a retry returns the stored record"
    )


class RecallIn(BaseModel):
    question: str = Field(max_length=TEXT_LIMIT)
    session_id: str = "default"
    schema_name: str | None = None
    at: str | None = Field(default=None, description="when the question is asked, ISO 8601 (default: now)")


class CompactIn(BaseModel):
    entity_type: str | None = None
    min_records: int | None = Field(default=None, ge=2)
    session_id: str | None = Field(default=None, description="required unless the key is an admin")
    dry_run: bool = False
    use_model: bool = Field(default=True, description="false: facts-only summaries (no model-written sentence)")


class ForgetIn(BaseModel):
    apply: bool = False  # default is a dry run
    session_id: str | None = Field(default=None, description="required unless the key is an admin")


class MigrateIn(BaseModel):
    schema_: dict[str, Any] = Field(alias="schema", description="the new schema (its file form)")
    spec: dict[str, Any] = Field(default_factory=dict, description="renames and drops (schema migrate --spec)")
    dry_run: bool = True  # default: what would change


class QueryIn(BaseModel):
    query: RecallQuery
    session_id: str = "default"


class EditIn(BaseModel):
    changes: dict[str, Any] = Field(description="fields to change: attributes, state, entity_id, status, …")


# declares the bearer scheme in the OpenAPI; a missing or other scheme is the policy's to refuse
BEARER = HTTPBearer(auto_error=False, description="an API key (APPLIANCE_TOKEN or APPLIANCE_KEYS_FILE)")


def add_routes(api: FastAPI, app: Appliance, policy: AccessPolicy) -> None:
    def grant(credentials: HTTPAuthorizationCredentials | None = Depends(BEARER)) -> Grant:
        return policy.grant_for(f"Bearer {credentials.credentials}" if credentials is not None else None)

    def owned(memory_id: str, who: Grant) -> MemoryRecord:
        rec = app.get_record(memory_id)
        if rec is None or not who.may_use(rec.session_id):  # another session's memory is not even named
            raise NotFoundError(f"no memory {memory_id}")
        return rec

    @api.get("/health")
    def health(who: Grant = Depends(grant)) -> dict[str, Any]:
        """Liveness; for an admin key also the schema, database, row counts and model."""
        status = app.status()
        return {"ok": True, **(status if who.admin else {"schema": status["schema"]})}

    @api.get("/openapi.json", include_in_schema=False)
    def openapi(_: Grant = Depends(grant)) -> dict[str, Any]:
        return documented(api.openapi())

    @api.post("/record")
    def record(body: RecordIn, who: Grant = Depends(grant)) -> MemoryRecord:
        """Store what was said as a typed memory record; `request_id` makes a retry return the stored record."""
        session = who.check_session(body.session_id)
        return app.record(
            body.text,
            session_id=session,
            schema=body.schema_name,
            now=parse_moment(body.at),
            request_id=body.request_id,
        )

    @api.post("/recall")
    def recall(body: RecallIn, who: Grant = Depends(grant)) -> RecallResult:
        """Answer a question from the session's memory: fused structured, lexical and semantic channels, or "not found"."""
        return app.recall(
            body.question,
            session_id=who.check_session(body.session_id),
            schema=body.schema_name,
            now=parse_moment(body.at),
            across_sessions=who.admin,
        )

    @api.post("/query")
    def query(body: QueryIn, who: Grant = Depends(grant)) -> RecallResult:
        """Run a structured RecallQuery directly (filters, hops), as parameterised SQL."""
        return app.query(body.query, session_id=who.check_session(body.session_id), across_sessions=who.admin)

    @api.get("/memories")
    def memories(
        session_id: str | None = None,
        search: str = "",
        limit: int = 50,
        offset: int = 0,
        who: Grant = Depends(grant),
    ) -> list[MemoryRecord]:
        """List memories of a session (all sessions: admin only), newest first, with an optional text search."""
        scope = who.scope(session_id, "listing memories")
        return app.list_records(session=scope, search=search, limit=min(max(limit, 1), 500), offset=max(offset, 0))

    @api.get("/memories/{memory_id}")
    def get_memory(memory_id: str, who: Grant = Depends(grant)) -> MemoryRecord:
        """One memory record by id (another session's is 404)."""
        return owned(memory_id, who)

    @api.patch("/memories/{memory_id}")
    def edit_memory(memory_id: str, body: EditIn, who: Grant = Depends(grant)) -> MemoryRecord:
        """Edit a record; the result is validated against its schema and marked reviewed."""
        owned(memory_id, who)
        if "session_id" in body.changes:
            who.check_session(str(body.changes["session_id"]))
        return app.edit_record(memory_id, body.changes)

    @api.delete("/memories/{memory_id}")
    def delete_memory(memory_id: str, who: Grant = Depends(grant)) -> dict[str, Any]:
        """Delete a memory record."""
        rec = owned(memory_id, who)
        app.delete_record(rec.memory_id)
        return {"deleted": rec.memory_id, "session_id": rec.session_id}

    @api.get("/entities")
    def entities(session_id: str | None = None, limit: int = 200, who: Grant = Depends(grant)) -> list[dict[str, Any]]:
        """The entities of a session (all sessions: admin only), with state and attributes."""
        scope = who.scope(session_id, "listing entities")
        return [e.model_dump(mode="json") for e in app.list_entities(session=scope, limit=min(max(limit, 1), 1000))]

    @api.get("/merges")
    def merges(session_id: str | None = None, who: Grant = Depends(grant)) -> list[dict[str, Any]]:
        """Every entity merge and correction, with the rule that made it."""
        return app.list_merges(who.scope(session_id, "listing merges"))

    @api.get("/schema")
    def schema(_: Grant = Depends(grant)) -> dict[str, Any]:
        """The schemas the memory holds: the default one, and every loaded one by domain."""
        return {
            "schema_id": app.schema.schema_id,
            "schema": app.schema.to_json_dict(),
            "loaded": {d: x.schema_id for d, x in app.schemas.items()},
            "schemas": {d: x.to_json_dict() for d, x in app.schemas.items()},
        }

    @api.get("/schema/history")
    def schema_history(_: Grant = Depends(grant)) -> list[dict[str, Any]]:
        """Every schema version the memory held, oldest first (`loaded`: held now)."""
        return app.schema_history()

    @api.get("/schema/migrations")
    def migrations(who: Grant = Depends(grant)) -> list[dict[str, Any]]:
        """Applied schema migrations, newest first, and whether each was reverted (admin only)."""
        who.check_admin("listing migrations")
        return app.list_migrations()

    @api.post("/schema/migrate")
    def migrate(body: MigrateIn, who: Grant = Depends(grant)) -> dict[str, Any]:
        """Move every stored record to a new schema (a dry run unless `dry_run` is false); refused
        if any record would not fit; the memory holds the new schema after (admin only)."""
        who.check_admin("a schema migration")
        target = parse_schema(body.schema_)
        if body.dry_run:
            return app.plan_migration(target, body.spec).summary()
        return app.migrate(target, body.spec)

    @api.post("/schema/migrations/{migration_id}/revert")
    def revert(migration_id: str, who: Grant = Depends(grant)) -> dict[str, Any]:
        """Undo a migration: every row it changed is restored, the schema switched back (admin only)."""
        who.check_admin("reverting a migration")
        return app.revert_migration(migration_id)

    @api.post("/schema/validate")
    def validate(raw: dict[str, Any], _: Grant = Depends(grant)) -> dict[str, Any]:
        """Check a schema: every problem, each naming its field."""
        problems = schema_problems(raw)
        return {"valid": not problems, "problems": problems}

    @api.post("/compact")
    def compact(body: CompactIn, who: Grant = Depends(grant)) -> list[dict[str, Any]]:
        """Compact busy entities into summary records (dry run first)."""
        scope = who.scope(body.session_id, "compacting")
        return app.compact(body.entity_type, body.min_records, scope, dry_run=body.dry_run, use_model=body.use_model)

    @api.post("/forget")
    def forget(body: ForgetIn, who: Grant = Depends(grant)) -> list[dict[str, Any]]:
        """Apply the schema's retention policies (a dry run unless `apply`)."""
        scope = who.scope(body.session_id, "forgetting")
        return [d.__dict__ for d in app.forget(dry_run=not body.apply, session_id=scope)]

    @api.post("/sessions/{session_id}/end")
    def end_session(session_id: str, dry_run: bool = False, who: Grant = Depends(grant)) -> list[dict[str, Any]]:
        """End a session: applies the forget_on_session_end policies."""
        return [d.__dict__ for d in app.end_session(who.check_session(session_id), dry_run=dry_run)]

    @api.get("/backup")
    def backup(who: Grant = Depends(grant)) -> FileResponse:
        """A consistent snapshot of the whole database, taken while serving (admin only)."""
        who.check_admin("a backup")
        folder = Path(tempfile.mkdtemp(prefix="appliance-backup-"))
        target = folder / "memory-backup.duckdb"
        try:
            app.backup(target)
        except Exception:
            _remove(folder)
            raise
        return _download(folder, target)

    @api.get("/export")
    def export(format: str = "jsonl", who: Grant = Depends(grant)) -> FileResponse:
        """Every record as JSONL or Parquet (admin only)."""
        who.check_admin("an export")
        folder = Path(tempfile.mkdtemp(prefix="appliance-export-"))
        target = folder / f"memories.{format}"
        try:
            app.export(target, fmt=format)
        except Exception:
            _remove(folder)
            raise
        return _download(folder, target)


def _remove(folder: Path) -> None:
    for p in folder.iterdir():
        p.unlink(missing_ok=True)
    folder.rmdir()


def _download(folder: Path, target: Path) -> FileResponse:
    return FileResponse(
        target,
        media_type="application/octet-stream",
        filename=target.name,
        background=BackgroundTask(_remove, folder),
    )
