"""Typed values read from loosely typed cells: ``sql_int`` reads an info cell as ``int()`` does."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.model.trace import sql_int


def test_sql_int_reads_info_cells_as_int_does():
    """Cells of the small info tables (TARGET_INFO_*, PROCESSES, ThreadNames) are whatever SQLite stored: an
    integer, a real, text or a blob; NULL reads as None. ``sql_int`` converts them as ``int()`` would and raises
    the same errors, which the model builder catches to skip the row."""
    assert [sql_int(v) for v in (7, 7.9, "12", b"3", True)] == [7, 7, 12, 3, 1]
    with pytest.raises(TypeError):
        sql_int(None)
    with pytest.raises(TypeError):
        sql_int([1])
    with pytest.raises(ValueError):
        sql_int("gpu0")
