"""What the claims tests share: write a hand-built trace and analyse it to its report.json dict; one finding of it by
id."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path


def report_of(b: TraceBuilder, tmp_path: Path, **options: Any) -> Dict[str, Any]:
    """``b`` written to ``tmp_path/t.sqlite`` (replacing it) and analysed with ``options``: its report.json dict."""
    p = tmp_path / "t.sqlite"
    b.write(str(p), overwrite=True)
    return analyze_path(str(p), options_from_kwargs(**options)).to_dict()


def finding_of(rep: Dict[str, Any], fid: str) -> Dict[str, Any]:
    """The first finding of ``rep`` with id ``fid`` (StopIteration when there is none)."""
    return next(f for f in rep["findings"] if f["id"] == fid)
