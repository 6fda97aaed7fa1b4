"""Clock alignment of several exports: each file's offset onto the cluster clock (UTC minus the earliest session
start), or why the files cannot be aligned (docs/CLUSTER.md, "Clock alignment")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from ..jsonable import FieldsJson
from .summary import FileSummary


@dataclass(frozen=True)
class Alignment(FieldsJson):
    aligned: bool
    reason: Optional[str]
    base_utc_ns: Optional[int]
    offsets_ns: Tuple[Optional[int], ...]    # per file, in input order (None when not aligned)

    def disjoint(self) -> bool:
        """Every file has a session start, yet the files' activity does not overlap on them: not one run (or host
        clocks that disagree by more than a capture), so no rank is compared with the others (docs/CLUSTER.md)."""
        return not self.aligned and self.base_utc_ns is not None


def align(files: Sequence[FileSummary]) -> Alignment:
    none = tuple(None for _ in files)
    missing = [f.label for f in files if f.clock.utc_epoch_ns is None]
    if missing:
        return Alignment(False, f"no session start time (TARGET_INFO_SESSION_START_TIME.utcEpochNs) in "
                                f"{', '.join(missing)}", None, none)
    base = min(int(f.clock.utc_epoch_ns) for f in files)  # type: ignore[arg-type]
    offs = tuple((0 if f.clock.normalized else int(f.clock.utc_epoch_ns)) - f.clock.shift_ns - base  # type: ignore
                 for f in files)
    spans = [(f.clock.start_ns + o, f.clock.end_ns + o) for f, o in zip(files, offs)
             if f.clock.start_ns is not None and f.clock.end_ns is not None]
    if len(spans) >= 2 and max(s for s, _ in spans) >= min(e for _, e in spans):
        return Alignment(False, "the files' captured activity does not overlap in time after aligning their "
                                "session start times (not one run, or host clocks disagree)", base, none)
    return Alignment(True, None, base, offs)
