"""Local HTTP API (FastAPI, already installed with Gradio) so any agent framework can use the
appliance: record, recall, query, memories, entities, schema. OpenAPI at /openapi.json.

Binds to 127.0.0.1 by default; binding elsewhere requires a bearer token (checked on every
request). Errors come back as JSON ``{"error", "hint"}``, never as a traceback."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from ..api import Appliance
from ..domain.inputs import parse_moment
from ..domain.loading import schema_problems
from ..domain.records import MemoryRecord, RecallQuery, RecallResult
from ..errors import ApplianceError, ModelError, UserError

__all__ = ["build_http", "serve_http", "LOOPBACK"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class RecordIn(BaseModel):
    text: str = Field(max_length=20_000)
    session_id: str = "default"
    schema_name: str | None = Field(default=None, description="loaded schema domain; default: chosen per text")
    at: str | None = Field(default=None, description="when the text was said, ISO 8601 (default: now)")


class RecallIn(BaseModel):
    question: str = Field(max_length=20_000)
    session_id: str = "default"
    schema_name: str | None = None
    at: str | None = Field(default=None, description="when the question is asked, ISO 8601 (default: now)")


class CompactIn(BaseModel):
    entity_type: str | None = None
    min_records: int | None = Field(default=None, ge=2)
    session_id: str | None = None
    dry_run: bool = False


class ForgetIn(BaseModel):
    apply: bool = False  # default is a dry run
    session_id: str | None = None


class QueryIn(BaseModel):
    query: RecallQuery
    session_id: str = "default"


def build_http(app: Appliance, token: str | None = None) -> FastAPI:
    """The FastAPI application over ``app``; ``token`` turns on bearer authentication."""
    api = FastAPI(title="Memory appliance", version="0.1.0", docs_url=None, redoc_url=None)

    def auth(authorization: str | None = Header(default=None)) -> None:
        if token is None:
            return
        given = (authorization or "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(status_code=401, detail="missing or wrong bearer token")

    @api.exception_handler(ApplianceError)
    async def _appliance_error(_: Request, exc: ApplianceError) -> JSONResponse:
        status = 400 if isinstance(exc, UserError) else 503 if isinstance(exc, ModelError) else 500
        return JSONResponse({"error": exc.message, "hint": exc.hint}, status_code=status)

    deps = [Depends(auth)]

    @api.get("/health", dependencies=deps)
    def health() -> dict[str, Any]:
        return {"ok": True, **app.status()}

    @api.post("/record", dependencies=deps)
    def record(body: RecordIn) -> MemoryRecord:
        return app.record(body.text, session_id=body.session_id, schema=body.schema_name, now=parse_moment(body.at))

    @api.post("/recall", dependencies=deps)
    def recall(body: RecallIn) -> RecallResult:
        return app.recall(body.question, session_id=body.session_id, schema=body.schema_name, now=parse_moment(body.at))

    @api.post("/query", dependencies=deps)
    def query(body: QueryIn) -> RecallResult:
        return app.query(body.query, session_id=body.session_id)

    @api.get("/memories", dependencies=deps)
    def memories(
        session_id: str | None = None, search: str = "", limit: int = 50, offset: int = 0
    ) -> list[MemoryRecord]:
        return app.list_records(session=session_id, search=search, limit=min(max(limit, 1), 500), offset=max(offset, 0))

    @api.get("/entities", dependencies=deps)
    def entities(session_id: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        return [
            e.model_dump(mode="json") for e in app.list_entities(session=session_id, limit=min(max(limit, 1), 1000))
        ]

    @api.get("/schema", dependencies=deps)
    def schema() -> dict[str, Any]:
        return {
            "schema_id": app.schema.schema_id,
            "schema": app.schema.to_json_dict(),
            "loaded": {d: x.schema_id for d, x in app.schemas.items()},
        }

    @api.get("/merges", dependencies=deps)
    def merges(session_id: str | None = None) -> list[dict[str, Any]]:
        return app.list_merges(session_id)

    @api.post("/compact", dependencies=deps)
    def compact(body: CompactIn) -> list[dict[str, Any]]:
        return app.compact(body.entity_type, body.min_records, body.session_id, dry_run=body.dry_run)

    @api.post("/forget", dependencies=deps)
    def forget(body: ForgetIn) -> list[dict[str, Any]]:
        return [d.__dict__ for d in app.forget(dry_run=not body.apply, session_id=body.session_id)]

    @api.post("/sessions/{session_id}/end", dependencies=deps)
    def end_session(session_id: str, dry_run: bool = False) -> list[dict[str, Any]]:
        return [d.__dict__ for d in app.end_session(session_id, dry_run=dry_run)]

    @api.post("/schema/validate", dependencies=deps)
    def validate(raw: dict[str, Any]) -> dict[str, Any]:
        problems = schema_problems(raw)
        return {"valid": not problems, "problems": problems}

    return api


def serve_http(app: Appliance, host: str = "127.0.0.1", port: int = 8765, token: str | None = None) -> None:
    """Run the API with uvicorn; refuses a non-loopback address without a token."""
    import uvicorn

    if host not in LOOPBACK and not token:
        raise UserError(f"refusing to bind {host} without a token", hint="pass --token or bind 127.0.0.1")
    uvicorn.run(build_http(app, token), host=host, port=port, log_level="warning")
