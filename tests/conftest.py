from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import PROJECT_ROOT, Settings

SCHEMAS = PROJECT_ROOT / "schemas"


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
