"""The typed cluster result: per-file facts, clock alignment, per-device rows, matched collectives, claims;
``to_dict()`` is ``cluster.json``, ``from_dict()`` reads it back. Built from the per-file summaries alone, so it is
the same whichever executor produced them (docs/CLUSTER.md)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional, Sequence, Tuple

from .. import __version__
from ..analyses.comms.nccl import MAX_END_SPREAD_SHARE
from ..jsonable import NONE_OMITTED, FieldsJson, built, check_schema, dataclass_from_json
from .align import Alignment, align
from .claims import RankClaim, late_group, late_little, late_unjudged, make_claims
from .collectives import MATCH_ORDER, CollectivesResult, match_collectives, p2p_many, p2p_only
from .summary import DeviceRow, FileSummary, device_rank, file_names

SCHEMA_VERSION = "1.0"
#: what :meth:`ClusterResult.from_dict`'s messages call the dict
JSON = "cluster.json"


@dataclass(frozen=True)
class ClusterResult(FieldsJson):
    """The cluster view of several files (docs/CLUSTER.md)."""

    schema_version: str = field(default=SCHEMA_VERSION, init=False)
    tool_version: str
    files: Tuple[FileSummary, ...]     # without their devices' rows and NCCL kernels
    alignment: Alignment
    devices: Tuple[DeviceRow, ...]
    collectives: CollectivesResult
    claims: Tuple[RankClaim, ...]
    warnings: Tuple[str, ...]
    #: the late rank and the ranks late together with it when that alone withheld the late-arriver claim
    #: (claims.late_group; docs/CLUSTER.md); None (not written) otherwise
    late_group: Optional[Tuple[str, ...]] = field(default=None, metadata=NONE_OMITTED)
    #: why no rank was judged late at the collectives on aligned clocks with matched collectives (claims.late_unjudged:
    #: an issue-order name, kernels that do not end together, a split name, point-to-point only); None (not written)
    #: when it was judged
    late_unjudged: Optional[str] = field(default=None, metadata=NONE_OMITTED)
    #: why no late-arriver claim was made although its other checks hold: the waiting the late rank caused is too
    #: little (claims.late_little), in words; None (not written) otherwise
    late_little: Optional[str] = field(default=None, metadata=NONE_OMITTED)
    #: the point-to-point (send / recv) names on more than two ranks left out of the arrival figures while the late
    #: arriver was judged at the other names (sorted); None (not written) otherwise
    p2p_left_out: Optional[Tuple[str, ...]] = field(default=None, metadata=NONE_OMITTED)

    @classmethod
    def from_dict(cls, d: Any, where: str = JSON) -> ClusterResult:
        """The result of a ``cluster.json`` dict (``to_dict()``, or the file parsed): ``ClusterResult.from_dict(
        r.to_dict()) == r``. A dict of another ``schema_version``, or one missing or malforming a part, raises
        :class:`errors.InputError` (one line naming the key)."""
        check_schema(d, where, SCHEMA_VERSION, "cluster schema", "run the cluster command again")
        return built(lambda: dataclass_from_json(cls, d, where), where, "a cluster result")


def _words(coll: CollectivesResult) -> str:
    """'and issue order' / 'and time': how the warnings name the matching."""
    return "and issue order" if coll.matching in (None, MATCH_ORDER) else "and time"


def build_result(files: Sequence[FileSummary]) -> ClusterResult:
    al = align(files)
    coll: CollectivesResult = match_collectives(files, al)
    devices = [replace(d, rank=device_rank(name, len(f.device_rows), d.device_id))
               for f, name in zip(files, file_names(files)) for d in f.device_rows]
    warnings = []
    if not al.aligned:
        warnings.append(f"Clocks of the files cannot be aligned ({al.reason}); no cross-rank timing claim is made.")
    if al.disjoint():
        warnings.append("Every file has a session start, but their captured activity does not overlap on them: the "
                        "files may come from different runs, so no rank is compared with the others (no slowest-"
                        "steps or least-busy claim).")
    if len(files) < 2:
        warnings.append("Only one file: nothing to compare across files.")
    if coll.split_names:
        ex = coll.split_names[0]
        warnings.append(
            f"{len(coll.split_names)} (rank, collective) pair(s) run on several CUDA streams (e.g. {ex.name} on "
            f"{ex.rank}: streams {', '.join(map(str, ex.streams))}): the collective name is shared by several "
            "communicators (each runs on its own stream), which the export does not name, so matching by name "
            f"{_words(coll)} mixes them; no late-arriver claim is made.")
    if coll.timed and coll.end_spread_p50_ns > int(coll.skew_p50_ns * MAX_END_SPREAD_SHARE):
        warnings.append(
            f"Matched {coll.kind()} kernels do not end together (median end spread {coll.end_spread_p50_ns:,} ns vs "
            f"median skew {coll.skew_p50_ns:,} ns, the longest kernel less the shortest): matching by collective "
            f"name {_words(coll)} may pair kernels of different collectives (e.g. of different communicators, which "
            "the export does not name), or the clocks disagree; no late-arriver claim is made.")
    fb = coll.order_fallbacks()
    if fb:
        warnings.append(
            f"On the aligned clocks no kernel of {len(fb)} collective name(s) (e.g. {fb[0]}) on some rank overlaps "
            "one of the same name on the rank with the most, so these were matched by issue order (the k-th kernel "
            "on every rank); the kernels of one collective run at the same time, so these are different collectives "
            "(other communicators, or captures sharing none) or the clocks disagree; no late-arriver claim is made.")
    p2p = [r for r in coll.by_name if p2p_many(r.name, r.ranks)]
    if p2p:
        warnings.append(
            f"{len(p2p)} point-to-point (send / recv) collective name(s) run on more than two ranks (e.g. "
            f"{p2p[0].name} on {p2p[0].ranks}): a send/recv kernel exchanges with its own peers (a ring's neighbours, "
            "a pipeline pair, or every rank in an all-to-all), which kernel names do not tell apart, so an instance "
            "need not be one collective of its ranks: they are "
            "left out of the ranks' matched counts, waits and last arrivals (their time spinning still counts in "
            "the net busy %).")
    if p2p_only(coll):
        warnings.append(
            "Every matched instance is point-to-point (send / recv): a receiver waits for its sender's data, in a "
            "one-way hand-off (a pipeline stage, a KV-cache transfer) or in an exchange of send/recv pairs, which "
            "kernel names do not tell apart; no late-arriver claim is made (the waits stay in the tables).")
    group = late_group(coll)
    if group:
        r = next(x for x in coll.ranks if x.rank == group[0])
        lw = group[1:]
        more = f", {len(lw) - 8} more" if len(lw) > 8 else ""
        warnings.append(
            f"{r.rank} arrived last at {r.last_arrival_count} matched {coll.kind()} collectives, but at half or more "
            f"of them {len(lw)} other rank(s) arrived within a quarter of its lateness ({', '.join(lw[:8])}{more}): "
            "those ranks were late together (their node, its network link, an input they share), and the others "
            f"would have waited for them had {r.rank} been on time; no late-arriver claim names one rank.")
    claims = make_claims(coll, devices, al.disjoint())
    rows = tuple(replace(f, offset_ns=o, device_rows=(), nccl=()) for f, o in zip(files, al.offsets_ns))
    return ClusterResult(__version__, rows, al, tuple(devices), coll, tuple(claims), tuple(warnings),
                         group or None, late_unjudged(coll), late_little(coll, devices),
                         tuple(sorted(r.name for r in p2p)) if p2p and coll.timed and not p2p_only(coll) else None)
