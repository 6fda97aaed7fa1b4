"""The design rules the code must keep: data flows read → model → analyses → findings → report → render, every
package and top-level module has its declared place (:data:`ALLOWED`), no import cycles; modules over ~400
lines are reported as a warning (a hint to look for a split by meaning, not a rule) (docs/DESIGN.md)."""

from __future__ import annotations

import ast
import functools
import warnings
from pathlib import Path
from typing import Dict, FrozenSet, Set

PKG = Path(__file__).resolve().parents[2] / "src" / "nsys_llm_explainer"
F = frozenset
BASE: FrozenSet[str] = F({"errors", "jsonable", "vocabulary"})
#: every package / top-level module of nsys_llm_explainer → the ones it may import (``<pkg>``: the package's
#: ``__init__``, the public API). The flow: read → model → analyses → findings → report/serialize → render;
#: the front ends (cli, comparison, cluster, output, terminal) sit on top.
ALLOWED: Dict[str, FrozenSet[str]] = {
    "vocabulary": F(), "errors": F(), "jsonable": F({"errors"}), "interrupts": F({"errors"}),
    "read": F({"errors"}), "config": F({"errors", "interrupts"}), "model": BASE | {"read"},
    "options": BASE | {"config", "read"},
    "analyses": BASE | {"model", "config"},
    "findings": BASE | {"analyses", "model", "options"},
    "runner": F(), "graph": BASE | {"analyses", "config", "findings", "model", "options", "runner"},
    "serialize": BASE | {"config", "options"},
    "report": BASE | {"analyses", "findings", "model", "options", "serialize",
                      "render"},   # only Report.to_frame, at call time: the CSV table specs (an output format)
    "pipeline": BASE | {"<pkg>", "read", "model", "analyses", "graph", "options", "report", "runner", "serialize"},
    "render": F({"vocabulary", "serialize", "jsonable"}),   # typed results: annotations only (TYPE_CHECKING)
    "comparison": BASE | {"<pkg>", "analyses", "findings", "output", "paths", "pipeline", "render", "report"},
    "cluster": BASE | {"<pkg>", "analyses", "findings", "options", "output", "paths", "pipeline", "read", "render",
                       "report", "terminal"},
    "output": BASE | {"<pkg>", "interrupts"}, "terminal": F({"render"}),
    "demo_traces": F({"errors"}), "presets": F(), "paths": F({"errors"}),
    "cli": BASE | {"<pkg>", "cluster", "comparison", "interrupts", "options", "output", "paths", "pipeline", "read",
                   "render", "demo_traces", "terminal"},
    "__main__": F({"cli", "errors", "interrupts"}),
    "<pkg>": BASE | {"cluster", "comparison", "options", "paths", "pipeline", "render", "report"},
}


def _module(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@functools.lru_cache(maxsize=1)
def _imports() -> Dict[str, Set[str]]:
    """Module → package modules it imports (relative imports resolved; function-level imports included); built
    once per session (every test here reads the same graph and none changes it)."""
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


def _unit(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "<pkg>"


def test_every_unit_has_a_place():
    units = {_unit(m) for m in _imports()}
    assert units == set(ALLOWED), (sorted(units - set(ALLOWED)), sorted(set(ALLOWED) - units))


def test_no_import_runs_backwards():
    bad = []
    for mod, deps in _imports().items():
        me = _unit(mod)
        for d in deps:
            if _unit(d) != me and _unit(d) not in ALLOWED[me]:
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


def test_large_modules_are_reported():
    """A module over 420 lines is a hint (a warning in the test report), not a failure: split by meaning."""
    big = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 420}
    if big:
        warnings.warn(f"modules over 420 lines (split them by meaning if one holds two ideas): {big}", stacklevel=1)
    assert all(n < 2000 for n in big.values()), big   # HTA's 2,000-line files: never
