"""CPU samples of the synthetic exporter: ``COMPOSITE_EVENTS`` (one row per sample) and ``SAMPLING_CALLCHAINS``
(one row per frame, ``stackDepth`` 0 = leaf), with the columns of the real exports (identical in 2022.2, 2022.4,
2023.4 and 2024.6: ``/work/shared/SCHEMA.md`` §3.9 and the real traces 01 and 08).

Flavors up to 2022.4 write ``kernelMode`` / ``unresolved`` as NULL for user frames and resolved symbols (as the
2022.2 export does); later flavors write 0. An unresolved frame is one whose symbol starts with ``0x`` (nsys then
stores the address as the symbol text); ``unwindMethod`` is 8 for kernel frames, 0 otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Sequence, Tuple, Union

from .rows_graph import GraphRows

if TYPE_CHECKING:  # pragma: no cover
    from .writer import _Writer

__all__ = ["SampleRows", "write_samples", "Frame"]

#: one frame: (symbol, module path) or (symbol, module path, kernel mode)
Frame = Union[Tuple[str, str], Tuple[str, str, bool]]

_EVENTS: List[Tuple[str, str, str]] = [
    ("id", "INTEGER   NOT NULL   PRIMARY KEY,", "ID of the composite event."),
    ("start", "INTEGER   NOT NULL,", "Event start timestamp (ns)."),
    ("cpu", "INTEGER,", "ID of CPU this thread was running on."),
    ("threadState", "INTEGER,", "REFERENCES ENUM_SAMPLING_THREAD_STATE(id)"),
    ("globalTid", "INTEGER,", "Serialized GlobalId."),
    ("cpuCycles", "INTEGER   NOT NULL", "Value of Performance Monitoring Unit (PMU) counter."),
]
_CHAINS: List[Tuple[str, str, str]] = [
    ("id", "INTEGER   NOT NULL,", "REFERENCES COMPOSITE_EVENTS(id)"),
    ("symbol", "INTEGER   NOT NULL,", "REFERENCES StringIds(id) -- Function name"),
    ("module", "INTEGER   NOT NULL,", "REFERENCES StringIds(id) -- Module name"),
    ("kernelMode", "INTEGER,", "True if kernel mode."),
    ("thumbCode", "INTEGER,", "True if thumb code."),
    ("unresolved", "INTEGER,", "True if the symbol was not resolved."),
    ("specialEntry", "INTEGER,", "True if artifical entry added during processing callchain."),
    ("originalIP", "INTEGER,", "Instruction pointer value."),
    ("unwindMethod", "INTEGER,", "REFERENCES ENUM_STACK_UNWIND_METHOD(id)"),
    ("stackDepth", "INTEGER   NOT NULL,", "Zero-base index of the given function in call stack."),
]


def _ddl(table: str, comment: str, cols: Sequence[Tuple[str, str, str]], tail: str = "") -> str:
    """The exporter's DDL layout: a table comment, one padded line per column with its comment."""
    lines = [f"    {name:<27} {typ}".ljust(71) + f"-- {c}" for name, typ, c in cols]
    return f"CREATE TABLE {table} (\n    -- {comment}\n\n" + "\n".join(lines) + tail + "\n);"


EVENTS_DDL = _ddl("COMPOSITE_EVENTS", "Thread sampling events.", _EVENTS)
CHAINS_DDL = _ddl("SAMPLING_CALLCHAINS", "Callchain entries obtained from composite events, used to construct "
                  "function table views.", _CHAINS, "\n\n    PRIMARY KEY (id, stackDepth)")
EVENT_COLS = ("id", "start", "cpu", "threadState", "globalTid", "cpuCycles")
CHAIN_COLS = ("id", "symbol", "module", "kernelMode", "thumbCode", "unresolved", "specialEntry", "originalIP",
              "unwindMethod", "stackDepth")


class SampleRows(GraphRows):
    """Adds :meth:`cpu_sample` to the builder."""

    def _sample_list(self) -> List[Tuple[int, int, int, List[Tuple[int, int, bool, bool]]]]:
        return self.__dict__.setdefault("_samples", [])

    def cpu_sample(self, ts: int, *, tid_g: int, frames: Sequence[Frame], cpu: int = 0) -> None:
        """One CPU sample of thread ``tid_g`` at ``ts`` with its callchain ``frames`` (leaf first)."""
        chain = []
        for f in frames:
            sym, mod = f[0], f[1]
            kernel = bool(f[2]) if len(f) > 2 else False
            chain.append((self.string(sym), self.string(mod), kernel, sym.startswith("0x")))
        self._sample_list().append((int(ts), int(tid_g), int(cpu), chain))


def write_samples(w: _Writer) -> None:
    """Create and fill both tables when the builder has samples (or, not lazy, empty tables)."""
    b = w.b
    samples = getattr(b, "_samples", [])
    if not samples and b.lazy:
        return
    w.con.execute(EVENTS_DDL)
    w.con.execute(CHAINS_DDL)
    old = w.f <= 1
    ev_rows, ch_rows = [], []
    for i in w.order(len(samples), 900):
        ts, g, cpu, chain = samples[i]
        sid = i + 1
        ev_rows.append((sid, ts, cpu, 1, g, 1))
        for depth, (sym, mod, kernel, unres) in enumerate(chain):
            km = 1 if kernel else (None if old else 0)
            un = 1 if unres else (None if old else 0)
            ch_rows.append((sid, sym, mod, km, None if old else 0, un, None, 0x7F0000000000 + depth,
                            8 if kernel else 0, depth))
    w.insert("COMPOSITE_EVENTS", EVENT_COLS, ev_rows)
    w.insert("SAMPLING_CALLCHAINS", CHAIN_COLS, ch_rows)
