"""The warm CLI's other half: when an appliance server (``appliance http``) serves a database, the
CLI talks to it over loopback HTTP instead of loading the model again (tens of seconds) or
failing on the database lock — like a client/daemon pair. The server announces itself in
``<db>.server.json`` (``edges/serving.py``); a stale file (dead pid, no answer) is ignored.

The marker is believed only when nothing but the user or the server could have written it, since
the CLI sends it the user's text and bearer token and writes its answers into the user's files:
the file is the user's and writable by no one else, the URL is loopback, and (where ``/proc``
tells) its process is the user's and holds the database open. Anything else is ignored.

Standard library only (urllib): the client starts in milliseconds."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from ..errors import ApplianceError, InputError, UserError

__all__ = ["WarmClient", "find_server"]

LOOPBACK = ("127.0.0.1", "::1", "localhost")


SERVING_API = ("http", "serve")  # the server kinds that answer the HTTP API's routes


class ServerError(ApplianceError):
    """The warm server answered with an error (its message and hint are passed on)."""


def server_of(db_path: Path) -> dict[str, Any] | None:
    """``{"url", "pid", "kind"}`` of the running server that holds ``db_path``, when its marker
    can only have come from the user's own server (see the module note)."""
    marker = db_path.with_name(db_path.name + ".server.json")
    try:
        info = json.loads(marker.read_text())
        pid, url = int(info["pid"]), str(info["url"])
        if not _alive(pid) or not _trusted(marker, pid, url, db_path):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return {"url": url, "pid": pid, "kind": str(info.get("kind", ""))}


def find_server(db_path: Path, token: str = "") -> WarmClient | None:
    """The server that holds ``db_path``, if one is running, serves the API and answers."""
    info = server_of(db_path)
    if info is None or info["kind"] not in SERVING_API:
        return None
    client = WarmClient(info["url"], token)
    try:
        client.call("GET", "/health", timeout=2.0)
    except (ServerError, OSError):
        return None
    return client


def _trusted(marker: Path, pid: int, url: str, db_path: Path) -> bool:
    """Whether the marker can only have come from the user's own server (see the module note)."""
    st = marker.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        return False
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or (parts.hostname or "") not in LOOPBACK:
        return False
    proc = Path(f"/proc/{pid}")
    if not proc.is_dir():  # no /proc (macOS): the file's owner and mode are the check
        return True
    try:
        if proc.stat().st_uid != os.getuid():
            return False
        target = db_path.resolve()
        return any(_points_to(fd, target) for fd in (proc / "fd").iterdir())
    except OSError:  # another user's process, or it ended meanwhile
        return False


def _points_to(fd: Path, target: Path) -> bool:
    try:
        return Path(os.readlink(fd)) == target
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WarmClient:
    def __init__(self, url: str, token: str = "") -> None:
        self.url = url.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: Any = None, timeout: float = 600.0) -> Any:
        data = self._send(method, path, body, timeout)
        return json.loads(data) if data else None

    def download(self, path: str, target: Path, force: bool = False) -> int:
        """Stream a server file (backup, export) to ``target``: never overwrites without
        ``force``; a temporary name until complete."""
        if target.exists() and not force:
            raise InputError(f"{target} exists", hint="pass --force to overwrite it, or choose a new name")
        if not target.parent.is_dir():
            raise InputError(f"no directory {target.parent}", hint="create it first")
        tmp = target.with_name(f".{target.name}.part")
        size = 0
        try:
            with self._open("GET", path, None, 600.0) as resp, tmp.open("wb") as fh:
                while chunk := resp.read(1 << 20):
                    fh.write(chunk)
                    size += len(chunk)
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)  # a failed download leaves no half file
        return size

    def _send(self, method: str, path: str, body: Any, timeout: float) -> bytes:
        with self._open(method, path, body, timeout) as resp:
            return bytes(resp.read())

    def _open(self, method: str, path: str, body: Any, timeout: float) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            return urllib.request.urlopen(req, timeout=timeout)  # noqa: S310 - loopback URL we wrote
        except urllib.error.HTTPError as exc:
            try:
                err = json.loads(exc.read() or b"{}")
            except ValueError:
                err = {}
            kind = UserError if 400 <= exc.code < 500 else ServerError
            raise kind(err.get("error") or f"server answered {exc.code}", hint=err.get("hint", "")) from None
        except urllib.error.URLError as exc:
            raise ServerError(f"the appliance server at {self.url} did not answer: {exc.reason}") from None
