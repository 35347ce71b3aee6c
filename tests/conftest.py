from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from appliance.config import PROJECT_ROOT, Settings
from appliance.memory import MemoryRecord

SCHEMAS = PROJECT_ROOT / "schemas"


def stored_draft(rec: MemoryRecord) -> dict[str, Any]:
    """A stored record back in the shape extraction produces, to validate with draft_model."""
    return {
        "event_type": rec.event_type,
        "entity": {"type": rec.entity_type, "id": rec.entity_id, "state": rec.state, "attributes": rec.attributes},
        "relationships": [
            {
                "type": r.type,
                "from_type": r.source_type,
                "from_id": r.source_id,
                "to_type": r.target_type,
                "to_id": r.target_id,
            }
            for r in rec.relationships
        ],
    }


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings writing only under tmp_path (grammars included), shipped schemas and models."""
    return Settings.from_env(
        {
            "APPLIANCE_HOME": str(tmp_path),
            "APPLIANCE_GRAMMARS": str(tmp_path / "grammars"),
            "APPLIANCE_SCHEMAS": str(SCHEMAS),
            "APPLIANCE_SEMANTIC": "off",  # unit tests opt in with FakeEmbedder
        }
    )


@pytest.fixture(scope="session")
def real_engine():  # type: ignore[no-untyped-def]
    """The shipped SmolLM2 model, loaded once per test session."""
    from appliance.engine import LlamaCppEngine, resolve_model_path

    return LlamaCppEngine(resolve_model_path("smollm2", PROJECT_ROOT / "models"), n_ctx=2048)
