"""Settings: the only place that reads ``os.environ``."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

__all__ = ["Settings", "PROJECT_ROOT"]

# The checkout (or install) root: shipped schemas/ and the models/ drop folder live here.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseModel):
    """Where things live and which model runs; frozen so it can be shared safely."""

    model_config = ConfigDict(frozen=True)

    home: Path
    db_path: Path
    grammar_dir: Path
    schema_dir: Path
    models_dir: Path
    model: str
    n_threads: int
    n_ctx: int
    review_threshold: float
    grammar_backend: str  # outlines_core | llguidance (whole-record grammar decoding)
    semantic: bool  # embed records and complement structured recall with vector search
    encoder: str  # sentence encoder: use3 (multilingual, numpy) | minilm (English, torch)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        """Build settings from APPLIANCE_* environment variables with sane defaults."""
        e = os.environ if env is None else env
        home = Path(e.get("APPLIANCE_HOME", str(Path.home() / ".appliance")))
        return cls(
            home=home,
            db_path=Path(e.get("APPLIANCE_DB", str(home / "memory.duckdb"))),
            grammar_dir=Path(e.get("APPLIANCE_GRAMMARS", str(PROJECT_ROOT / "grammars"))),
            schema_dir=Path(e.get("APPLIANCE_SCHEMAS", str(PROJECT_ROOT / "schemas"))),
            models_dir=Path(e.get("APPLIANCE_MODELS", str(PROJECT_ROOT / "models"))),
            model=e.get("APPLIANCE_MODEL", "smollm2"),
            n_threads=int(e.get("APPLIANCE_THREADS", str(os.cpu_count() or 2))),
            n_ctx=int(e.get("APPLIANCE_N_CTX", "2048")),
            review_threshold=float(e.get("APPLIANCE_REVIEW_THRESHOLD", "0.5")),
            grammar_backend=e.get("APPLIANCE_GRAMMAR_BACKEND", "llguidance"),
            semantic=e.get("APPLIANCE_SEMANTIC", "on").lower() not in ("0", "off", "false", "no"),
            encoder=e.get("APPLIANCE_ENCODER", "use3"),
        )
