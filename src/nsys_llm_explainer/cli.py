"""Command line: ``nsys-llm-explain TRACE --out DIR``, ``nsys-llm-explain demo --out DIR``,
``nsys-llm-explain compare BASE NEW [MORE ...] --out DIR``, ``nsys-llm-explain schema [--compare]``.

Exit codes (README "Use"): 0 ok, 2 bad usage or unusable input/output (:class:`errors.WorkerError` too), 1
internal error, 3 / 4 (:data:`errors.EXIT_REGRESSION`, :data:`errors.EXIT_INCOMPARABLE`) from the compare gate,
128 + the signal number when interrupted. Bad input is one inert line on stderr, never a traceback
(docs/SECURITY.md); output directories: :mod:`output`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Optional, Sequence

from . import __version__, interrupts
from .errors import MEMORY_LINE, ExplainerError, InputError, OptionError, OutputError, memory_shortage
from .options import Options, add_flags, check_option, flag_of, options_from_args
from .output import COMMITTED, OutDir, Staging, check_out_dir
from .output.lock import release_all
from .paths import check_name, shown, stat_or_none
from .terminal import PROG, Progress, error_line, say, silence_stdout, warning_line

if TYPE_CHECKING:
    from .report import Report

#: the words that, as the first argument, name a subcommand (always, whatever the working directory holds: README "Use")
SUBCOMMANDS = ("compare", "demo", "schema")
#: how the lines of :func:`comparison.gate.gate` that fail the gate start (exit 3 or 4): written on stderr
FAILING_GATE = ("REGRESSION", "NOT COMPARABLE")




class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one-line :class:`InputError` messages (exit 2; made inert like every terminal line)
    instead of argparse's usage block, the same on every subcommand."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._given = list(args or ())
        return super().parse_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        where = "" if self.prog == PROG else f"{self.prog}: "
        dashed = [a for a in getattr(self, "_given", ()) if a.startswith("-") and os.path.exists(a)]
        hint = (f"; a file name starting with '-' goes after '--' or as ./{dashed[0]}" if dashed else "")
        raise InputError(f"{where}{message}{hint} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog=PROG,
        description="Explain an Nsight Systems SQLite export of an LLM-inference workload "
                    f"(subcommands: `{PROG} demo --out DIR`, `{PROG} compare BASE NEW --out DIR`, "
                    f"`{PROG} schema [--compare]`).",
    )
    p.add_argument("traces", nargs="+", metavar="trace",
                   help="trace.sqlite exported by `nsys export --type sqlite` (or .nsys-rep/.qdrep with nsys on PATH); "
                        "several files, a directory or a glob give one cluster report (docs/CLUSTER.md)")
    add_flags(p, "main")   # every option: the table in options.py
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return p


def _is_cluster(items: Sequence[str]) -> bool:
    """Several traces, a directory or a glob (that names no existing file) → cluster report."""
    if len(items) != 1:
        return True
    st = stat_or_none(items[0])
    return (st is not None and stat.S_ISDIR(st.st_mode)) or (st is None and any(c in items[0] for c in "*?["))


def run_cluster(items: Sequence[str], out: Path, opts: Options, force: bool, quiet: bool, jobs: Optional[int],
                scheduler: Optional[str]) -> int:
    from .cluster import analyze_many
    from .cluster.run import expand_inputs
    from .cluster.write import write_cluster_files

    if scheduler:   # before any work (cluster.workers.dask_client imports it again)
        try:
            import dask.distributed  # noqa: F401
        except ImportError:
            raise InputError("--scheduler needs Dask: pip install 'nsys-llm-explainer[dask]'") from None
    od = check_out_dir(out, force, "cluster", [Path(p) for p in expand_inputs(items)])
    if scheduler:   # Dask logs a lost scheduler or worker as multi-line tracebacks on stderr, also from its background
        # threads while the process exits; the command line says what failed in one line (:mod:`cluster.workers`)
        import logging

        logging.disable(logging.CRITICAL)
    with Progress(f"[{PROG}] ", enabled=not quiet) as progress, Staging(od) as st:
        assert st.tmp is not None
        progress("analyzing the traces")
        result = analyze_many(items, opts, jobs, scheduler, rank_root=str(st.tmp / "ranks"))
        progress("writing the cluster report")
        write_cluster_files(result, st.tmp)
        st.commit()
    if not quiet:
        say([f"{PROG}: wrote {out / 'cluster.md'}, cluster.json, tables/, ranks/ ({len(result.files)} files)"]
            + ["  " + c.finding.title for c in result.claims[:3]])
    return 0


def _demo_parser() -> argparse.ArgumentParser:
    from .demo_traces import names

    p = OneLineParser(prog=f"{PROG} demo", description="Analyze a shipped synthetic vLLM-style trace.")
    add_flags(p, "demo", choices={"scenario": list(names())})
    return p


def _schema_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=f"{PROG} schema", description="Print the JSON Schema of report.json (or compare.json).")
    add_flags(p, "schema")
    return p


def _compare_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=f"{PROG} compare",
                       description="Compare traces of the same workload: BASE (the first) against each NEW. "
                                   "Writes compare.md, compare.json, compare.html and tables/ (docs/COMPARE.md).")
    p.add_argument("traces", nargs="*", metavar="TRACE", help="BASE NEW [MORE ...] (.sqlite, or .nsys-rep with nsys)")
    add_flags(p, "compare")
    return p


def run_compare(argv: Sequence[str]) -> int:
    from .comparison import compare_paths
    from .comparison.gate import check_gate, gate
    from .comparison.write import write_compare
    from .pipeline import analyze_any

    a = _compare_parser().parse_args(list(argv))
    if len(a.traces) < 2:
        raise InputError(f"compare needs at least two traces (BASE NEW [MORE ...]), got {len(a.traces)}")
    limit = check_gate(a.fail_on_regression) if a.fail_on_regression is not None else None
    labels = check_option("labels", a.labels)
    opts = options_from_args(a)
    out = Path(a.out)
    od = check_out_dir(out, a.force, "compare", [Path(p) for p in a.traces])
    with Progress(f"[{PROG}] ", enabled=not a.quiet) as progress:
        def analyze(path: str) -> Report:
            progress(f"analyzing {Path(path).name}")
            return analyze_any(path, opts, progress, compare=True)

        result = compare_paths(a.traces, labels, analyze)
        progress("writing the comparison")
        write_compare(result, od, top=opts.top)
    if not a.quiet:
        say([f"{PROG}: wrote {out / 'compare.md'}, compare.json, compare.html, tables/"]
            + ["  " + line for c in result.comparisons for line in c.headline])
    if limit is None:
        return 0
    lines, code = gate(result, limit, allow_incomparable=a.allow_incomparable)
    # a failing pair's line is why the command fails: on stderr, --quiet or not (a CI log keeps it); the others
    # (ok, within the noise, not gated) are the gate's report, on stdout
    for line in lines:
        if line.startswith(FAILING_GATE):
            error_line(f"{PROG}: ", line)
    say([f"{PROG}: {line}" for line in lines if not line.startswith(FAILING_GATE)])
    return code


def run_analysis(trace: Path, od: OutDir, opts: Options, quiet: bool,
                 display_path: Optional[str] = None, extra_files: Sequence[Path] = ()) -> int:
    from .pipeline import analyze_any
    from .render import render_all, summary_lines
    from .render.perfetto import FILE_NAME as TIMELINE_FILE
    from .render.perfetto import write_perfetto

    out = od.path
    with Progress(f"[{PROG}] ", enabled=not quiet) as progress:
        # the report names the file the user gave (or the demo's copy), never a temporary export
        report = analyze_any(str(trace), opts, progress, display_path=display_path, extras=False)
        progress("writing report")
        with Staging(od) as st:
            assert st.tmp is not None
            render_all(report, st.tmp)
            write_perfetto(report, st.tmp / TIMELINE_FILE)
            for f in extra_files:
                shutil.copyfile(f, st.tmp / f.name)
            st.commit()
    if not quiet:
        timeline = f", {TIMELINE_FILE}" if report.timeline_file.span.written else ""
        say([f"{PROG}: wrote {out / 'report.md'}, report.html, report.json, tables/{timeline}"]
            + ["  " + line for line in summary_lines(report)])
    return 0


def run_schema(argv: Sequence[str]) -> int:
    a = _schema_parser().parse_args(list(argv))
    from .render import load_schema

    schema = load_schema("compare_schema.json") if a.compare else load_schema()
    if sys.stdout is None:
        raise OutputError("cannot write the schema: stdout is closed")
    try:
        sys.stdout.write(json.dumps(schema, indent=2) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:   # `| head`: the reader has what it wanted
        silence_stdout()
    except (OSError, ValueError) as exc:   # the schema is this command's output: not written is an error
        silence_stdout()
        raise OutputError(f"cannot write the schema to stdout: {exc}") from None
    return 0


def _check_address_space(items: Sequence[str]) -> None:
    """Refuse, before any work, an address-space limit (``ulimit -v``) too small for the largest trace named
    (:func:`errors.address_space_shortage`): below it an allocation may fail where it cannot be caught."""
    from .errors import address_space_shortage

    size = 0
    for it in items:
        try:
            st = os.stat(it)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            size = max(size, st.st_size)
    short = address_space_shortage(size)
    if short is not None:
        raise InputError(MEMORY_LINE + short)


def _main(argv: Sequence[str]) -> int:
    argv = list(argv)
    command = argv[0] if argv and argv[0] in SUBCOMMANDS else None   # never depends on the working directory
    if command == "schema":
        return run_schema(argv[1:])
    if command == "compare":
        _check_address_space([x for x in argv[1:] if not x.startswith("-")])
        return run_compare(argv[1:])
    if command == "demo":
        a = _demo_parser().parse_args(argv[1:])
        from .demo_traces import unpack
        out = Path(a.out)
        od = check_out_dir(out, a.force, "demo")
        opts = options_from_args(a)
        with tempfile.TemporaryDirectory(prefix="nsys-llm-explain-demo-") as td:
            trace = Path(td) / "demo_trace.sqlite"
            unpack(a.scenario, trace)
            return run_analysis(trace, od, opts, a.quiet, display_path=shown(str(out / "demo_trace.sqlite")),
                                extra_files=[trace])
    a = _parser().parse_args(argv)
    opts = options_from_args(a)   # validates every option and reads the option files before the analysis
    jobs = check_option("jobs", a.jobs)
    _check_address_space(a.traces)
    if _is_cluster(a.traces):
        return run_cluster(a.traces, Path(a.out), opts, a.force, a.quiet, jobs, a.scheduler)
    check_name(a.traces[0])
    od = check_out_dir(Path(a.out), a.force, "report", [a.traces[0]])
    if (jobs is not None or a.scheduler) and not a.quiet:
        error_line(f"{PROG}: note: ", "--jobs / --scheduler apply to several traces; one trace is analysed here, "
                   "in this process")
    return run_analysis(Path(a.traces[0]), od, opts, a.quiet)


def _ended(exc: BaseException, committed: Sequence[Path]) -> int:
    """The exit code of a run that raised ``exc``, after its one line on stderr."""
    signal_exc = interrupts.fired()   # a signal's exception may come back as another (an ImportError…)
    if signal_exc is not None or isinstance(exc, KeyboardInterrupt):   # SIGINT; SIGTERM / SIGHUP: Interrupted
        why = signal_exc or exc
        name, code = getattr(why, "name", "SIGINT"), getattr(why, "exit_code", 130)
        done = f"after the output was written to {committed[-1]}" if committed else "; no output was written"
        error_line(f"{PROG}: ", f"interrupted by {name} {done}".replace(" ;", ";"))
        return int(code)
    if isinstance(exc, ExplainerError):   # an option named by its flag here (the API names it by its keyword)
        error_line(f"{PROG}: error: ", exc.worded(flag_of) if isinstance(exc, OptionError) else exc)
        return exc.exit_code
    short = memory_shortage(exc)   # MemoryError, a thread or a library that could not start (ulimit -v), ENOMEM
    if short is not None:
        error_line(f"{PROG}: error: ", MEMORY_LINE + short)
        return 2
    if isinstance(exc, ImportError) and not os.environ.get("NSYS_LLM_EXPLAIN_DEBUG"):
        # a declared dependency (numpy, pyarrow, plotly, perfetto, regex, …) missing or broken in this environment:
        # nothing the trace did, nothing a traceback would help a user with
        error_line(f"{PROG}: error: ", f"a package it needs cannot be imported ({type(exc).__name__}: {exc}); "
                   "reinstall it: pip install --force-reinstall nsys-llm-explainer")
        return 2
    if isinstance(exc, BrokenPipeError):   # stdout closed by the reader (`| head`): fine once the output is complete
        silence_stdout()
        return 0 if committed else 1
    if not isinstance(exc, Exception) or os.environ.get("NSYS_LLM_EXPLAIN_DEBUG"):
        raise exc   # SystemExit (--help), or a traceback asked for
    error_line(f"{PROG}: internal error: ", f"{type(exc).__name__}: {exc} "   # still one line
               "(set NSYS_LLM_EXPLAIN_DEBUG=1 for a traceback)")
    return 1


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line (``argv``: the arguments after the program name); returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    del COMMITTED[:]
    previous = interrupts.install()
    show_warning, warnings.showwarning = warnings.showwarning, warning_line
    try:
        code = _main(argv)
        interrupts.check()   # a signal whose exception Python swallowed (a weakref callback) still ends the run
        return code
    except BaseException as exc:
        return _ended(exc, COMMITTED)
    finally:
        release_all()   # the --out lock of a run that ended before its staging (output.lock)
        interrupts.restore(previous)
        warnings.showwarning = show_warning


if __name__ == "__main__":
    sys.exit(main())
