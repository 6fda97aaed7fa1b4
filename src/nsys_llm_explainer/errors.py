"""Error types. Each carries a one-line, user-facing message."""

from __future__ import annotations

TYPE_CHECKING = False   # typing is not imported at run time: this module loads before the signal handlers
if TYPE_CHECKING:
    from typing import Callable


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
