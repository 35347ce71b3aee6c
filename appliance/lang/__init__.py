"""Language packs: the only home of words (see ``lexicon.py``).

``language_for(codes)`` returns the merged, compiled ``Language`` of the named packs; a schema
names its languages (default: every shipped pack), so a user's German pack added here works for
every schema that lists "de".
"""

from __future__ import annotations

from functools import lru_cache

from . import en, zh
from .language import Language, alternation, find_word, has_cjk, is_cjk
from .lexicon import Lexicon, merge

__all__ = [
    "PACKS",
    "DEFAULT_LANGUAGES",
    "Language",
    "Lexicon",
    "language_for",
    "find_word",
    "alternation",
    "is_cjk",
    "has_cjk",
    "merge",
]

PACKS: dict[str, Lexicon] = {en.LEXICON.code: en.LEXICON, zh.LEXICON.code: zh.LEXICON}
DEFAULT_LANGUAGES: tuple[str, ...] = tuple(PACKS)


@lru_cache(maxsize=16)
def language_for(codes: tuple[str, ...] = DEFAULT_LANGUAGES) -> Language:
    """The merged ``Language`` of the packs ``codes`` (unknown codes raise KeyError)."""
    missing = [c for c in codes if c not in PACKS]
    if missing:
        raise KeyError(f"no language pack for {', '.join(missing)} (shipped: {', '.join(PACKS)})")
    return Language([PACKS[c] for c in codes or DEFAULT_LANGUAGES])
