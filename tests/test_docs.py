"""The schema examples in docs/schema.md are schemas the loader accepts (the docs cannot drift)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from appliance.domain.loading import parse_schema

DOC = Path(__file__).resolve().parents[1] / "docs" / "schema.md"


def test_every_schema_example_in_the_docs_loads() -> None:
    blocks = re.findall(r"```json\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2
    domains = [parse_schema(json.loads(b)).domain for b in blocks]
    assert domains == ["houseplants", "家电"]


def test_the_generated_reference_pages_match_the_code() -> None:
    """docs/cli.md and the operations of docs/http.md are what scripts/gen-docs writes now:
    a command, option or route changed without regenerating them fails here."""
    from appliance.edges.reference import pages

    for path, text in pages().items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is out of date: run scripts/gen-docs"
