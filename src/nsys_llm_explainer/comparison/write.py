"""Write a comparison atomically (``compare.md``, ``compare.json``, ``compare.html``, ``tables/*.csv``) and
evaluate the ``--fail-on-regression PCT`` gate.

Output follows the main command (:mod:`output`: a manifest of the files written, a staging directory made
visible in one step); ``--out`` may be new, empty or hold a previous comparison, anything else is refused
unless ``force``. Text cells follow :mod:`render.escape` (Markdown / HTML escaping, CSV formula guard).

The gate (docs/COMPARE.md): for each NEW, fail when the pair is comparable and NEW's headline metric is
higher than BASE's by more than ``PCT`` % *and* by more than the noise; a pair that is too short or too
different to compare never fails, and its line says why. One line per NEW.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import InputError
from ..output import OutDir, Staging, check_out_dir
from ..render.markdown import write_markdown
from ..vocabulary.units import fmt_ms
from .document import compare_document
from .html import render_compare_html
from .result import CompareResult
from .tables import write_compare_tables


def check_compare_out(out: Path, force: bool, inputs: Sequence[str] = ()) -> OutDir:
    """Refuse an unusable ``--out`` (or one holding an input) before any trace is analyzed."""
    return check_out_dir(out, force, "compare", [Path(p) for p in inputs])


def render_compare(d: Mapping[str, Any], out_dir: Path, js: Optional[str] = None,
                   top: Optional[int] = None) -> List[Path]:
    """Every output file of a ``compare.json`` dict into ``out_dir`` (not atomic: see :func:`write_compare`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [out_dir / "compare.json", out_dir / "compare.md", out_dir / "compare.html"]
    files[0].write_text(json.dumps(d, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    files[1].write_text(write_markdown(compare_document(d, top)), encoding="utf-8")
    files[2].write_text(render_compare_html(d, js, top), encoding="utf-8")
    return files + write_compare_tables(d, out_dir)


def write_compare(result: CompareResult, out: Union[Path, OutDir], top: Optional[int] = None,
                  before_commit: Optional[Callable[[], None]] = None) -> None:
    """Write the comparison into ``out`` atomically (a plain path is checked first, without ``force``)."""
    od = out if isinstance(out, OutDir) else check_compare_out(Path(out), False)
    d = result.to_dict()
    with Staging(od) as st:
        assert st.tmp is not None
        render_compare(d, st.tmp, top=top)
        if before_commit is not None:
            before_commit()
        st.commit()


def check_gate(pct: Any) -> float:
    """The ``--fail-on-regression`` value: a finite percentage ≥ 0."""
    try:
        v = float(pct)
    except (TypeError, ValueError):
        raise InputError(f"--fail-on-regression must be a percentage, got {pct!r}") from None
    if not math.isfinite(v) or v < 0:
        raise InputError(f"--fail-on-regression must be a finite percentage ≥ 0, got {pct!r}")
    return v


def gate(result: CompareResult, pct: float) -> Tuple[List[str], bool]:
    """(one line per NEW, whether any NEW regressed) for ``--fail-on-regression pct``."""
    spec = result.metric
    what = spec.description.split(" (")[0]
    lines: List[str] = []
    failed = False
    for c in result.comparisons:
        vals = (f"{what}: BASE {c.base} {fmt_ms(c.metric_base.p50_ns, unit=True)}, "
                f"NEW {c.new} {fmt_ms(c.metric_new.p50_ns, unit=True)}"
                + ("" if c.change_pct is None else f", {c.change_pct:+.1f} %"))
        if c.status != "comparable" or c.change_pct is None:
            lines.append(f"not gated ({c.status.replace('_', ' ')} to compare: {'; '.join(c.reasons)}): {vals}")
        elif c.change_pct > pct and c.significant:
            failed = True
            lines.append(f"REGRESSION: {vals} (limit +{pct:g} %)")
        elif c.change_pct > pct:
            lines.append(f"not failing, within the noise (±{c.noise_pct:.1f} %): {vals} (limit +{pct:g} %)")
        else:
            lines.append(f"ok: {vals} (limit +{pct:g} %)")
    return lines, failed
