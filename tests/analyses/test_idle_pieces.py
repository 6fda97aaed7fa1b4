"""Hand-computed checks of the interval helpers behind idle-cause attribution and the device timelines
(the fast paths must give exactly the answers of the definitions)."""

from __future__ import annotations

import numpy as np

from nsys_llm_explainer.analyses.idle.bins import _idle_by_kind
from nsys_llm_explainer.analyses.idle.pieces import cut, index_runs, touching, within
from nsys_llm_explainer.model import intervals as iv
from nsys_llm_explainer.vocabulary.cause_kinds import KINDS


def a(*x: int) -> np.ndarray:
    return np.array(x, np.int64)


def test_union_first_and_last_rows() -> None:
    # rows (sorted by start): [0,10) [2,5) [3,10) [10,12) [20,21) [20,25) [22,23)
    u = iv.union(a(0, 2, 3, 10, 20, 20, 22), a(10, 5, 10, 12, 21, 25, 23))
    assert u.start.tolist() == [0, 20]
    assert u.end.tolist() == [12, 25]
    assert u.first_row.tolist() == [0, 4]
    assert u.last_row.tolist() == [3, 5]      # the earliest row reaching the block's end


def test_union_every_row_its_own_block_and_backwards_rows() -> None:
    u = iv.union(a(0, 5, 9), a(3, 7, 8))     # the last row ends before it starts: counts as [9, 9]
    assert (u.start.tolist(), u.end.tolist()) == ([0, 5, 9], [3, 7, 9])
    assert u.first_row.tolist() == [0, 1, 2] and u.last_row.tolist() == [0, 1, 2]


def test_touching_closed_gaps() -> None:
    gs, ge = a(10, 30), a(20, 40)
    # [0,9] misses; [0,10] touches at 10; [21,29] misses; [20,21] touches; [41,50] misses; [35,36] inside;
    # backwards row start 50, end 35 spans [35, 50]: touches
    s, e = a(0, 0, 21, 20, 41, 35, 50), a(9, 10, 29, 21, 50, 36, 35)
    assert touching(gs, ge, s, e).tolist() == [False, True, False, True, False, True, True]


def test_within_and_index_runs() -> None:
    t = a(1, 4, 5, 9, 12, 15)
    assert within(t, a(4, 12), a(9, 13)).tolist() == [1, 2, 4]      # [4, 9) and [12, 13)
    assert index_runs(a(3, 10, 20), a(2, 0, 3)).tolist() == [3, 4, 20, 21, 22]


def test_cut_pieces() -> None:
    # gap 0 [0,10) queued from 4; gap 1 [20,30) never queued (31 = end + 1); cut points 2, 4 (dup), 25,
    # 30 (the gap end: no cut), 15 (outside every gap)
    t0, t1, p = cut(a(0, 20), a(10, 30), a(4, 31), [a(2, 4, 25, 30, 15)])
    assert t0.tolist() == [0, 2, 4, 20, 25]
    assert t1.tolist() == [2, 4, 10, 25, 30]
    assert p.tolist() == [0, 0, 0, 1, 1]


def test_idle_by_kind_splits_pieces_across_bins() -> None:
    edges = a(0, 10, 20, 30)
    q, h = KINDS.index("queued"), KINDS.index("host_cpu")
    # queued [2, 25) spans three bins; host_cpu [25, 30) and [8, 10) inside bins
    t0, ln, kind = a(2, 25), a(23, 5), np.array([q, h], np.int8)
    out = _idle_by_kind(edges, t0, ln, kind)
    assert out == {"queued": (8, 10, 5), "host_cpu": (0, 0, 5)}
    out = _idle_by_kind(edges, a(8, 10), a(2, 10), np.array([h, h], np.int8))
    assert out == {"host_cpu": (2, 10, 0)}
