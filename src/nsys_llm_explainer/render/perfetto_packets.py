"""The Perfetto packet layer of ``timeline.pftrace``: one sequence's ``Trace`` packets with interned names, written
in chunks (:class:`Encoder`); lanes that keep a track's slices a stack (:func:`lanes`); a cluster's ranks moved
to the aligned clock and concatenated (:func:`concat_ranks`)."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

CHUNK = 20_000                 # packets serialized per write
_CLEARED = 1                   # TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
_NEEDS = 2                     # TracePacket.SEQ_NEEDS_INCREMENTAL_STATE


def _pb() -> Any:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2  # type: ignore[import-untyped]

    return perfetto_trace_pb2


def text(s: object) -> str:
    """A name as a protobuf string: valid UTF-8 (a lone surrogate, which no encoder accepts, becomes `?`)."""
    t = str(s)
    try:
        t.encode("utf-8")
        return t
    except UnicodeEncodeError:
        return t.encode("utf-8", "replace").decode("utf-8")


class Encoder:
    """Packets of one sequence, written to ``out`` in chunks; slice / instant / counter helpers with interned
    names and argument names."""

    def __init__(self, out: IO[bytes], seq: int, uuid_base: int) -> None:
        self.pb = _pb()
        self.te = self.pb.TrackEvent
        self.out, self.seq, self.next_uuid = out, seq, uuid_base + 1
        self.trace = self.pb.Trace()
        self.names: Dict[str, int] = {}
        self.arg_names: Dict[str, int] = {}
        p = self._packet()
        p.sequence_flags = _CLEARED   # the sequence's interned names start here

    def _packet(self) -> Any:
        if len(self.trace.packet) >= CHUNK:   # the chunk is full: written before the new packet is added
            self.flush()
        p = self.trace.packet.add()
        p.trusted_packet_sequence_id = self.seq
        return p

    def flush(self) -> None:
        if len(self.trace.packet):
            self.out.write(self.trace.SerializeToString())
            self.trace = self.pb.Trace()

    # ---------------------------------------------------------------- tracks
    def _descriptor(self) -> Tuple[int, Any]:
        """A new track's uuid and its descriptor (in a new packet)."""
        self.next_uuid += 1
        d = self._packet().track_descriptor
        d.uuid = self.next_uuid
        return self.next_uuid, d

    def track(self, name: str, parent: Optional[int] = None, counter_unit: Optional[str] = None) -> int:
        u, d = self._descriptor()
        d.name = text(name)
        if parent is not None:
            d.parent_uuid = parent
        if counter_unit is not None:
            d.counter.unit_name = counter_unit
        return u

    def process(self, pid: int, name: str) -> int:
        u, d = self._descriptor()
        d.process.pid = int(pid)
        d.process.process_name = text(name)
        return u

    def thread(self, pid: int, tid: int, name: str) -> int:
        u, d = self._descriptor()
        d.thread.pid = int(pid)
        d.thread.tid = int(tid)
        d.thread.thread_name = text(name)
        return u

    # ---------------------------------------------------------------- events
    def _event(self, ts: int, track: int, kind: int) -> Tuple[Any, Any]:
        p = self._packet()
        p.timestamp = ts
        e = p.track_event
        e.type = kind
        e.track_uuid = track
        return p, e

    def _name(self, p: Any, e: Any, name: str) -> None:
        iid = self.names.get(name)
        if iid is None:
            iid = self.names[name] = len(self.names) + 1
            p.interned_data.event_names.add(iid=iid, name=text(name))
        p.sequence_flags = _NEEDS
        e.name_iid = iid

    def _args(self, p: Any, e: Any, args: Iterable[Tuple[str, object]]) -> None:
        for k, v in args:
            iid = self.arg_names.get(k)
            if iid is None:
                iid = self.arg_names[k] = len(self.arg_names) + 1
                p.interned_data.debug_annotation_names.add(iid=iid, name=k)
            a = e.debug_annotations.add(name_iid=iid)
            if isinstance(v, bool):
                a.bool_value = v
            elif isinstance(v, (int, np.integer)):
                a.int_value = int(v)
            elif isinstance(v, float):
                a.double_value = v
            else:
                a.string_value = text(v)

    def slice(self, t0: int, t1: int, track: int, name: str, args: Sequence[Tuple[str, object]] = (),
              flow: int = 0, end_flow: int = 0) -> None:
        p, e = self._event(t0, track, 1)           # TYPE_SLICE_BEGIN
        self._name(p, e, name)
        if args:
            self._args(p, e, args)
        if flow:
            e.flow_ids.append(flow)
        if end_flow:
            e.terminating_flow_ids.append(end_flow)
        self._event(max(t1, t0), track, 2)         # TYPE_SLICE_END

    def instant(self, ts: int, track: int, name: str, args: Sequence[Tuple[str, object]] = ()) -> None:
        p, e = self._event(ts, track, 3)           # TYPE_INSTANT
        self._name(p, e, name)
        if args:
            self._args(p, e, args)

    def counter(self, ts: int, track: int, value: float) -> None:
        _, e = self._event(ts, track, 4)           # TYPE_COUNTER
        e.double_counter_value = float(value)


def lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane of each slice (rows in start order) such that the slices of one lane nest or follow each other (a
    track's begin/end events pair up as a stack): all 0 when no slice overlaps the next (checked at once), else
    first fit over the lanes' open-slice stacks."""
    n = start.shape[0]
    out = np.zeros(n, np.int64)
    if n < 2 or bool((start[1:] >= np.maximum.accumulate(end)[:-1]).all()):
        return out
    stacks: List[List[int]] = []
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist())):
        e = max(e, s)
        for j, st in enumerate(stacks):
            while st and st[-1] <= s:
                st.pop()
            if not st or e <= st[-1]:
                st.append(e)
                out[i] = j
                break
        else:
            stacks.append([e])
            out[i] = len(stacks) - 1
    return out


def shift_timestamps(data: bytes, offset_ns: int) -> bytes:
    """A rank's serialized trace with every packet timestamp moved by ``offset_ns`` (the cluster's aligned clock)."""
    if offset_ns == 0:
        return data
    tr = _pb().Trace.FromString(data)
    for p in tr.packet:
        if p.HasField("timestamp"):
            p.timestamp = p.timestamp + offset_ns
    return bytes(tr.SerializeToString())


def concat_ranks(parts: Sequence[Tuple[Path, int]], out: IO[bytes]) -> int:
    """The cluster's timeline: each rank's ``timeline.pftrace`` (written in ``rank`` mode), its timestamps moved by
    its clock offset, concatenated (a Trace is its packets: serialized traces concatenate). Returns the ranks
    written."""
    n = 0
    for path, offset in parts:
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        out.write(shift_timestamps(data, int(offset)))
        n += 1
    return n
