"""The appliance as an MCP server (official ``mcp`` SDK), so a desktop agent or any MCP client can
keep structured memory: stdio (the agent starts ``appliance mcp``) or streamable HTTP on loopback
(``appliance mcp --http``) behind the same Host guard, body limit and keys as the HTTP API.

Tools: record, recall, query, list_entities, get_entity, edit_memory, delete_memory, forget (dry
run unless ``apply``). Resources: the loaded schemas and a session's entities. Every appliance
error reaches the agent as an MCP tool error carrying its hint, never as a crash.

Over stdio the caller is the local user who started the process (every session). Over HTTP with
keys configured, a key must be an admin key: MCP sessions carry no per-call identity here, so a
session-scoped key is refused (the HTTP API serves those)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from ..api import Appliance
from ..domain.inputs import parse_moment
from ..errors import AccessDenied, ApplianceError, NotFoundError
from .access import AccessPolicy

__all__ = ["build_mcp", "serve_mcp_stdio", "serve_mcp_http", "mcp_http_asgi"]

T = TypeVar("T")

INSTRUCTIONS = (
    "Structured long-term memory. Call `record` with each thing the user tells you that is worth "
    "keeping (one message per call, with the time it was said if you know it); call `recall` "
    "before answering a question that may depend on earlier conversations; use `query` when you "
    "know the entity type and filters exactly. A recall that says NOT FOUND means nothing stored "
    "answers it: say so instead of guessing."
)


def _tool_error(exc: ApplianceError) -> Exception:
    from mcp.server.mcpserver.exceptions import ToolError

    return ToolError(f"{exc.message} (hint: {exc.hint})" if exc.hint else exc.message)


def _guard(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except ApplianceError as exc:
        raise _tool_error(exc) from None


def build_mcp(app: Appliance) -> Any:
    """The MCP server over ``app`` (transport chosen by the caller)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="memory-appliance", instructions=INSTRUCTIONS, version="0.2.0", log_level="WARNING")

    @server.tool()
    def record(
        text: str,
        session_id: str = "default",
        at: str | None = None,
        schema: str | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Store what the user said as a typed memory record (entity, state, attributes, event).
        Call once per user message worth remembering. `at`: when it was said (ISO 8601), so
        "yesterday" resolves; `request_id`: your id for this call, a retry returns the same record.
        A record with status needs_review was uncertain: you may ask the user to confirm."""
        rec = _guard(
            lambda: app.record(text, session_id=session_id, now=parse_moment(at), schema=schema, request_id=request_id)
        )
        return {"summary": rec.summary(), **rec.model_dump(mode="json", exclude={"raw_output", "spans"})}

    @server.tool()
    def recall(question: str, session_id: str = "default", at: str | None = None) -> dict[str, Any]:
        """Answer a question from stored memories: returns a context to read (best evidence first;
        it opens with NOT FOUND when nothing stored matches) and the ranked memories. Call before
        answering anything that may depend on what the user told you earlier."""
        res = _guard(lambda: app.recall(question, session_id=session_id, now=parse_moment(at)))
        return {
            "context": res.context,
            "not_found": res.not_found,
            "memories": [m.model_dump(mode="json") for m in res.memories[:10]],
            "query": res.query.model_dump(mode="json", exclude_defaults=True),
        }

    @server.tool()
    def query(query: dict[str, Any], session_id: str = "default") -> dict[str, Any]:
        """Run a structured query without the model: {"entity_type": "Order", "filters":
        [{"field": "id", "op": "eq", "value": "12345"}], "limit": 5}. Fields are the schema's
        attributes (see the schemas resource); values are bound parameters."""
        res = _guard(lambda: app.query(query, session_id=session_id))
        return {"context": res.context, "hits": [h.model_dump(mode="json") for h in res.hits], "sql": res.sql}

    @server.tool()
    def list_entities(session_id: str = "default", limit: int = 50) -> list[dict[str, Any]]:
        """The entities a session's memories built (type, id, state, attributes), newest first."""
        rows = _guard(lambda: app.list_entities(session=session_id, limit=max(1, min(limit, 500))))
        return [e.model_dump(mode="json") for e in rows]

    @server.tool()
    def get_entity(entity_type: str, entity_id: str, session_id: str = "default") -> dict[str, Any]:
        """One entity with its timeline of states and values (when each changed, by which memory)."""

        def run() -> dict[str, Any]:
            ent = app.get_entity(session_id, entity_type, entity_id)
            if ent is None:
                raise NotFoundError(f"no {entity_type} {entity_id} in session {session_id}")
            return {
                **ent.model_dump(mode="json"),
                "history": json.loads(json.dumps(app.entity_history(session_id, entity_type, entity_id), default=str)),
            }

        return _guard(run)

    @server.tool()
    def edit_memory(memory_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Correct a stored memory (e.g. {"attributes": {"city": "Paris"}} or {"state": "shipped"});
        the result must fit the schema. Corrected records teach later extractions."""
        rec = _guard(lambda: app.edit_record(memory_id, changes))
        return {"summary": rec.summary(), **rec.model_dump(mode="json", exclude={"raw_output", "spans"})}

    @server.tool()
    def delete_memory(memory_id: str) -> dict[str, Any]:
        """Delete one memory by id (when the user asks to forget something specific)."""

        def run() -> dict[str, Any]:
            if not app.delete_record(memory_id):
                raise NotFoundError(f"no memory {memory_id}")
            return {"deleted": memory_id}

        return _guard(run)

    @server.tool()
    def forget(session_id: str, apply: bool = False) -> list[dict[str, Any]]:
        """Which of a session's memories the schema's retention policies would delete; nothing is
        deleted unless `apply` is true."""
        return _guard(lambda: [d.__dict__ for d in app.forget(dry_run=not apply, session_id=session_id)])

    @server.resource("appliance://schemas", mime_type="application/json")
    def schemas() -> str:
        """The loaded memory schemas: entity types, attributes, states, event types."""
        return json.dumps({d: s.to_json_dict() for d, s in app.schemas.items()}, ensure_ascii=False)

    @server.resource("appliance://sessions/{session_id}/entities", mime_type="application/json")
    def session_entities(session_id: str) -> str:
        """A session's entities (type, id, state, attributes)."""
        rows = _guard(lambda: app.list_entities(session=session_id, limit=500))
        return json.dumps([e.model_dump(mode="json") for e in rows], ensure_ascii=False)

    return server


def serve_mcp_stdio(app: Appliance) -> None:
    """Serve MCP over stdin/stdout until the client closes it; then close the database."""
    try:
        app.warm_up()
        build_mcp(app).run("stdio")
    finally:
        app.close()


def serve_mcp_http(app: Appliance, host: str = "127.0.0.1", port: int = 8766) -> None:
    """Serve MCP over streamable HTTP at /mcp until SIGTERM/SIGINT (then finish, checkpoint,
    close), behind the Host guard and the body limit; keys as the HTTP API (admin keys only)."""
    from .http import guarded
    from .serving import require_key_beyond_loopback, serve_asgi

    policy = AccessPolicy.from_settings(app.settings)
    require_key_beyond_loopback(host, not policy.open, "set APPLIANCE_TOKEN or bind 127.0.0.1")
    app.warm_up()
    server = build_mcp(app)
    serve_asgi(guarded(mcp_http_asgi(server, policy, host), app, host), app, host, port, "mcp")


def mcp_http_asgi(server: Any, policy: AccessPolicy, host: str) -> Any:
    """MCP over streamable HTTP at ``/mcp`` with the key check; its session manager runs in the
    lifespan of the Starlette app returned (``server.session_manager.run()`` when mounted)."""
    # replies as JSON in the POST's own response, not over an SSE stream: a stop (SIGTERM) waits
    # for in-flight requests, and a reply streamed from the session's task was cut off with it
    return _KeyCheck(server.streamable_http_app(host=host, json_response=True), policy)


class _KeyCheck:
    """Bearer key on every MCP HTTP request (when keys are configured): admin keys only."""

    def __init__(self, inner: Any, policy: AccessPolicy) -> None:
        self.inner = inner
        self.policy = policy

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self.policy.open:
            auth = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"authorization"), None)
            try:
                grant = self.policy.grant_for(auth)
                if not grant.admin:
                    raise AccessDenied("MCP over HTTP needs an admin key", hint="use the HTTP API for session keys")
            except ApplianceError as exc:
                from .http.contract import status_of
                from .http.guard import error_body

                body = error_body(exc.message, exc.hint)
                await send(
                    {
                        "type": "http.response.start",
                        "status": status_of(exc),
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.inner(scope, receive, send)
