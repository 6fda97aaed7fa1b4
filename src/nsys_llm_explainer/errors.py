"""Error types. Each carries a one-line, user-facing message."""

from __future__ import annotations

TYPE_CHECKING = False   # typing is not imported at run time: this module loads before the signal handlers
if TYPE_CHECKING:
    from typing import Callable, Optional


class ExplainerError(Exception):
    """Base class: anything the CLI turns into a one-line message."""

    exit_code = 1


class InputError(ExplainerError):
    """The input trace (or an option) is unusable: exit code 2."""

    exit_code = 2


class OptionError(InputError):
    """A bad option value (exit code 2), raised where it is found (options, option files, an analysis that
    meets the trace) with the option's *name* — an :class:`options.Options` field or a run option such as
    ``jobs`` — never its flag. The boundary words it: ``str()`` names the keyword (the Python API:
    ``step_marker is not a valid regular expression: …``), the command line the flag through
    :meth:`worded` (``--step-marker is not …``). The message is ``<name><sep><detail>``."""

    def __init__(self, option: str, detail: str, sep: str = " ") -> None:
        super().__init__(option, detail, sep)   # args: pickled as they are (cluster workers re-raise it)
        self.option, self.detail, self.sep = option, detail, sep

    def worded(self, name_of: Callable[[str], str]) -> str:
        """The message with each option named by ``name_of(option)`` (a flag, a keyword)."""
        return f"{name_of(self.option)}{self.sep}{self.detail}"

    def __str__(self) -> str:
        return self.worded(str)


class OptionConflict(OptionError):
    """Two options given together that exclude each other (``give either categories or categories_file``)."""

    def __init__(self, option: str, other: str) -> None:
        InputError.__init__(self, option, other)
        self.option, self.other, self.detail, self.sep = option, other, "", " "

    def worded(self, name_of: Callable[[str], str]) -> str:
        return f"give either {name_of(self.option)} or {name_of(self.other)}, not both"


class OutputError(ExplainerError):
    """The output directory cannot be used: exit code 2."""

    exit_code = 2


class WorkerError(ExplainerError):
    """A cluster run lost what ran its analyses — a worker process killed (the out-of-memory killer), a Dask
    scheduler that does not answer, Dask workers lost mid-run — and the message names what failed and the files
    not analysed: exit code 2 (:mod:`cluster.workers`)."""

    exit_code = 2


class Interrupted(KeyboardInterrupt):
    """A termination signal (SIGINT, SIGTERM, SIGHUP) turned into an exception in the main thread, so that
    ``finally`` blocks remove temporary and staging directories; exit code 128 + the signal number."""

    def __init__(self, signum: int, name: str) -> None:
        super().__init__(name)
        self.signum = signum
        self.name = name
        self.exit_code = 128 + signum


#: exit code of ``nsys-llm-explain compare --fail-on-regression PCT`` when a NEW trace is slower than BASE by
#: more than PCT % on the headline metric (distinct from 0 ok, 1 internal error, 2 bad input, 130 interrupted)
EXIT_REGRESSION = 3
#: exit code of ``compare --fail-on-regression PCT`` when a pair cannot be compared (a capture with no GPU work,
#: too short, too different): the gate fails closed unless ``--allow-incomparable`` (:mod:`comparison.gate`)
EXIT_INCOMPARABLE = 4


class OptionalDependencyError(ImportError):
    """An optional dependency is missing; the message names the ``pip install`` extra that provides it."""


#: words of an exception (or one it came from) that mean the process ran out of memory or address space
_MEMORY_WORDS = ("cannot allocate memory", "failed to map segment", "out of memory", "memory allocation",
                 "can't start new thread", "cannot allocate", "std::bad_alloc")
ENOMEM = 12


def memory_shortage(exc: BaseException) -> Optional[str]:
    """What ran out when ``exc`` (or an exception it was raised from) means the process had not enough memory or
    address space — a ``MemoryError``, a thread that could not start, a library that could not be mapped (numpy
    under ``ulimit -v``), ``ENOMEM`` from the system (a worker process that cannot start) — as words for a
    message; None for any other error."""
    seen = 0
    e: Optional[BaseException] = exc
    while e is not None and seen < 10:
        seen += 1
        if isinstance(e, MemoryError):
            return "Python could not allocate memory (MemoryError)"
        if isinstance(e, OSError) and e.errno == ENOMEM:
            return f"the system refused memory ({e.strerror or 'ENOMEM'})"
        text = str(e).lower()
        if isinstance(e, (RuntimeError, ImportError, OSError)) and any(w in text for w in _MEMORY_WORDS):
            if "thread" in text:
                return "a thread could not start"
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            what = "a library could not be loaded" if isinstance(e, ImportError) else type(e).__name__
            return f"{what} ({first[:160]})"
        e = e.__cause__ or e.__context__
    return None


#: the one line of a run that ran out of memory (the command line, its exit code 2): ``MEMORY_LINE + why``
MEMORY_LINE = "not enough memory to analyse this trace: "
#: the least address space (bytes) the command line starts with: below it, loading numpy, pyarrow and the analysis
#: threads fails at places that do not all raise (numpy's sort can crash on a failed allocation), so the run is
#: refused first (measured: the demo trace needs about 280 MB of address space, crashes were seen at 117 MB)
MIN_ADDRESS_SPACE = 384 << 20
#: and per byte of the largest input trace (its tables are read into arrays several times their packed size)
ADDRESS_SPACE_PER_TRACE_BYTE = 8


def address_space_limit() -> Optional[int]:
    """The address-space limit (``ulimit -v``, soft) in bytes; None when there is none (or it cannot be read)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError, AttributeError):
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else soft


def address_space_shortage(trace_bytes: int = 0) -> Optional[str]:
    """Why the address-space limit (``ulimit -v``) is too small to start, or None (no limit, or enough)."""
    soft = address_space_limit()
    need = MIN_ADDRESS_SPACE + ADDRESS_SPACE_PER_TRACE_BYTE * max(trace_bytes, 0)
    if soft is None or soft >= need:
        return None
    return (f"the address space is limited to {soft >> 20} MB (ulimit -v {soft >> 10}); at least about "
            f"{-(-need >> 20)} MB are needed here: raise the limit")


def cwd_gone(path: str) -> bool:
    """``path`` is relative and the working directory it is relative to was deleted (``os.getcwd()`` fails)."""
    import os

    if os.path.isabs(path):
        return False
    try:
        os.getcwd()
    except FileNotFoundError:
        return True
    return False


#: what a message adds when :func:`cwd_gone`
CWD_GONE = "it is a relative path and the working directory no longer exists (give an absolute path)"
