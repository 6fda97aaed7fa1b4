"""Owned, atomic output directories (report, demo, compare and cluster outputs): a manifest of the files written,
one atomic commit, nothing created, replaced or removed outside the real ``--out``. The rules and their tests:
docs/SECURITY.md, "2. Outputs: the tool writes only what it owns" and the third sweep's table (items 1, 3, 4).
"""

from __future__ import annotations

from .owned import (
    KIND_DIRS,
    KIND_FILES,
    MANIFEST,
    OLD_PREFIX,
    STAGING_PREFIX,
    TOOL,
    OutDir,
    check_out_dir,
    first_foreign,
    link_on_the_way,
    read_manifest,
)
from .staging import COMMITTED, Staging

__all__ = ["COMMITTED", "KIND_DIRS", "KIND_FILES", "MANIFEST", "OLD_PREFIX", "STAGING_PREFIX", "TOOL", "OutDir",
           "Staging", "check_out_dir", "first_foreign", "link_on_the_way", "read_manifest"]
