"""Who may do what through the network edges (HTTP, MCP over HTTP): API keys scoped to sessions.

* No key configured: the edge binds loopback only and the caller is the machine's user — one
  person, every session (``Grant.owner``).
* ``APPLIANCE_TOKEN`` / ``APPLIANCE_TOKEN_FILE``: one admin key.
* ``APPLIANCE_KEYS_FILE``: a JSON file of keys, each with the sessions it may use — exact ids or
  prefixes ending in ``*`` — and whether it is an admin::

      {"keys": [{"name": "alice-agent", "token": "…", "sessions": ["alice", "alice-*"]},
                {"name": "ops", "token": "…", "admin": true}]}

A key that is not admin works inside its sessions only: it cannot ask across sessions, list
rows of other sessions, or forget/compact/end sessions it does not hold. Tokens are compared in
constant time; they come from the environment or files, never from a command line (``ps``).
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Settings
from ..errors import AccessDenied, InputError, Unauthenticated

__all__ = ["Grant", "AccessPolicy", "AccessDenied", "Unauthenticated"]


@dataclass(frozen=True)
class Grant:
    name: str
    sessions: tuple[str, ...] = ()
    admin: bool = False

    @classmethod
    def owner(cls) -> Grant:
        return cls("local user", admin=True)

    def may_use(self, session: str) -> bool:
        if self.admin:
            return True
        return any(session == p or (p.endswith("*") and session.startswith(p[:-1])) for p in self.sessions)

    def check_session(self, session: str) -> str:
        if not self.may_use(session):
            raise AccessDenied(
                f"key {self.name!r} may not use session {session[:60]!r}",
                hint=f"its sessions: {', '.join(self.sessions) or 'none'}",
            )
        return session

    def check_admin(self, what: str) -> None:
        if not self.admin:
            raise AccessDenied(f"{what} needs an admin key", hint="name one of your sessions instead")

    def scope(self, session: str | None, what: str) -> str | None:
        """The session a listing/maintenance call acts on: the named one (if this key may use it)
        or, with no session named, all of them — for an admin only."""
        if session is None or session == "":
            self.check_admin(f"{what} across all sessions")
            return None
        return self.check_session(session)


@dataclass
class AccessPolicy:
    keys: dict[str, Grant] = field(default_factory=dict)  # token → grant

    @property
    def open(self) -> bool:
        """No key configured: loopback-only single-user use."""
        return not self.keys

    @classmethod
    def from_settings(cls, settings: Settings) -> AccessPolicy:
        keys: dict[str, Grant] = {}
        if settings.token:
            keys[settings.token] = Grant("admin", admin=True)
        if settings.keys_file is not None:
            keys.update(load_keys(settings.keys_file))
        return cls(keys)

    def grant_for(self, authorization: str | None) -> Grant:
        """The grant of an ``Authorization: Bearer <token>`` header."""
        if self.open:
            return Grant.owner()
        scheme, _, credentials = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer":  # the scheme is case-insensitive (RFC 9110)
            raise Unauthenticated("missing bearer token", hint="send the header Authorization: Bearer <token>")
        found = self._grant_of(credentials.strip())
        if found is None:
            raise Unauthenticated("wrong bearer token", hint="check APPLIANCE_TOKEN or your key")
        return found

    def admin_login(self, username: str, password: str) -> bool:
        """A login form's check (the panel's, which shows every session): the password is an
        admin key's token, compared in constant time; the user name is not checked."""
        found = self._grant_of(password)
        return found is not None and found.admin

    def _grant_of(self, token: str) -> Grant | None:
        """The grant whose token is ``token``; every key compared in constant time, so the
        time taken hints at no key."""
        given = token.encode()
        found = None
        for key, grant in self.keys.items():
            if hmac.compare_digest(given, key.encode()):
                found = grant
        return found


def load_keys(path: Path) -> dict[str, Grant]:
    """Keys from a keys file; every problem is named with its entry."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read keys file {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"keys file {path} is not valid JSON: {exc}") from None
    entries = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError(f'keys file {path} needs a list under "keys"')
    out: dict[str, Grant] = {}
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("token"), str) or len(e["token"]) < 16:
            raise InputError(f"keys file {path}: entry {i} needs a token of at least 16 characters")
        sessions = e.get("sessions", [])
        if not isinstance(sessions, list) or not all(isinstance(x, str) and x for x in sessions):
            raise InputError(f"keys file {path}: entry {i} sessions must be a list of session ids or prefixes*")
        if e["token"] in out:
            raise InputError(f"keys file {path}: entry {i} repeats a token")
        out[e["token"]] = Grant(str(e.get("name", f"key {i}")), tuple(sessions), bool(e.get("admin", False)))
    return out
