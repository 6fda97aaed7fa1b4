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
