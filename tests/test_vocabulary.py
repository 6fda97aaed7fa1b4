"""One definition per vocabulary: the idle-cause kinds live in `vocabulary/cause_kinds.py`; the places that
cannot import it (the JSON schema, the docs) must say the same, and every kind has the words its finding needs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from nsys_llm_explainer.findings.advice import ADVICE
from nsys_llm_explainer.findings.base import CATEGORIES
from nsys_llm_explainer.findings.text import CAUSE_TEXT
from nsys_llm_explainer.vocabulary.cause_kinds import CAUSE_KINDS, HOST_PIECE_KINDS, KINDS

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "src" / "nsys_llm_explainer" / "report_schema.json").read_text(encoding="utf-8"))
COMPOSITES = ("host_overhead", "step_sync", "copy_path")   # finding causes that span several kinds


def _enums(node, path=""):
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list) and "host_cpu" in node["enum"]:
            yield path, node["enum"]
        for k, v in node.items():
            yield from _enums(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _enums(v, f"{path}[{i}]")


def test_vocabularies_import_nothing_from_the_package():
    """Pure data every layer may read (render included): no import of the package's other modules."""
    for p in (ROOT / "src" / "nsys_llm_explainer" / "vocabulary").glob("*.py"):
        text = p.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from|import)\s+(\.|nsys_llm_explainer)", text, re.M), p


def test_schema_kind_enums_follow_the_table():
    seen = dict(_enums(SCHEMA))
    assert seen, "no kind enum in report_schema.json"
    for path, enum in seen.items():
        if "/host_samples/" in path:
            assert enum == list(HOST_PIECE_KINDS), path
        elif "/findings/" in path:
            assert enum == list(KINDS) + list(COMPOSITES), path
        else:
            assert enum == list(KINDS), path


def test_docs_precedence_follows_the_table():
    model = (ROOT / "docs" / "MODEL.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", model, re.M)
    assert [k for _, k in rows] == list(KINDS) and [int(i) for i, _ in rows] == list(range(1, len(KINDS) + 1))
    findings = " ".join((ROOT / "docs" / "FINDINGS.md").read_text(encoding="utf-8").split())
    assert "precedence " + " → ".join(KINDS) in findings


def test_every_kind_has_its_finding_words():
    for k in CAUSE_KINDS:
        assert k.category in CATEGORIES, k.name
        assert "{share" in CAUSE_TEXT[k.name]["title"], k.name
        assert k.advice and all(a in ADVICE for a in k.advice), k.name
        assert re.fullmatch(r"#[0-9a-f]{6}", k.color), k.name
    assert len({k.color for k in CAUSE_KINDS}) == len(CAUSE_KINDS)
