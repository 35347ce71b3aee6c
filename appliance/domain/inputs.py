"""Checks on what callers send: message text, session ids. Pure; every edge calls them."""

from __future__ import annotations

from typing import Any

from ..errors import InputError

__all__ = ["clean_text", "clean_session", "MAX_TEXT_CHARS", "MAX_SESSION_CHARS"]

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
    text = text.replace("\x00", "").strip()
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


def clean_session(session_id: Any) -> str:
    if not isinstance(session_id, str) or not session_id.strip() or len(session_id) > MAX_SESSION_CHARS:
        raise InputError(f"session_id must be a non-empty string of at most {MAX_SESSION_CHARS} characters")
    return session_id.strip()
