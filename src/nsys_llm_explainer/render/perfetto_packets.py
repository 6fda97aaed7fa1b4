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
        self.names: Dict[str, Tuple[int, bytes]] = {}    # name → its iid, its name_iid field
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
        known = self.names.get(name)
        interned = b""
        if known is None:   # InternedData.event_names 2 { iid 1, name 2 }
            n = _varint(len(self.names) + 1)
            known = self.names[name] = (len(self.names) + 1, _NAME_IID + n)
            interned = _len(b"\x12", b"\x08" + n + _len(b"\x12", _utf8(name)))
        event = kind + known[1] + self._track(track) + more
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

    def slices(self, t0: np.ndarray, t1: np.ndarray, tracks: np.ndarray, name: np.ndarray,
               names: Sequence[str]) -> None:
        """:meth:`slice` on each row (``names[name[i]]`` its name; no arguments or flows), in bulk: the packets laid
        out as byte columns (constant fields; varints of timestamps, track uuids and name ids) and joined in row
        order, ``CHUNK`` packets a write; a packet that interns a new name comes from :meth:`slice`."""
        self.flush()
        t1 = np.maximum(t1, t0)
        first = np.full(len(names), -1, np.int64)       # the row where each name in use first comes
        used, at = np.unique(name, return_index=True)
        first[used] = at
        iid = np.zeros(len(names), np.int64)
        new = np.zeros(len(t0), bool)                   # rows whose begin packet interns their name
        ahead: Dict[str, int] = {}                      # the iids slice() will give the new names, in row order
        for j in used[np.argsort(at)].tolist():
            known = self.names.get(names[j])
            if known is None and names[j] not in ahead:
                ahead[names[j]] = len(self.names) + len(ahead) + 1
                new[first[j]] = True
            iid[j] = known[0] if known is not None else ahead[names[j]]
        block = max(CHUNK // 2, 1)
        for a in range(0, len(t0), block):
            rows = slice(a, a + block)
            self._slice_block(t0[rows], t1[rows], tracks[rows], iid[name[rows]], new[rows], name[rows], names)

    def _slice_block(self, t0: np.ndarray, t1: np.ndarray, tracks: np.ndarray, iid: np.ndarray, new: np.ndarray,
                     name: np.ndarray, names: Sequence[str]) -> None:
        """One block of :meth:`slices` (``iid``: each row's name id; ``new``: the rows whose name is interned at
        them): each row's begin and end packets as masked byte columns, the kept bytes read in row order."""
        n, seq = len(t0), np.frombuffer(self.seq, np.uint8)
        ts0, ts1, tr, ni = _varints(t0), _varints(t1), _varints(tracks), _varints(iid)
        begin = [_const(_BEGIN + _NAME_IID, n), ni, _const(_TRACK_UUID, n), tr]     # TrackEvent fields
        end = [_const(_END + _TRACK_UUID, n), tr]
        flags = _const(_FLAGS + _BYTE[_NEEDS], n)
        begins = _packet(ts0, seq, begin, flags)
        cols = begins + _packet(ts1, seq, end, None)
        data = np.concatenate([d for d, _ in cols], axis=1)
        keep = np.concatenate([k for _, k in cols], axis=1)
        width = sum(d.shape[1] for d, _ in begins)
        keep[new, :width] = False                       # those begin packets come from slice()
        flat = data[keep].tobytes()
        at = np.concatenate(([0], np.cumsum(keep.sum(axis=1))))
        out, done = [], 0
        for i in np.nonzero(new)[0].tolist():
            out.append(flat[done:at[i]])
            self._named(_BEGIN, int(t0[i]), int(tracks[i]), names[int(name[i])], ())
            out += self.packets
            self.packets, done = [], int(at[i])
        out.append(flat[done:])
        self.out.write(b"".join(out))

    def instant(self, ts: int, track: int, name: str, args: Sequence[Tuple[str, object]] = ()) -> None:
        self._named(_INSTANT, ts, track, name, args)

    def counter(self, ts: int, track: int, value: float) -> None:
        self._event(ts, _COUNTER + self._track(track) + _COUNTER_VALUE + _F64(float(value)))


def _varints(v: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Each value's varint (:func:`_varint`) as a row of 10 bytes and the mask of the bytes it uses."""
    u = v.astype(np.int64).view(np.uint64)[:, None] >> (np.arange(10, dtype=np.uint64) * np.uint64(7))
    size = 1 + (u[:, 1:] != 0).sum(axis=1)
    j = np.arange(10)
    keep = j < size[:, None]
    more = np.where(j < size[:, None] - 1, np.uint64(0x80), np.uint64(0))   # the continuation bit
    return ((u & np.uint64(0x7F)) | more).astype(np.uint8), keep


def _const(b: bytes, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """``b`` on each of ``n`` rows, all its bytes used."""
    return np.broadcast_to(np.frombuffer(b, np.uint8), (n, len(b))), np.ones((n, len(b)), bool)


Column = Tuple[np.ndarray, np.ndarray]


def _packet(ts: Column, seq: np.ndarray, event: List[Column], flags: Optional[Column]) -> List[Column]:
    """The columns of one track-event packet a row (Trace.packet: timestamp, sequence id, track_event, flags;
    every length here under 128, one byte)."""
    n = ts[0].shape[0]
    ev_len = sum(k.sum(axis=1) for _, k in event)
    body_len = 1 + ts[1].sum(axis=1) + len(seq) + 2 + ev_len + (flags[0].shape[1] if flags is not None else 0)
    cols = [(np.stack((np.full(n, 0x0A), body_len), axis=1).astype(np.uint8), np.ones((n, 2), bool)),
            _const(_TIMESTAMP, n), ts, _const(bytes(seq), n),
            (np.stack((np.full(n, 0x5A), ev_len), axis=1).astype(np.uint8), np.ones((n, 2), bool))]
    return cols + event + ([flags] if flags is not None else [])


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
