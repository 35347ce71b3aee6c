"""``appliance mcp`` (stdio) while a server holds the memory: the desktop agent still starts
``appliance mcp``, and this relays every MCP request to the running server's ``/mcp`` (the
``mcp`` package's own client and server), so the agent, the panel and scripts share one memory,
one warm model and one writer instead of the second process failing on the database lock.

Tools, resources and their errors are the server's own, passed through unchanged; the key the
CLI has (``APPLIANCE_TOKEN``) goes with every request."""

from __future__ import annotations

from typing import Any

__all__ = ["relay_stdio"]


def relay_stdio(url: str, token: str = "") -> None:
    """Serve MCP over stdin/stdout, answering every request from the MCP server at ``url``."""
    import anyio

    anyio.run(_relay, url, token)


async def _relay(url: str, token: str) -> None:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(600.0, connect=10.0)) as http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as remote,
    ):
        hello = await remote.initialize()

        async def list_tools(_: Any, params: Any) -> Any:
            return await remote.list_tools(params=params)

        async def call_tool(_: Any, params: Any) -> Any:
            return await remote.call_tool(params.name, params.arguments)

        async def list_resources(_: Any, params: Any) -> Any:
            return await remote.list_resources(params=params)

        async def list_resource_templates(_: Any, params: Any) -> Any:
            return await remote.list_resource_templates(params=params)

        async def read_resource(_: Any, params: Any) -> Any:
            return await remote.read_resource(str(params.uri))

        server: Any = Server(
            hello.server_info.name,
            version=hello.server_info.version,
            instructions=hello.instructions,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
        )
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
