"""The typed result of one analysis: :class:`Report` (every section, immutable), with ``to_dict()`` (the
``report.json`` dict, :mod:`serialize`), ``from_dict()`` (back from it) and ``to_frame(name)`` (one table as a
pandas ``DataFrame``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from .analyses.api.cuda_api import CudaApiResult
from .analyses.api.graphs import GraphResult
from .analyses.api.launch import LaunchResult
from .analyses.api.sync import SyncResult
from .analyses.comms.exposure import CommExposureResult
from .analyses.comms.nccl_result import NcclResult
from .analyses.comms.series import NcclSeries
from .analyses.idle.causes import IdleCausesResult
from .analyses.idle.gpu_time import GpuTimeResult
from .analyses.idle.host_samples import HostSamplesResult
from .analyses.kernels.categories import CategoryResult
from .analyses.kernels.harness import HarnessKernels
from .analyses.kernels.starts import KernelStarts
from .analyses.kernels.summary import KernelSummary
from .analyses.kernels.traits import KernelTraitsResult
from .analyses.memory.copy_engines import CopyEnginesResult
from .analyses.memory.memcpy import MemcpyResult
from .analyses.memory.traffic import MemoryResult
from .analyses.memory.unified import UnifiedMemoryResult
from .analyses.nvtx.attribution import AttributionResult
from .analyses.nvtx.ranges import NvtxResult
from .analyses.steps.metrics import StepResult
from .analyses.steps.period_parts import PeriodParts
from .analyses.steps.phases import PhaseResult
from .analyses.steps.sync import StepSyncResult
from .analyses.threads.waits import WaitsResult
from .analyses.timeline.content import TimelineFile
from .analyses.trace.facts import TraceFacts
from .analyses.trace.info import TraceInfoResult
from .analyses.trace.session import ClockInfo
from .analyses.trace.window import WindowResult
from .errors import InputError, OptionalDependencyError
from .findings.base import Finding
from .findings.rank import Headline
from .jsonable import NOT_IN_JSON, built
from .options import Options
from .serialize import report_dict, report_values


@dataclass(frozen=True)
class Report:
    """Everything the analysis found, one typed field per section (the analysis graph's values of the same
    names, :mod:`graph`). ``to_dict()`` gives the ``report.json`` dict. ``steady`` fields and sections are
    over the analysis window (``window``); the others over the whole capture.

    The trace model is not part of it (what compare, a cluster and the timeline file read of the trace is computed
    in the graph: ``steady_kernel_starts``, ``steady_categories``, ``harness``, ``clock``, ``nccl_series``,
    ``timeline_file``),
    so it is freed once the analysis is done; those values are None / empty on a report loaded from
    ``report.json`` (:meth:`from_dict`), and what needs them says so."""

    tool_version: str
    options: Options
    trace: TraceInfoResult
    window: WindowResult
    kernels: KernelSummary
    steady_kernels: KernelSummary          # steady
    launch: LaunchResult                   # steady
    sync: SyncResult
    cuda_api: CudaApiResult
    memcpy: MemcpyResult
    nvtx: NvtxResult
    attribution: AttributionResult
    gpu_time: GpuTimeResult                # steady, with the full capture's totals beside
    idle_causes: IdleCausesResult          # steady
    traits: KernelTraitsResult             # steady
    phases: PhaseResult
    categories: CategoryResult
    steps: StepResult
    graphs: GraphResult
    memory: MemoryResult                   # steady
    nccl: NcclResult
    facts: TraceFacts
    step_sync: StepSyncResult              # steady
    unified_memory: UnifiedMemoryResult    # steady and full
    host_samples: HostSamplesResult        # steady
    waits: WaitsResult                     # steady
    copy_engines: CopyEnginesResult        # steady
    comm_exposure: CommExposureResult      # steady
    findings: Tuple[Finding, ...]
    headline: Headline
    warnings: Tuple[str, ...]
    #: the analysis window holds repeated steps (graph step "window repeats"): an auto-detected window without them
    #: is "the auto-detected window", not "the steady window" (vocabulary.windows.window_name)
    window_repeats: bool
    timeline_file: TimelineFile            # what timeline.pftrace holds (its rows: not in report.json)
    # what a comparison reads (docs/COMPARE.md), not in report.json: None in a report loaded from it
    steady_kernel_starts: Optional[KernelStarts]   # steady: every kernel's start, device and name
    steady_categories: Optional[CategoryResult]    # steady: ``categories`` recomputed over the window
    timings_s: Mapping[str, float] = field(default_factory=dict)   # seconds per analysis step (not a result)
    # what a cluster reads of the trace (cluster.summary; not in report.json: None in a report loaded from it)
    clock: Optional[ClockInfo] = field(default=None, metadata=NOT_IN_JSON)        # UTC placement of the timestamps
    nccl_series: Optional[Tuple[NcclSeries, ...]] = field(default=None, metadata=NOT_IN_JSON)   # NCCL kernels
    #: what a comparison splits per step period (NVTX steps; made only for a comparison: pipeline ``compare``)
    period_parts: Optional[PeriodParts] = field(default=None, metadata=NOT_IN_JSON)
    #: steady: the kernels an event-timed benchmark harness launched outside its timed regions (compare's anchor
    #: kernel leaves them out; the kernel findings read them from the graph)
    harness: Optional[HarnessKernels] = field(default=None, metadata=NOT_IN_JSON)

    def to_dict(self) -> Dict[str, Any]:
        return report_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "report.json") -> Report:
        """The report of a ``report.json`` dict (``to_dict()``, or the file parsed): ``Report.from_dict(r.to_dict())
        .to_dict() == r.to_dict()``. Every section comes back typed; what ``report.json`` does not carry comes back
        None or empty (docs/DESIGN.md, "Loading a report"). A dict of another ``schema_version``, or one missing or
        malforming a part, raises :class:`errors.InputError` (one line naming the key)."""
        return built(lambda: cls(**report_values(cls, d)), where, "a report")

    def write_perfetto(self, path: Any) -> Optional[Path]:
        """Write the timeline file (``timeline.pftrace``, a Perfetto trace: open it in ui.perfetto.dev or
        ``trace_processor``) to ``path``: the rows ``timeline_file`` chose (docs/MODEL.md "Timeline file"), the idle
        pieces, findings' markers, steps and counters (:mod:`render.perfetto`). Returns ``path``, or None when the
        report was made with ``timeline_events=0``; raises :class:`errors.InputError` for a report loaded from
        report.json (the rows of ``timeline_file`` are not in it)."""
        from .render.perfetto import write_perfetto  # output formatting (docs/DESIGN.md)

        if self.timeline_file.span.written and self.timeline_file.rows is None:
            raise InputError("the timeline file needs the trace's rows, and this report was loaded from report.json "
                             "(Report.from_dict), which does not carry them: analyze the trace again")
        return write_perfetto(self, Path(path))

    def to_frame(self, name: str) -> Any:
        """A pandas ``DataFrame`` of one table of the report: the tables of ``tables/*.csv`` by file name
        (``kernels``, ``devices``, ``idle_causes``, ``gpu_idle_gaps``, ``findings``, ``steps``, ``categories``, …;
        :mod:`render.frames`, the CSV's own table specs), one row per ``report.json`` row, nested objects flattened
        one level (``full.busy_ns``, ``cause.kind``), integer ns as in ``report.json``. Needs the ``pandas``
        extra: raises :class:`errors.OptionalDependencyError` (an ``ImportError``) without it."""
        from .render.frames import check_table, table_frame  # output formatting: the CSVs' specs (docs/DESIGN.md)

        check_table(name)   # an unknown name is refused before pandas is needed
        try:
            import pandas as pd
        except ImportError:
            raise OptionalDependencyError("Report.to_frame needs pandas: pip install 'nsys-llm-explainer[pandas]'"
                                          ) from None
        return table_frame(self, name, pd)
