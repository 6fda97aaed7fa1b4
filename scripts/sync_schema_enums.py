"""Write the idle-cause kind enums of ``report_schema.json`` from the kind table (``vocabulary/cause_kinds.py``), and
its device-role enum from the role table (``vocabulary/device_roles.py``): the tables are the one definition, the
schema's enums are generated from them.

    python scripts/sync_schema_enums.py          # rewrite the schema file in place
    python scripts/sync_schema_enums.py --check  # exit 1 when the file differs from what the table generates

An enum is a kind enum when it lists ``host_cpu``; which list it gets is decided by where it sits: under
``host_samples`` the host-side kinds, under ``findings`` the kinds and the composite finding causes, elsewhere
every kind. The role enum is the one that lists ``copies only`` (tests/structure/test_vocabulary.py runs
:func:`generate` and compares)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, List

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "src" / "nsys_llm_explainer" / "report_schema.json"
sys.path.insert(0, str(ROOT / "src"))

from nsys_llm_explainer.vocabulary.cause_kinds import FINDING_CAUSES, HOST_PIECE_KINDS, KINDS  # noqa: E402
from nsys_llm_explainer.vocabulary.device_roles import ROLE_COPIES, ROLES  # noqa: E402


def kinds_for(path: str) -> List[str]:
    """The enum a kind enum at JSON path ``path`` must hold."""
    if "/host_samples/" in path:
        return list(HOST_PIECE_KINDS)
    if "/findings/" in path:
        return list(FINDING_CAUSES)
    return list(KINDS)


def _fill(node: Any, path: str = "") -> None:
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list) and "host_cpu" in node["enum"]:
            node["enum"] = kinds_for(path)
        elif isinstance(node.get("enum"), list) and ROLE_COPIES in node["enum"]:
            node["enum"] = list(ROLES)
        for k, v in node.items():
            _fill(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _fill(v, f"{path}[{i}]")


def generate(text: str) -> str:
    """The schema text with every kind enum written from the table (formatting as the file keeps it)."""
    schema = json.loads(text)
    _fill(schema)
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: List[str]) -> int:
    text = SCHEMA.read_text(encoding="utf-8")
    new = generate(text)
    if "--check" in argv:
        if new != text:
            print(f"{SCHEMA}: kind enums differ from vocabulary/cause_kinds.py; run scripts/sync_schema_enums.py")
            return 1
        return 0
    if new != text:
        SCHEMA.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
