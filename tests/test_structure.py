"""The design rules the code must keep: data flows read → model → analyses → findings → render, no import
cycles, no module over ~400 lines (docs: README Development)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Set

PKG = Path(__file__).resolve().parents[1] / "src" / "nsys_llm_explainer"
LAYER = {"read": 0, "model": 1, "analyses": 2, "findings": 3, "render": 4}


def _module(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports() -> Dict[str, Set[str]]:
    """Module → package modules it imports (relative imports resolved; function-level imports included)."""
    out: Dict[str, Set[str]] = {}
    mods = {_module(p) for p in PKG.rglob("*.py")}
    for p in PKG.rglob("*.py"):
        me = _module(p)
        base = me.split(".") if p.name == "__init__.py" else me.split(".")[:-1]
        deps: Set[str] = set()
        tree = ast.parse(p.read_text(encoding="utf-8"))
        typing_only = {id(n) for blk in ast.walk(tree) if isinstance(blk, ast.If)
                       and getattr(blk.test, "id", getattr(blk.test, "attr", "")) == "TYPE_CHECKING"
                       for n in ast.walk(blk)}
        for node in ast.walk(tree):
            if id(node) in typing_only:      # annotations only: not a runtime import
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    root = base[: len(base) - node.level + 1]
                    target = ".".join(root + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                names = [target] + [f"{target}.{a.name}" for a in node.names]
                deps |= {n for n in names if n in mods}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in mods}
        out[me] = deps - {me}
    return out


def _layer(mod: str):
    parts = mod.split(".")
    return LAYER.get(parts[1]) if len(parts) > 1 else None


def test_no_import_runs_backwards():
    bad = []
    for mod, deps in _imports().items():
        lm = _layer(mod)
        for d in deps:
            ld = _layer(d)
            if lm is not None and ld is not None and ld > lm:
                bad.append(f"{mod} imports {d}")
    assert not bad, bad


def test_no_import_cycles_at_module_level():
    graph = _imports()
    # package __init__ re-exports are fine: only cycles between leaf modules count
    graph = {m: {d for d in ds if not (PKG.parent / (d.replace(".", "/") + "/__init__.py")).exists()}
             for m, ds in graph.items()}
    state: Dict[str, int] = {}
    cycle: list = []

    def visit(m: str, stack: list) -> bool:
        state[m] = 1
        for d in graph.get(m, ()):
            if state.get(d) == 1:
                cycle.extend(stack[stack.index(d):] + [d] if d in stack else [m, d])
                return True
            if state.get(d) is None and visit(d, stack + [d]):
                return True
        state[m] = 2
        return False

    for m in sorted(graph):
        if state.get(m) is None and visit(m, [m]):
            break
    assert not cycle, " → ".join(cycle)


def test_modules_stay_small():
    big = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 420}
    assert not big, big
