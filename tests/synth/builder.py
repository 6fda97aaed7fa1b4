"""Write Nsight-Systems-shaped SQLite exports with our own code.

`TraceBuilder` collects rows through small methods (``kernel``, ``runtime``, ``nvtx_push_pop`` ...)
and writes a database whose table and column names follow the real exporter of the chosen
*flavor* (see ``/work/shared/SCHEMA.md``). Rows are written in a shuffled order because real
exports are not time-ordered.

Layout: ``ids`` (flavors, global ids), ``catalog`` / ``catalog_session`` (columns per flavor),
``store`` (identities, strings, correlation ids), ``rows_cuda`` / ``rows_graph`` (CUDA rows), ``rows_samples``
(CPU samples), this
module (NVTX / OSRT rows and ``write``), ``writer`` (the SQLite writer).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Optional

from .ids import FLAVORS, global_pid, global_tid, short_kernel_name
from .rows_samples import SampleRows
from .writer import write_all

__all__ = ["TraceBuilder", "FLAVORS", "global_pid", "global_tid", "short_kernel_name"]


class TraceBuilder(SampleRows):
    """Collect rows and write an Nsight-Systems-shaped SQLite export.

    ``flavor`` picks the exporter generation ("2021.5", "2022.4", "2023.4", "2024.2", "2026.2").
    ``lazy=True`` only creates activity tables that have rows (the exporter's default).
    """

    # ----------------------------------------------------------------- NVTX / OSRT
    def nvtx_push_pop(
        self,
        start: int,
        end: Optional[int],
        text: str,
        *,
        tid_g: int,
        domain_id: int = 0,
        registered: bool = False,
        color: Optional[int] = None,
        category: Optional[int] = None,
    ) -> None:
        """Push/pop range (eventType 59); ``registered`` stores the text via StringIds/textId."""
        self._rows["nvtx"].append(
            {
                "start": int(start),
                "end": None if end is None else int(end),
                "eventType": 59,
                "text": None if registered else text,
                "textId": self.string(text) if registered else None,
                "globalTid": tid_g,
                "domainId": domain_id,
                "color": color,
                "category": category,
            }
        )

    def nvtx_start_end(
        self,
        start: int,
        end: Optional[int],
        text: str,
        *,
        tid_g: int,
        end_tid_g: Optional[int] = None,
        domain_id: int = 0,
        range_id: Optional[int] = None,
    ) -> int:
        """Start/end range (eventType 60); returns its rangeId."""
        if range_id is None:
            self._range_id += 1
            range_id = self._range_id
        self._rows["nvtx"].append(
            {
                "start": int(start),
                "end": None if end is None else int(end),
                "eventType": 60,
                "rangeId": range_id,
                "text": text,
                "globalTid": tid_g,
                "endGlobalTid": end_tid_g if end_tid_g != tid_g else None,
                "domainId": domain_id,
            }
        )
        return range_id

    def nvtx_mark(self, ts: int, text: str, *, tid_g: int, domain_id: int = 0) -> None:
        """NVTX mark (eventType 34, end NULL)."""
        self._rows["nvtx"].append(
            {
                "start": int(ts),
                "end": None,
                "eventType": 34,
                "text": text,
                "globalTid": tid_g,
                "domainId": domain_id,
            }
        )

    def nvtx_domain(self, domain_id: int, name: str, *, tid_g: int, ts: int = 0) -> None:
        """Domain creation row (eventType 75; domain ids are per process)."""
        self._rows["nvtx"].append(
            {
                "start": int(ts),
                "end": None,
                "eventType": 75,
                "text": name,
                "globalTid": tid_g,
                "domainId": domain_id,
            }
        )

    def osrt(
        self, start: int, end: int, *, tid_g: int, name: str = "pthread_cond_wait", return_value: int = 0
    ) -> None:
        """OS runtime API row (eventClass 27)."""
        self._rows["osrt"].append(
            {
                "start": int(start),
                "end": int(end),
                "eventClass": 27,
                "globalTid": tid_g,
                "nameId": self.string(name),
                "returnValue": return_value,
                "nestingLevel": 0,
                "callchainId": 0,
            }
        )

    # ----------------------------------------------------------------- write
    def write(self, path: str, *, overwrite: bool = False) -> str:
        """Write the database to ``path``; refuses to replace an existing file unless ``overwrite``."""
        path = os.fspath(path)
        if os.path.exists(path):
            if not overwrite:
                raise FileExistsError(path)
            os.remove(path)
        con = sqlite3.connect(path)
        try:
            con.execute("PRAGMA journal_mode=OFF")
            con.execute("PRAGMA synchronous=OFF")
            write_all(self, con)
            con.commit()
        finally:
            con.close()
        return path
