"""The Perfetto packet layer of ``timeline.pftrace``: one sequence's ``Trace`` packets with interned names, written
in chunks (:class:`Encoder`); lanes that keep a track's slices a stack (:func:`lanes`); a cluster's ranks moved
to the aligned clock and concatenated (:func:`concat_ranks`)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import IO, Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

CHUNK = 20_000                 # packets serialized per write
_CLEARED = 1                   # TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
_NEEDS = 2                     # TracePacket.SEQ_NEEDS_INCREMENTAL_STATE


def _pb() -> Any:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2  # type: ignore[import-untyped]

    return perfetto_trace_pb2


# ------------------------------------------------------------------------------------------ protobuf wire format
# The packets are encoded here, field by field, as protobuf serializes them (fields in field-number order, every
# set field written, repeated fields unpacked): building ``perfetto_trace_pb2`` message objects cost ~4 µs a packet.
# Field numbers: perfetto's protos/perfetto/trace/trace_packet.proto, track_event/track_event.proto,
# track_event/debug_annotation.proto, track/track_descriptor.proto, interned_data/interned_data.proto;
# tests/render/test_perfetto.py reads the file back with ``perfetto_trace_pb2``.
_BYTE = [bytes((i,)) for i in range(128)]
_MASK64 = (1 << 64) - 1


def _varint(v: int) -> bytes:
    """``v`` as a base-128 varint (a negative int64 / int32 as its 64-bit two's complement, as protobuf writes it)."""
    if 0 <= v < 0x80:
        return _BYTE[v]
    v &= _MASK64
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _len(tag: bytes, body: bytes) -> bytes:
    """A length-delimited field: ``tag``, the length, ``body``."""
    return tag + _varint(len(body)) + body


def _utf8(s: object) -> bytes:
    """A string field's bytes: valid UTF-8 (a lone surrogate, which no encoder accepts, becomes `?`)."""
    return str(s).encode("utf-8", "replace")


_F64 = struct.Struct("<d").pack
_U64 = struct.Struct("<Q").pack
# TracePacket: timestamp 8, trusted_packet_sequence_id 10, track_event 11, interned_data 12, sequence_flags 13,
# track_descriptor 60
_TIMESTAMP, _SEQ_ID, _TRACK_EVENT, _INTERNED, _FLAGS = b"\x40", b"\x50", b"\x5a", b"\x62", b"\x68"
_DESCRIPTOR = b"\xe2\x03"
# TrackEvent: debug_annotations 4, type 9, name_iid 10, track_uuid 11, double_counter_value 44, flow_ids 47,
# terminating_flow_ids 48
_ANNOTATION, _TYPE, _NAME_IID, _TRACK_UUID = b"\x22", b"\x48", b"\x50", b"\x58"
_COUNTER_VALUE, _FLOW, _END_FLOW = b"\xe1\x02", b"\xf9\x02", b"\x81\x03"
_BEGIN, _END, _INSTANT, _COUNTER = b"\x48\x01", b"\x48\x02", b"\x48\x03", b"\x48\x04"   # TrackEvent.Type


class Encoder:
    """Packets of one sequence, written to ``out`` in chunks; slice / instant / counter helpers with interned
    names and argument names."""

    def __init__(self, out: IO[bytes], seq: int, uuid_base: int) -> None:
        self.out, self.next_uuid = out, uuid_base + 1
        self.seq = _SEQ_ID + _varint(seq)                # trusted_packet_sequence_id, in every packet
        self.packets: List[bytes] = []
        self.names: Dict[str, bytes] = {}                # name → its name_iid field
        self.arg_names: Dict[str, bytes] = {}            # argument name → its DebugAnnotation.name_iid field
        self.track_fields: Dict[int, bytes] = {}         # track uuid → its track_uuid field
        self._add(self.seq + _FLAGS + _BYTE[_CLEARED])   # the sequence's interned names start here

    def _add(self, packet: bytes) -> None:
        if len(self.packets) >= CHUNK:   # the chunk is full: written before the new packet is added
            self.flush()
        n = len(packet)
        self.packets.append(b"\x0a" + (_BYTE[n] if n < 0x80 else _varint(n)) + packet)   # Trace.packet (1)

    def flush(self) -> None:
        if self.packets:
            self.out.write(b"".join(self.packets))
            self.packets = []

    # ---------------------------------------------------------------- tracks
    def _descriptor(self, fields: bytes, after: bytes = b"") -> int:
        """A new track: a packet with its descriptor (uuid, then ``fields``, then ``after``, in field order)."""
        self.next_uuid += 1
        self._add(self.seq + _len(_DESCRIPTOR, b"\x08" + _varint(self.next_uuid) + fields + after))
        return self.next_uuid

    def track(self, name: str, parent: Optional[int] = None, counter_unit: Optional[str] = None) -> int:
        after = b"" if parent is None else b"\x28" + _varint(parent)                 # parent_uuid 5
        if counter_unit is not None:
            after += _len(b"\x42", _len(b"\x32", _utf8(counter_unit)))              # counter 8 { unit_name 6 }
        return self._descriptor(_len(b"\x12", _utf8(name)), after)                   # name 2

    def process(self, pid: int, name: str) -> int:     # process 3 { pid 1, process_name 6 }
        return self._descriptor(_len(b"\x1a", b"\x08" + _varint(int(pid)) + _len(b"\x32", _utf8(name))))

    def thread(self, pid: int, tid: int, name: str) -> int:   # thread 4 { pid 1, tid 2, thread_name 5 }
        return self._descriptor(_len(b"\x22", b"\x08" + _varint(int(pid)) + b"\x10" + _varint(int(tid))
                                     + _len(b"\x2a", _utf8(name))))

    # ---------------------------------------------------------------- events
    def _track(self, track: int) -> bytes:
        f = self.track_fields.get(track)
        if f is None:
            f = self.track_fields[track] = _TRACK_UUID + _varint(track)
        return f

    def _event(self, ts: int, event: bytes, interned: bytes = b"", flags: bytes = b"") -> None:
        """A packet of one track event (``interned``: the InternedData entries it brings; ``flags``: its
        sequence_flags field)."""
        n = len(event)   # (the lengths below 128 inline: this runs twice a slice)
        self._add(_TIMESTAMP + _varint(ts) + self.seq + _TRACK_EVENT + (_BYTE[n] if n < 0x80 else _varint(n)) + event
                  + (_len(_INTERNED, interned) if interned else b"") + flags)

    def _named(self, kind: bytes, ts: int, track: int, name: str, args: Sequence[Tuple[str, object]],
               more: bytes = b"") -> None:
        """A slice's begin or an instant: its name interned, its arguments, then ``more`` (flow fields)."""
        iid = self.names.get(name)
        interned = b""
        if iid is None:   # InternedData.event_names 2 { iid 1, name 2 }
            n = _varint(len(self.names) + 1)
            iid = self.names[name] = _NAME_IID + n
            interned = _len(b"\x12", b"\x08" + n + _len(b"\x12", _utf8(name)))
        event = kind + iid + self._track(track) + more
        if args:
            annotations, arg_names = self._args(args)
            event, interned = annotations + event, interned + arg_names
        self._event(ts, event, interned, _FLAGS + _BYTE[_NEEDS])

    def _args(self, args: Iterable[Tuple[str, object]]) -> Tuple[bytes, bytes]:
        """The DebugAnnotation fields of ``args`` and the InternedData entries of their new names."""
        annotations, interned = [], []
        for k, v in args:
            iid = self.arg_names.get(k)
            if iid is None:   # InternedData.debug_annotation_names 3 { iid 1, name 2 }
                n = _varint(len(self.arg_names) + 1)
                iid = self.arg_names[k] = b"\x08" + n
                interned.append(_len(b"\x1a", b"\x08" + n + _len(b"\x12", _utf8(k))))
            if isinstance(v, bool):                   # bool_value 2, int_value 4, double_value 5, string_value 6
                value = b"\x10" + _BYTE[v]
            elif isinstance(v, (int, np.integer)):
                value = b"\x20" + _varint(int(v))
            elif isinstance(v, float):
                value = b"\x29" + _F64(v)
            else:
                value = _len(b"\x32", _utf8(v))
            annotations.append(_len(_ANNOTATION, iid + value))
        return b"".join(annotations), b"".join(interned)

    def slice(self, t0: int, t1: int, track: int, name: str, args: Sequence[Tuple[str, object]] = (),
              flow: int = 0, end_flow: int = 0) -> None:
        more = (_FLOW + _U64(flow) if flow else b"") + (_END_FLOW + _U64(end_flow) if end_flow else b"")
        self._named(_BEGIN, t0, track, name, args, more)
        self._event(max(t1, t0), _END + self._track(track))

    def instant(self, ts: int, track: int, name: str, args: Sequence[Tuple[str, object]] = ()) -> None:
        self._named(_INSTANT, ts, track, name, args)

    def counter(self, ts: int, track: int, value: float) -> None:
        self._event(ts, _COUNTER + self._track(track) + _COUNTER_VALUE + _F64(float(value)))


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
