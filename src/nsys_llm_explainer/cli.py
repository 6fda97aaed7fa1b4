"""Command line: ``nsys-llm-explain TRACE --out DIR``, ``nsys-llm-explain demo --out DIR``,
``nsys-llm-explain schema``.

Exit codes: 0 ok, 2 bad usage or unusable input/output, 1 internal error, 130 interrupted.
Bad input never produces a traceback: one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from . import __version__
from .errors import ExplainerError, InputError

PROG = "nsys-llm-explain"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


class Progress:
    """Prints ``[nsys-llm-explain] <step> …`` on stderr when a step runs longer than ``delay`` seconds."""

    def __init__(self, enabled: bool, delay: float = 1.0) -> None:
        self.enabled = enabled
        self.delay = delay
        self._timer: Optional[threading.Timer] = None
        self._t0 = time.perf_counter()

    def __call__(self, step: str) -> None:
        self.stop()
        if self.enabled:
            t = threading.Timer(self.delay, self._say, args=(step,))
            t.daemon = True
            t.start()
            self._timer = t
        hook = os.environ.get("NSYS_LLM_EXPLAIN_TEST_PAUSE_S")  # test hook: makes a step slow (tests)
        if hook:
            time.sleep(float(hook))

    def _say(self, step: str) -> None:
        el = time.perf_counter() - self._t0
        sys.stderr.write(f"[{PROG}] {step} … ({el:.1f} s elapsed)\n")
        sys.stderr.flush()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Explain an Nsight Systems SQLite export of an LLM-inference workload "
                    f"(subcommands: `{PROG} demo --out DIR`, `{PROG} schema`).",
    )
    p.add_argument("trace", help="trace.sqlite exported by `nsys export --type sqlite` "
                                  "(or .nsys-rep/.qdrep with nsys on PATH)")
    p.add_argument("--out", required=True, help="output directory (new, empty, or holding a previous report)")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out that is not a previous report")
    p.add_argument("--phase-map", "--phases-json", dest="phase_map", metavar="FILE",
                   help='JSON {"phase": ["substring", ...]} mapping NVTX range names to phases')
    p.add_argument("--nvtx-coverage-warn-threshold", type=float, default=0.7, metavar="F",
                   help="warn when NVTX→kernel attribution covers less than this fraction of kernel time (default 0.7)")
    p.add_argument("--no-nvtx-kernel-map", action="store_true", help="skip NVTX→kernel attribution")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows in top tables (default 20)")
    p.add_argument("--include-memcpy-in-busy", action="store_true",
                   help="count memcpy/memset as GPU busy in the idle analysis")
    p.add_argument("--categories", metavar="FILE", help="kernel category rules (JSON or YAML) extending the presets")
    p.add_argument("--step-marker", metavar="REGEX", help="kernel-name regex marking the end of a decode step")
    p.add_argument("--step-range", metavar="NVTX_NAME", help="NVTX range name that delimits one step")
    p.add_argument("--window", metavar="START_NS:END_NS", help="analyze only this time window (steady state)")
    p.add_argument("--window-nvtx", metavar="RANGE_NAME", help="steady-state window = span of this NVTX range")
    p.add_argument("--quiet", action="store_true", help="no stdout summary, no progress")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return p


def _demo_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"{PROG} demo",
                                description="Generate a synthetic vLLM-style trace and analyze it.")
    p.add_argument("--out", required=True)
    p.add_argument("--force", action="store_true")
    p.add_argument("--scenario", default="demo", help="synthetic scenario to generate (default: demo)")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--quiet", action="store_true")
    return p


def _load_phase_map(path: Optional[str]) -> Optional[Dict[str, List[str]]]:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise InputError(f"--phase-map file not found: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"--phase-map {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(s, str) for s in v) for k, v in data.items()
    ):
        raise InputError(f'--phase-map {path} must be a JSON object {{"phase": ["substring", ...]}}')
    return data


def _parse_window(text: Optional[str]):
    if not text:
        return None
    try:
        a, b = text.split(":")
        lo, hi = int(a), int(b)
    except ValueError:
        raise InputError(f"--window must be START_NS:END_NS (integers), got {text!r}") from None
    if hi <= lo:
        raise InputError(f"--window end must be greater than start, got {text!r}")
    return lo, hi


def _export_report(path: Path, tmpdir: Path) -> Path:
    nsys = shutil.which("nsys")
    cmd_hint = f"nsys export --type sqlite --output {path.with_suffix('.sqlite').name} {path}"
    if nsys is None:
        raise InputError(f"{path.name} is an Nsight Systems report, not SQLite, and `nsys` is not on PATH; "
                         f"run: {cmd_hint}")
    out = tmpdir / "trace.sqlite"
    try:
        proc = subprocess.run([nsys, "export", "--type", "sqlite", "--output", str(out), str(path)],
                              capture_output=True, timeout=3600)
    except (OSError, subprocess.SubprocessError) as exc:
        raise InputError(f"`nsys export` failed ({exc}); run: {cmd_hint}") from None
    if proc.returncode != 0 or not out.exists():
        last = (proc.stderr or proc.stdout or b"").decode(errors="replace").strip().splitlines()
        raise InputError(f"`nsys export` failed: {last[-1] if last else proc.returncode}; run: {cmd_hint}")
    return out


def _summary_lines(rep) -> List[str]:
    lines = []
    k = rep.kernels
    if k.available and k.by_name:
        t = k.by_name[0]
        name = " ".join(str(t["name"]).split())[:100]   # one line on the terminal, whatever the name holds
        lines.append(f"top kernel: {name} — {t['pct']:.1f}% of kernel time ({t['total_ns'] / 1e6:.3f} ms)")
    else:
        lines.append(f"kernels: {k.reason}")
    if rep.idle.available and rep.idle.devices:
        d = max(rep.idle.devices, key=lambda r: r["idle_pct"])
        lines.append(f"worst idle device: {d['device_id']} — idle {d['idle_pct']:.1f}% of its "
                     f"{d['window_ns'] / 1e6:.3f} ms window")
    if rep.findings:
        f = rep.findings[0]
        lines.append(f"top finding: [{f['severity']}] {f['title']}")
    return lines


def _write_all(data: dict, out_dir: Path) -> None:
    from . import render

    for r in render.ALL_RENDERERS:
        (r() if isinstance(r, type) else r).render(data, out_dir)


def run_analysis(trace: Path, out: Path, opts, force: bool, quiet: bool, display_path: Optional[str] = None,
                 extra_files: Sequence[Path] = ()) -> int:
    from .output import Staging, check_out_dir
    from .pipeline import analyze_path
    from .render.json_report import build_json

    check_out_dir(out, force)
    progress = Progress(enabled=not quiet)
    try:
        with tempfile.TemporaryDirectory(prefix="nsys-llm-explain-") as td:
            src = trace
            if trace.suffix.lower() in REPORT_SUFFIXES:
                progress("exporting report to SQLite with nsys")
                src = _export_report(trace, Path(td))
            report = analyze_path(str(src), opts, progress)
            if src != trace:
                report.trace.path = str(trace)
            if display_path:
                report.trace.path = display_path
            progress("writing report")
            data = build_json(report)
            with Staging(out) as st:
                assert st.tmp is not None
                _write_all(data, st.tmp)
                for f in extra_files:
                    shutil.copyfile(f, st.tmp / f.name)
                st.commit()
    finally:
        progress.stop()
    if not quiet:
        print(f"{PROG}: wrote {out / 'report.md'}, report.json, tables/")
        for line in _summary_lines(report):
            print("  " + line)
    return 0


def _main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if argv and argv[0] == "schema" and not Path("schema").exists():
        from .render import load_schema
        print(json.dumps(load_schema(), indent=2))
        return 0
    if argv and argv[0] == "demo" and not Path("demo").exists():
        a = _demo_parser().parse_args(argv[1:])
        from .output import check_out_dir
        from .pipeline import Options
        from .synth import build_scenario
        out = Path(a.out)
        check_out_dir(out, a.force)
        with tempfile.TemporaryDirectory(prefix="nsys-llm-explain-demo-") as td:
            trace = Path(td) / "demo_trace.sqlite"
            try:
                build_scenario(a.scenario, str(trace))
            except KeyError:
                raise InputError(f"unknown demo scenario {a.scenario!r}") from None
            return run_analysis(trace, out, Options(top=a.top), a.force, a.quiet,
                                display_path=str(out / "demo_trace.sqlite"), extra_files=[trace])
    a = _parser().parse_args(argv)
    from .pipeline import Options
    if a.top < 1:
        raise InputError("--top must be at least 1")
    if not 0.0 <= a.nvtx_coverage_warn_threshold <= 1.0:
        raise InputError("--nvtx-coverage-warn-threshold must be between 0 and 1")
    if a.step_marker:
        try:
            re.compile(a.step_marker)
        except re.error as exc:
            raise InputError(f"--step-marker is not a valid regular expression: {exc}") from None
    if a.categories:
        from .analyses.categories import load_rules
        load_rules(None, a.categories)   # fail before the (long) analysis on a bad rules file
    opts = Options(
        top=a.top, phase_map=_load_phase_map(a.phase_map), nvtx_coverage_warn_threshold=a.nvtx_coverage_warn_threshold,
        nvtx_kernel_map=not a.no_nvtx_kernel_map, include_memcpy_in_busy=a.include_memcpy_in_busy,
        categories_file=a.categories, step_marker=a.step_marker, window=_parse_window(a.window),
        window_nvtx=a.window_nvtx, step_range=a.step_range,
    )
    return run_analysis(Path(a.trace), Path(a.out), opts, a.force, a.quiet)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        return _main(argv)
    except ExplainerError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted; no report was written\n")
        return 130
    except MemoryError:
        sys.stderr.write(f"{PROG}: error: out of memory while analyzing the trace\n")
        return 1
    except BrokenPipeError:
        return 1
    except Exception as exc:  # internal error: still one line, unless debugging
        if os.environ.get("NSYS_LLM_EXPLAIN_DEBUG"):
            raise
        sys.stderr.write(f"{PROG}: internal error: {type(exc).__name__}: {exc} "
                         "(set NSYS_LLM_EXPLAIN_DEBUG=1 for a traceback)\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
