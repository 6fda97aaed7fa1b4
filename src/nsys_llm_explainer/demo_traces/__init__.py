"""The demo's traces: a few synthetic scenarios, pre-generated and shipped xz-compressed (``NAME.sqlite.xz``).

The generator that writes them lives in ``tests/synth`` (it is a test tool, not part of the package);
``scripts/build_demo_traces.py`` regenerates these files from it, and ``tests/cli/test_demo_traces.py`` fails when
a shipped copy no longer has the rows the generator writes.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path
from typing import Tuple

from ..errors import InputError

SUFFIX = ".sqlite.xz"


def names() -> Tuple[str, ...]:
    """The shipped scenarios, sorted (what ``demo --scenario`` offers)."""
    return tuple(sorted(f.name[:-len(SUFFIX)] for f in resources.files(__name__).iterdir()
                        if f.name.endswith(SUFFIX)))


def unpack(name: str, dest: Path) -> None:
    """Write the trace of shipped scenario ``name`` to ``dest``, a file that must not exist yet."""
    try:
        import lzma
    except ImportError:   # a Python built without liblzma
        raise InputError("this Python has no lzma module (it was built without liblzma), which the demo needs to "
                         "unpack its traces; use a Python built with it") from None
    with resources.files(__name__).joinpath(name + SUFFIX).open("rb") as packed, lzma.open(packed) as src, \
            open(dest, "xb") as out:
        shutil.copyfileobj(src, out)
