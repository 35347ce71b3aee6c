"""One error contract for every HTTP error: ``{"error": …, "hint": …}`` with the status that
says whose fault it is. Messages name the field and the problem, never echo the input back
(a 100 MB body must not come back as a 100 MB error)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ...errors import (
    AccessDenied,
    ApplianceError,
    DiskFullError,
    ModelError,
    NotFoundError,
    StaleUpdateError,
    StoreLockedError,
    Unauthenticated,
    UserError,
)

__all__ = ["install_error_contract", "status_of", "documented"]

log = logging.getLogger("appliance.http")


def status_of(exc: ApplianceError) -> int:
    for kind, status in (
        (Unauthenticated, 401),
        (AccessDenied, 403),
        (NotFoundError, 404),
        (StaleUpdateError, 409),
        (UserError, 400),
        (ModelError, 503),
        (DiskFullError, 507),
        (StoreLockedError, 503),
    ):
        if isinstance(exc, kind):
            return status
    return 500


MAX_MESSAGE_CHARS = 400  # an error names what is wrong; a name or key it quotes is cut, never echoed whole


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def _json(status: int, error: str, hint: str = "", headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": _bounded(error), "hint": _bounded(hint)}, status_code=status, headers=headers)


def install_error_contract(api: FastAPI) -> None:
    @api.exception_handler(ApplianceError)
    async def _appliance(_: Request, exc: ApplianceError) -> JSONResponse:
        status = status_of(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return _json(status, exc.message, exc.hint, headers)

    @api.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        return _json(400, "invalid request: " + "; ".join(problems), "see /openapi.json for the request shapes")

    @api.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        hint = "see /openapi.json for the endpoints" if exc.status_code in (404, 405) else ""
        return _json(exc.status_code, str(exc.detail), hint)

    @api.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")  # the trace goes to the server log, not the caller
        return _json(500, "internal error", "the server log has the details; nothing was half-written")


# the statuses every operation may answer, as the error contract sends them (not FastAPI's 422)
_ERRORS = {
    "400": "bad input: the message names the field and the problem",
    "401": "no key, or a wrong one",
    "403": "the key may not do this (another session, or not an admin)",
    "404": "not stored (or another session's)",
    "413": "request body over the limit",
    "503": "model or database busy / unavailable",
    "507": "the disk is full: nothing was stored",
}


def documented(spec: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI as the API answers: every operation's error statuses with the
    ``{"error", "hint"}`` body, no 422 (validation problems are 400), and the bearer scheme."""
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = {
        "type": "object",
        "properties": {"error": {"type": "string"}, "hint": {"type": "string"}},
        "required": ["error", "hint"],
    }
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for ops in spec.get("paths", {}).values():
        for op in ops.values():
            responses = op.setdefault("responses", {})
            responses.pop("422", None)
            for status, why in _ERRORS.items():
                responses.setdefault(status, {"description": why, "content": body})
            op.setdefault("security", [{"HTTPBearer": []}])
    return spec
