"""Who says a turn of a transcript: the speaker label that opens it ("Nora: …", "李雷：…").

A conversation between people is often kept as labelled turns; a label is one to three words,
each capitalised (Latin) or CJK, then a colon (ASCII or full-width). A message without one has
no known speaker — one user's own messages, say.
"""

from __future__ import annotations

import re

__all__ = ["speaker", "opening"]

_WORD = r"(?:[A-Z\u00C0-\u00DE][\w'’.\-]*|[\u3400-\u9fff]{1,6})"
_LABEL = re.compile(rf"^\s*({_WORD}(?: {_WORD}){{0,2}})\s*[:：]\s*\S")


def speaker(text: str) -> str | None:
    """The speaker label opening ``text``, or None."""
    m = _LABEL.match(text)
    return m.group(1) if m else None


def opening(text: str) -> int:
    """Where the words of ``text`` begin: after its speaker label ("Ben: Amazing!" → 5, where a
    sentence starts), 0 without one."""
    m = _LABEL.match(text)
    return m.end() - 1 if m else 0
