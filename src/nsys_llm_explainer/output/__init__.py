"""Owned, atomic output directories (report, demo, compare and cluster outputs): a manifest of the files written,
one atomic commit, nothing created, replaced or removed outside the real ``--out``. The rules and their tests:
docs/SECURITY.md, "2. Outputs: the tool writes only what it owns" and "Containment, memory errors, API"
(classes 1, 3, 4).
"""

from __future__ import annotations

from .owned import MANIFEST, OLD_PREFIX, STAGING_PREFIX, OutDir, check_out_dir
from .staging import COMMITTED, Staging

__all__ = ["COMMITTED", "MANIFEST", "OLD_PREFIX", "STAGING_PREFIX", "OutDir", "Staging", "check_out_dir"]
