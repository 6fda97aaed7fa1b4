"""Write a comparison atomically (``compare.md``, ``compare.json``, ``compare.html``, ``tables/*.csv``; the output rules
of docs/SECURITY.md §2). The ``--fail-on-regression`` gate is :mod:`.gate`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from ..output import OutDir, Staging, check_out_dir
from ..render.base import dumps_indented, write_text_files
from ..render.csv_tables import write_tables
from ..render.markdown import write_markdown
from .document import compare_document, render_compare_html
from .result import CompareResult
from .tables import TABLES


def write_compare(result: CompareResult, out: Union[Path, OutDir], top: Optional[int] = None) -> None:
    """Write the comparison into ``out`` atomically (a plain path is checked first, without ``force``)."""
    od = out if isinstance(out, OutDir) else check_out_dir(Path(out), False, "compare")
    with Staging(od) as st:
        assert st.tmp is not None
        write_text_files(st.tmp, {"compare.json": dumps_indented(result.to_dict()) + "\n",
                                  "compare.md": write_markdown(compare_document(result, top)),
                                  "compare.html": render_compare_html(result, top=top)})
        write_tables(TABLES, result, st.tmp)
        st.commit()
