"""Renderer base class, the one text-file writer and the JSON writer (``report.json``; compare and cluster use the
same). The caller owns atomicity: it passes a staging directory (docs/SECURITY.md §2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, List, Mapping, Tuple

if TYPE_CHECKING:
    from ..report import Report


class Renderer:
    """Base class: ``render(report, out_dir)`` writes files into ``out_dir`` and returns their paths.
    A one-file renderer sets ``filename`` and implements :meth:`text`."""

    filename: str = ""

    def text(self, report: Report) -> str:
        raise NotImplementedError

    def render(self, report: Report, out_dir: Path) -> List[Path]:
        return write_text_files(out_dir, {self.filename: self.text(report)})


def write_text_files(out_dir: Path, files: Mapping[str, str]) -> List[Path]:
    """Write each ``name → text`` into ``out_dir`` (UTF-8; made when missing) and return the paths, in order: the one
    place report, compare and cluster write their single files (the JSON text from :func:`dumps_indented`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out_dir / name).write_text(text, encoding="utf-8")
    return [out_dir / name for name in files]


#: a list longer than this is written one element per line, each element on its one line
LONG_LIST = 32
_COMPACT = json.JSONEncoder(allow_nan=False, separators=(", ", ": ")).encode   # the C encoder


def _key(k: Any) -> str:
    return _COMPACT(k) if isinstance(k, str) else json.dumps({k: 0})[1:-4]   # JSON's own key conversion


def _indented(v: Any, level: int, out: List[str]) -> None:
    pad = "  " * (level + 1)
    if isinstance(v, (list, tuple)) and len(v) > LONG_LIST:   # rows: one per line (the C encoder per row)
        out.append("[\n" + ",\n".join(pad + _COMPACT(x) for x in v) + "\n" + "  " * level + "]")
    elif isinstance(v, (dict, list, tuple)) and v:
        obj = isinstance(v, dict)
        out.append("{" if obj else "[")
        items: Iterable[Tuple[Any, Any]] = v.items() if isinstance(v, dict) else ((None, x) for x in v)
        for i, (k, x) in enumerate(items):
            out.append((",\n" if i else "\n") + pad + (_key(k) + ": " if obj else ""))
            _indented(x, level + 1, out)
        out.append("\n" + "  " * level + ("}" if obj else "]"))
    else:
        out.append(_COMPACT(v))


def dumps_indented(value: Any) -> str:
    """Strict JSON (``allow_nan=False``) with a 2-space indent, as ``json.dumps(value, indent=2)`` writes it,
    except that a list of more than :data:`LONG_LIST` elements has one compact element per line."""
    out: List[str] = []
    _indented(value, 0, out)
    return "".join(out)


class JsonRenderer(Renderer):
    """``report.json``: ``Report.to_dict()`` as strict JSON (``allow_nan=False``, 2-space indent, long lists one
    element per line: :func:`dumps_indented`)."""

    filename = "report.json"

    def text(self, report: Report) -> str:
        return dumps_indented(report.to_dict()) + "\n"
