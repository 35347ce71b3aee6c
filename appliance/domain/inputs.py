"""Checks on what callers send: message text, session ids. Pure; every edge calls them."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from ..errors import InputError

__all__ = ["clean_text", "clean_session", "clean_memory_id", "parse_moment", "MAX_TEXT_CHARS", "MAX_SESSION_CHARS"]

MAX_TEXT_CHARS = 20_000
MAX_SESSION_CHARS = 128


def clean_text(text: Any, what: str = "text") -> str:
    """Refuse what cannot be a message: non-strings, empty, binary, oversize."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"the {what} is binary data, not UTF-8 text") from None
    if not isinstance(text, str):
        raise InputError(f"the {what} must be a string, not {type(text).__name__}")
    if "\x00" in text:
        # stripping it would silently change what was said ("order 12\0 3456" → id 123456)
        raise InputError(f"the {what} contains a NUL character", hint="send plain text without control characters")
    _refuse_surrogates(text, what)
    text = text.strip()
    if not text:
        raise InputError(f"the {what} is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise InputError(
            f"the {what} has {len(text)} characters, at most {MAX_TEXT_CHARS}", hint="split it into several messages"
        )
    control = sum(1 for ch in text if ord(ch) < 32 and ch not in "\n\r\t")
    if control > max(3, len(text) // 10):
        raise InputError(f"the {what} looks like binary data ({control} control characters)")
    return text


def clean_session(session_id: Any, what: str = "session_id") -> str:
    """A session id: printable text, at most MAX_SESSION_CHARS; never silently altered."""
    if not isinstance(session_id, str) or not session_id.strip() or len(session_id) > MAX_SESSION_CHARS:
        raise InputError(f"{what} must be a non-empty string of at most {MAX_SESSION_CHARS} characters")
    if any(not ch.isprintable() for ch in session_id):
        raise InputError(f"{what} contains control characters", hint="use printable text, e.g. alice or user-42")
    _refuse_surrogates(session_id, what)
    return session_id.strip()


_MEMORY_ID = re.compile(r"[0-9a-f]{32}")


def is_memory_id(text: str) -> bool:
    """Whether ``text`` is exactly a memory id as the appliance makes them (32 lower-case hex digits)."""
    return bool(_MEMORY_ID.fullmatch(text))


def clean_memory_id(memory_id: Any) -> str:
    """A memory id as the appliance makes them (32 hex digits); anything else is refused
    before it reaches the store ("../../etc/passwd", SQL, control characters)."""
    if not isinstance(memory_id, str) or not is_memory_id(memory_id.strip().lower()):
        raise InputError(
            f"{str(memory_id)[:40]!r} is not a memory id", hint="memory ids are 32 hexadecimal digits, as returned"
        )
    return memory_id.strip().lower()


def _refuse_surrogates(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"the {what} is not valid Unicode (a lone surrogate)", hint="send UTF-8 text") from None


def parse_moment(value: Any, what: str = "at") -> datetime | None:
    """When a message was said: an ISO 8601 date or date-time ("2023-05-08", "2023-05-08T13:56",
    "2023-05-08 13:56+08:00"). Without an offset it is UTC. ``None``/"" mean now."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InputError(
                f"{what} {value[:40]!r} is not an ISO 8601 date or date-time",
                hint="e.g. 2023-05-08 or 2023-05-08T13:56:00+02:00",
            ) from None
    else:
        raise InputError(f"{what} must be an ISO 8601 string, not {type(value).__name__}")
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
