"""Core modules stay free of I/O-heavy or UI libraries; the public API is pinned."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import appliance

PKG = Path(appliance.__file__).parent
FORBIDDEN = {"duckdb", "llama_cpp", "gradio", "click"}


CORE = ["memory", "schema", "extract", "recall", "question", "spans", "prompt", "decode"]
CORE += ["hops", "resolve", "compact", "forgetting", "migrate", "route"]


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports(module: str) -> None:
    tree = ast.parse((PKG / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    assert not names & FORBIDDEN


def test_domain_logic_does_not_import_the_ui() -> None:
    for f in PKG.glob("*.py"):
        if f.stem in ("ui", "ui_lifecycle", "cli", "cli_lifecycle", "__main__"):
            continue
        assert "from .ui" not in f.read_text() and "import gradio" not in f.read_text(), f.name


def test_public_api() -> None:
    assert set(appliance.__all__) == {
        "Appliance",
        "ApplianceError",
        "MemoryRecord",
        "MemorySchema",
        "RecallQuery",
        "RecallResult",
        "load_schema",
        "parse_schema",
    }
