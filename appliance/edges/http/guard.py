"""The first thing every HTTP request meets (API and panel alike), as plain ASGI so that it runs
before any framework parses a byte:

* **Host allowlist** — a page on another site that rebinds its DNS name to 127.0.0.1 sends
  ``Host: attacker.example``; only localhost names and the bound address pass (DNS rebinding).
  WebSocket upgrades are checked too (Gradio streams over them).
* **Body limit** — a declared ``Content-Length`` over the limit is refused before reading; a
  chunked body is counted while it is read and refused the moment it passes the limit, so one
  large request cannot take the server's memory (whatever the method: a GET may carry a body).
* **Nesting** — JSON nested deeper than the parser can recurse is refused with 400 before any
  route, authentication included, tries to parse it.
* **Valid text** — a JSON body must be UTF-8 and hold no lone surrogate (``"\\ud800"``): such
  text cannot be stored or echoed faithfully, so it is refused with 400 instead of failing later.

Refusals use the API's error contract ``{"error", "hint"}`` and never echo the input."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

__all__ = ["RequestGuard", "allowed_hosts_for", "error_body"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")


def allowed_hosts_for(bound: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """Localhost names, the bound address (unless it is a wildcard) and configured names."""
    names = {*LOCAL_NAMES, *(h.strip().lower() for h in extra if h.strip())}
    if bound not in ("0.0.0.0", "::", ""):
        names.add(bound.lower())
    return frozenset(names)


def error_body(error: str, hint: str = "") -> bytes:
    return json.dumps({"error": error, "hint": hint}).encode()


def _host_name(raw: str) -> str:
    """``Host`` without its port; IPv6 literals keep their address without brackets."""
    raw = raw.strip().lower()
    if raw.startswith("["):
        return raw[1 : raw.find("]")] if "]" in raw else raw
    return raw.rsplit(":", 1)[0] if raw.count(":") == 1 else raw


class _TooLarge(Exception):
    pass


class RequestGuard:
    def __init__(self, app: ASGIApp, allowed_hosts: frozenset[str], max_body_bytes: int) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if _host_name(headers.get("host", "")) not in self.allowed_hosts:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await _reply(send, 421, "host not allowed", "use http://127.0.0.1 or set APPLIANCE_ALLOWED_HOSTS")
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            await _reply(send, 413, f"request body over {self.max_body_bytes} bytes", _LIMIT_HINT)
            return
        try:
            body, final = await self._read(receive)
        except _TooLarge:
            await _reply(send, 413, f"request body over {self.max_body_bytes} bytes", _LIMIT_HINT)
            return
        if "json" in headers.get("content-type", "") and body:
            problem = _json_problem(body)
            if problem:
                await _reply(send, 400, problem, "send plain UTF-8 JSON of the documented shape")
                return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return final if final is not None else await receive()

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> tuple[bytes, Message | None]:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks), message  # the client left; pass that on
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), None


_LIMIT_HINT = "send less text per request, or raise APPLIANCE_MAX_BODY_BYTES"


def _json_problem(body: bytes) -> str:
    """What makes the body unusable JSON text ("" when nothing): not UTF-8, a lone surrogate, or
    nesting too deep to parse (``[[[…]]]`` 5,000 deep exhausts the parser's recursion).
    Otherwise unparseable JSON is left to the framework, which names the problem."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "the body is not valid UTF-8 JSON text"
    try:
        value = json.loads(text)
    except ValueError:
        return ""
    except RecursionError:
        return "the JSON body is nested too deeply"
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "the body is not valid UTF-8 JSON text"
    except RecursionError:
        return "the JSON body is nested too deeply"
    return ""


async def _reply(send: Send, status: int, error: str, hint: str) -> None:
    body = error_body(error, hint)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
