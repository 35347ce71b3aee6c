"""The house rules, checked on the project's own source: layers, no SQL outside the store,
no words outside the language packs, the public API pinned."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import appliance
from appliance.lang import PACKS

PKG = Path(appliance.__file__).parent
# The data path, bottom to top: a module may import its own room and the rooms below it.
RANK = {
    "errors": 0,
    "config": 0.5,  # settings may raise the package's errors
    "lang": 1,
    "domain": 2,
    "model": 3,
    "extract": 4,
    "store": 5,
    "recall": 6,
    "lifecycle": 6,
    "api": 7,
    "testing": 7,
    "edges": 8,
    "__init__": 8,
    "__main__": 9,
}
# Domain logic imports no UI, CLI, web or storage library (the model seam imports llama.cpp
# lazily inside model/; the store owns DuckDB).
FORBIDDEN = {
    "lang": {"duckdb", "llama_cpp", "gradio", "click", "fastapi", "uvicorn", "torch"},
    "domain": {"duckdb", "llama_cpp", "gradio", "click", "fastapi", "uvicorn", "torch"},
    "extract": {"duckdb", "llama_cpp", "gradio", "click", "fastapi", "uvicorn"},
    "recall": {"duckdb", "llama_cpp", "gradio", "click", "fastapi", "uvicorn"},
    "lifecycle": {"duckdb", "llama_cpp", "gradio", "click", "fastapi", "uvicorn"},
    "model": {"duckdb", "gradio", "click", "fastapi", "uvicorn"},
    "store": {"llama_cpp", "gradio", "click", "fastapi", "uvicorn", "torch"},
}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _room(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _dotted(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(["appliance", *parts])


def _imports(path: Path) -> list[tuple[str, int]]:
    """(absolute module imported, line) for every import of the project's own modules and others."""
    tree = ast.parse(path.read_text())
    here = _dotted(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
                if node.module is None:
                    out += [(f"{mod}.{a.name}", node.lineno) for a in node.names]
                    continue
            else:
                mod = node.module or ""
            out.append((mod, node.lineno))
    return out


def _target_room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "appliance":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_nothing_imports_upward(path: Path) -> None:
    room = _room(path)
    assert room in RANK, f"{path}: room {room!r} has no place on the data path (add it to RANK)"
    for module, line in _imports(path):
        target = _target_room(module)
        if target is None:
            assert module.split(".")[0] not in FORBIDDEN.get(room, set()), f"{path}:{line} imports {module}"
            continue
        if target == room:
            continue
        assert target in RANK, f"{path}:{line}: unknown room {target}"
        assert RANK[target] < RANK[room] or (RANK[target] == RANK[room] and target == room), (
            f"{path.relative_to(PKG)}:{line} ({room}, rank {RANK[room]}) imports {module} ({target}, rank {RANK[target]})"
        )


def test_no_import_circle() -> None:
    graph: dict[str, set[str]] = {}
    names = {_dotted(p): p for p in _modules()}
    for name, path in names.items():
        deps = set()
        for module, _ in _imports(path):
            while module and module not in names:
                module = module.rpartition(".")[0]
            if module and module != name:
                deps.add(module)
        graph[name] = deps
    # a package __init__ re-exporting its own modules is not a circle
    for name in graph:
        graph[name] = {d for d in graph[name] if not d.startswith(name + ".")}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in graph[node]:
            if state.get(dep) == 1:
                raise AssertionError("import circle: " + " → ".join([*trail, node, dep]))
            if dep not in state:
                visit(dep, [*trail, node])
        state[node] = 2

    for n in graph:
        if n not in state:
            visit(n, [])


_SQL = re.compile(
    r"\b(?:SELECT\s.+\sFROM|INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+TABLE)\b", re.S
)


def _constants(path: Path) -> list[tuple[str, int]]:
    """String constants that are not docstrings."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [
        (n.value, n.lineno)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def test_no_sql_outside_the_store() -> None:
    offenders = [
        f"{p.relative_to(PKG)}:{line}"
        for p in _modules()
        if _room(p) != "store"
        for text, line in _constants(p)
        if _SQL.search(text)
    ]
    assert not offenders, offenders


_CJK = re.compile(r"[\u3400-\u9fff]")
# The words that signal meaning in a message (questions, negation, comparison, numbers, dates,
# money, id suffixes, sessions, affirmation): in a regex or word list outside lang/ they are the
# smell this test exists for. (Kind words and stopwords are left out: "date", "name" and "from"
# are also the appliance's own field names.)
_SIGNAL_FIELDS = (
    "question_openers",
    "question_words",
    "lookup_openers",
    "all_sessions",
    "recent_words",
    "negations",
    "rule_out",
    "affirmations",
    "greater",
    "less",
    "number_words",
    "scale_words",
    "currency_after",
    "months",
    "weekdays",
    "relative_days",
    "day_periods",
)
_LEXICON = {
    w.lower()
    for pack in PACKS.values()
    for f in _SIGNAL_FIELDS
    for w in getattr(pack, f)
    if len(w) >= 3 and w.isascii() and w.replace(" ", "").replace("'", "").isalpha()
}
# Not language words however a pack may list them: JSON literals and record fields.
_NOT_WORDS = {
    "null",
    "true",
    "false",
    "json",
    "ok",
    "okay",
    "right",
    "fine",
    "great",
    "not",
    "now",
    "any",
    "all",
    "list",
}


def _word_lists_and_patterns(path: Path) -> list[tuple[str, int]]:
    """String literals used as regex patterns or as members of literal word collections."""
    tree = ast.parse(path.read_text())
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "re" and node.args:
                out += [
                    (c.value, c.lineno)
                    for c in ast.walk(node.args[0])
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                ]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and len(node.elts) >= 3:
            strs = [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(strs) == len(node.elts):
                out += [(e.value, e.lineno) for e in strs]
    return out


def test_language_words_live_only_in_language_packs() -> None:
    offenders = []
    for p in _modules():
        if _room(p) == "lang":
            continue
        for text, line in _constants(p):
            if _CJK.search(text):
                offenders.append(f"{p.relative_to(PKG)}:{line} CJK text {text[:30]!r}")
        for text, line in _word_lists_and_patterns(p):
            # language words are written in lower case (patterns use re.I); SQL keywords are not
            hits = {w for w in _LEXICON - _NOT_WORDS if re.search(rf"(?<![A-Za-z_]){re.escape(w)}(?![A-Za-z_])", text)}
            if hits:
                offenders.append(f"{p.relative_to(PKG)}:{line} {sorted(hits)} in {text[:40]!r}")
    assert not offenders, "\n".join(offenders)


def test_the_words_test_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('import re\nQ = re.compile(r"where|when|吗")\nW = ("yesterday", "today", "tomorrow")\n')
    found = _word_lists_and_patterns(bad)
    assert any({"where", "when"} & set(re.findall(r"[a-z]{3,}", t)) for t, _ in found)
    assert any(_CJK.search(t) for t, _ in _constants(bad))


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
