"""One server process for every edge: the panel at ``/``, the HTTP API at its own routes
(``/record``, ``/recall``, … — the ones the warm CLI calls) and MCP over streamable HTTP at
``/mcp``, on one port, over one ``Appliance``: one warm model, one writer, one database lock.

A person chatting in the panel and their agent (MCP) or scripts (HTTP, CLI) then share the
same memory at the same time; DuckDB lets only one process open the file for writing, so a
second server on the same memory is refused with the holder named (``edges/serving.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..api import Appliance
from .access import AccessPolicy

__all__ = ["build_hub", "MCP_PATH"]

MCP_PATH = "/mcp"


def build_hub(app: Appliance, policy: AccessPolicy, host: str, auth: tuple[str, str] | None = None) -> Any:
    """The panel, the HTTP API and MCP as one ASGI application (without the guard)."""
    from .http import build_http
    from .mcp_server import build_mcp, mcp_http_asgi
    from .ui.panel import panel_asgi

    mcp = build_mcp(app)
    mcp_asgi = mcp_http_asgi(mcp, policy, host)  # creates the session manager run below

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            yield

    rest = panel_asgi(app, auth, root=build_http(app, policy, lifespan=lifespan))
    return _ByPath(mcp_asgi, rest)


class _ByPath:
    """``/mcp`` to MCP, everything else to the API routes first, then the panel."""

    def __init__(self, mcp: Any, rest: Any) -> None:
        self.mcp, self.rest = mcp, rest

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == MCP_PATH or path.startswith(MCP_PATH + "/"):
            await self.mcp(scope, receive, send)
        else:
            await self.rest(scope, receive, send)
