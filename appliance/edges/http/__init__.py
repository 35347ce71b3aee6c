"""Local HTTP API (FastAPI) so any agent framework can use the appliance: record, recall, query,
memories (get/edit/delete), entities, merges, lifecycle, schema, backup, export.

* Loopback with no key configured: one local user, every session (no token needed).
* Keys (``APPLIANCE_TOKEN``, ``APPLIANCE_TOKEN_FILE``, ``APPLIANCE_KEYS_FILE``; never on the
  command line) make sessions an access boundary (``edges/access.py``); binding beyond loopback
  requires one. ``/openapi.json`` is behind the same key.
* Every request passes the guard first (``guard.py``: Host allowlist, body limit, valid text);
  every error is ``{"error", "hint"}`` (``contract.py``)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from ...api import Appliance
from ..access import AccessPolicy
from .contract import install_error_contract
from .guard import LOCAL_NAMES, RequestGuard, allowed_hosts_for
from .routes import add_routes

__all__ = ["build_http", "serve_http", "guarded", "LOOPBACK"]

LOOPBACK = LOCAL_NAMES


def build_http(app: Appliance, policy: AccessPolicy | None = None, lifespan: Any = None) -> FastAPI:
    """The FastAPI application over ``app`` (without the guard; ``guarded`` adds it).
    ``lifespan``: what runs while it serves (the MCP session manager when one server hosts both)."""
    api = FastAPI(
        title="Memory appliance", version="0.2.0", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    install_error_contract(api)
    add_routes(api, app, policy if policy is not None else AccessPolicy.from_settings(app.settings))
    return api


def guarded(asgi: Any, app: Appliance, host: str = "127.0.0.1") -> RequestGuard:
    settings = app.settings
    return RequestGuard(asgi, allowed_hosts_for(host, settings.allowed_hosts), settings.max_body_bytes)


def serve_http(app: Appliance, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve the API until SIGTERM/SIGINT (then finish, checkpoint, close)."""
    from ..serving import require_key_beyond_loopback, serve_asgi

    policy = AccessPolicy.from_settings(app.settings)
    require_key_beyond_loopback(host, not policy.open, "set APPLIANCE_TOKEN (or a keys file) or bind 127.0.0.1")
    app.warm_up()
    serve_asgi(guarded(build_http(app, policy), app, host), app, host, port, "http")
