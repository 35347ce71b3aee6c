"""Running a long-lived edge (HTTP API, panel, MCP over HTTP) with uvicorn, so that stopping it
never loses a memory: SIGTERM (systemd, docker, ``kill``) and SIGINT both stop accepting, let the
requests in flight finish, then checkpoint and close the database *before* uvicorn re-raises the
signal and the process exits — the ``.duckdb`` file alone then holds every acknowledged record.

While serving, ``<db>.server.json`` says where (URL and pid), so the CLI can talk to the warm
server instead of loading the model or failing on the database lock (``edges/client.py``)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..api import Appliance
from ..errors import UserError
from .http.guard import LOCAL_NAMES

__all__ = ["serve_asgi", "server_file", "require_key_beyond_loopback"]


def server_file(db_path: str | Path) -> Path:
    p = Path(db_path)
    return p.with_name(p.name + ".server.json")


def require_key_beyond_loopback(host: str, has_key: bool, hint: str) -> None:
    if host not in LOCAL_NAMES and not has_key:
        raise UserError(f"refusing to bind {host} without a key", hint=hint)


def serve_asgi(
    asgi: Any,
    app: Appliance,
    host: str,
    port: int,
    kind: str,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve ``asgi`` until SIGTERM/SIGINT; close ``app`` cleanly on the way out."""
    import uvicorn

    say = announce or (lambda line: print(line, file=sys.stderr, flush=True))
    # the marker beside a file tells the CLI which server holds it; a server database is shared
    marker = server_file(app.store.path) if app.store.backend == "duckdb" and app.store.path != ":memory:" else None

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if not self.started:
                return
            bound = self.servers[0].sockets[0].getsockname() if self.servers else (host, port)
            url = f"http://{_url_host(host)}:{bound[1]}"
            if marker is not None:
                _announce(marker, {"url": url, "pid": os.getpid(), "kind": kind})
            say(f"appliance {kind} ready on {url}")

        async def shutdown(self, sockets: Any = None) -> None:
            await super().shutdown(sockets)  # in-flight requests finish first
            if marker is not None:
                marker.unlink(missing_ok=True)
            app.close()  # checkpoint: the file alone holds everything acknowledged
            failed = app.store.checkpoint_failed
            if failed:  # e.g. a full disk: nothing is lost, but the file alone is not the whole
                say(
                    f"appliance {kind} stopped; the final checkpoint failed ({failed}): the memories it "
                    f"could not fold are in {app.store.path}.wal — keep that file beside the database"
                )
            else:
                say(f"appliance {kind} stopped; database closed")

    config = uvicorn.Config(
        asgi, host=host, port=port, log_level="warning", lifespan="auto", timeout_graceful_shutdown=60
    )
    Server(config).run()


def _announce(marker: Path, info: dict[str, Any]) -> None:
    """Write the marker readable and writable by the user alone (the warm CLI trusts no other),
    under a temporary name first so that a reader never sees half of it."""
    tmp = marker.with_name(f".{marker.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(info))
    tmp.replace(marker)


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
