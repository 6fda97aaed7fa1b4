"""Error types. Each carries a one-line, user-facing message."""

from __future__ import annotations


class ExplainerError(Exception):
    """Base class: anything the CLI turns into a one-line message."""

    exit_code = 1


class InputError(ExplainerError):
    """The input trace (or an option) is unusable: exit code 2."""

    exit_code = 2


class OutputError(ExplainerError):
    """The output directory cannot be used: exit code 2."""

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


class OptionalDependencyError(ImportError):
    """An optional dependency is missing; the message names the ``pip install`` extra that provides it."""
