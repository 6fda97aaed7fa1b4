"""The Markdown writer: a :class:`.document.Document` → ``report.md`` / ``compare.md`` / ``cluster.md``; escapes
(:mod:`.escape`) and lays out only (layout rules: docs/DESIGN.md, "Markdown")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Mapping, Sequence, Tuple

from ..vocabulary.units import DASH
from .base import Renderer
from .document import (
    BR,
    NL,
    BulletList,
    Cell,
    Code,
    Data,
    Details,
    Document,
    Em,
    Group,
    Heading,
    Inline,
    Link,
    Note,
    Paragraph,
    Part,
    Rich,
    Section,
    Spans,
    Strong,
    Styled,
    TablePart,
    Value,
)
from .escape import md_cell, md_name, md_rich, md_text
from .table import Col

if TYPE_CHECKING:
    from ..report import Report


def md_inline(x: Spans) -> str:
    """Spans as Markdown: the tool's words as they are, user text escaped."""
    if isinstance(x, str):
        return x
    if isinstance(x, (tuple, list)):
        return "".join(md_inline(s) for s in x)
    if isinstance(x, Data):
        return md_text(x.value, x.lead)
    if isinstance(x, Cell):
        return md_cell(x.value)
    if isinstance(x, Code):
        return md_name(x.value, x.limit)
    if isinstance(x, Rich):
        return md_rich(x.value, x.lead)
    if isinstance(x, Strong):
        return "**" + md_inline(x.children) + "**"
    if isinstance(x, Em):
        return "*" + md_inline(x.children) + "*"
    if isinstance(x, (Styled, Link)):
        return md_inline(x.children)
    if isinstance(x, Value):
        return x.shown
    return "" if x is None else md_text(x, False)


def md_table(cols: Sequence[Col], rows: Sequence[Mapping[str, Any]], extra: Sequence[Inline] = ()) -> List[str]:
    """A GitHub Markdown table of the columns with a header (``extra``: trailing rows, one cell per column)."""
    shown = [c for c in cols if c.head and not c.html_only]
    lines = ["| " + " | ".join(md_inline(c.head) for c in shown) + " |",
             "|" + "|".join("---:" if c.right else "---" for c in shown) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(md_inline(c.spans(r)) or DASH for c in shown) + " |")
    for cells in extra:
        out = [md_inline(x) for x in cells]
        lines.append("| " + " | ".join(out + [""] * (len(shown) - len(out))) + " |")
    return lines


def _blocks(ps: Sequence[Part]) -> List[Tuple[List[str], str]]:
    """(lines, brk) of each block, groups and details flattened, HTML-only parts left out."""
    out: List[Tuple[List[str], str]] = []
    for p in ps:
        if isinstance(p, Paragraph):
            out.append(([md_inline(p.text)], p.brk))
        elif isinstance(p, Heading):
            out.append((["#" * p.level + " " + md_inline(p.text)], ""))
        elif isinstance(p, Note):
            out.append((["> " + md_inline(p.text)], p.brk))
        elif isinstance(p, BulletList):
            out.append((["- " + md_inline(i) for i in p.items], ""))
        elif isinstance(p, TablePart):
            out.append((md_table(p.cols, p.rows, p.extra), ""))
        elif isinstance(p, Group):
            out += _blocks(p.parts)
        elif isinstance(p, Details):
            out += [([md_inline(p.summary)], "")] + _blocks(p.parts)
    return out


def md_parts(ps: Sequence[Part]) -> List[str]:
    """The lines of a sequence of parts (no trailing blank line)."""
    lines: List[str] = []
    blocks = _blocks(ps)
    for i, (block, brk) in enumerate(blocks):
        lines += block
        if i + 1 < len(blocks):
            if brk == BR:
                lines[-1] += "  "
            elif brk != NL:
                lines.append("")
    return lines


def md_section(s: Section) -> str:
    head = ["## " + md_inline(s.title), ""] if s.title else []
    return "\n".join(head + md_parts(s.parts))


def write_markdown(doc: Document) -> str:
    """The Markdown text of a document (sections separated by a blank line, one final newline)."""
    return "\n\n".join(md_section(s) for s in doc.sections if not s.html_only) + "\n"


def render_markdown(report: Report) -> str:
    """The full ``report.md`` text of a report."""
    from .sections import build_document

    return write_markdown(build_document(report))


class MarkdownRenderer(Renderer):
    """``report.md``: the report's sections (:mod:`.sections`) laid out by :func:`write_markdown`."""

    filename = "report.md"

    def text(self, report: Report) -> str:
        return render_markdown(report)


__all__ = ["MarkdownRenderer", "md_inline", "md_parts", "md_table", "render_markdown", "write_markdown"]
