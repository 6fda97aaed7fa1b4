"""Kernel categories: what kind of work the GPU time went to (GEMM, attention, NCCL, …).

Classification: ordered regex rules, searched case-insensitively in the kernel name (``re.search``); the
first rule that matches decides the category, a name no rule matches is ``other``. Rules come from a
preset (``presets/categories_<name>.json``: ``generic``, ``vllm``, ``sglang``, ``trtllm``; an engine preset
``extends`` generic, its own rules first) and an optional user file (``--categories FILE``) whose rules
are prepended (or, with ``"replace": true``, used alone).

Preset auto-selection (no preset named): *detect share* of an engine = kernel time of kernels whose name
matches any of that preset's ``detect`` regexes / total kernel time × 100; the engine with the largest
share (> 0) is used (ties: vllm, sglang, trtllm order), else ``generic``.

Numbers (integer ns; per category, overall / per device / per phase):

* ``kernel_count`` / ``total_kernel_ns`` — kernels in the scope and the sum of their durations;
  ``rule_count`` — number of rules applied (user rules + preset rules).
* ``count`` — kernels in the category; ``total_ns`` — sum of their durations (``end − start``);
  ``pct`` — ``total_ns`` / total kernel time of the same scope × 100 (summed time: overlap counts twice).
* ``busy_ns`` of a device — length of the union of its kernel intervals.
* ``nonoverlap_ns`` — on each device the busy time is cut into elementary segments at every kernel start
  and end; each segment's length is shared equally among the distinct categories with at least one
  kernel running in it. The exact (rational) shares are rounded to integers per device by the largest
  remainder method (floors first, then one ns each to the largest fractional parts; ties: lowest category
  index), so per device Σ_categories ``nonoverlap_ns`` == ``busy_ns`` exactly. Overall = sum over devices.
  ``nonoverlap_pct`` — ``nonoverlap_ns`` / ``busy_ns`` of the same scope × 100.
* Per phase (``kernel_phase`` given): the same numbers computed over that phase's kernels alone (the
  phase's busy time is the union of its own kernels on each device, summed over devices). Kernels with
  phase -1 form the row with ``phase: null``.
* ``other_ns`` / ``other_pct`` — ``total_ns`` / ``pct`` of category ``other`` (overall).
* ``top_kernels`` — per category, the 5 kernel names with the largest ``total_ns`` (count, total_ns);
  ``other_top_kernels`` — the same for ``other``, up to 15 names (candidates for ``--categories`` rules).
* ``categories`` — category names in index order: the 14 standard ones, then user-defined ones.

With ``include_memcpy`` memcpy / memset rows join as pseudo-kernels named ``[CUDA memcpy <kind>]`` /
``[CUDA memset]`` (phase -1), classified by the same rules (category ``memcpy`` by default).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from math import gcd
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import InputError
from ..model.trace import TraceModel
from . import intervals as iv
from .idle import MEMCPY_KIND_LABEL
from .stats import pct

CATEGORY_NAMES: List[str] = [
    "gemm", "attention", "norm", "activation", "rope", "moe", "nccl", "custom_allreduce", "sampling",
    "quantize", "elementwise", "memcpy", "triton", "other",
]
OTHER = CATEGORY_NAMES.index("other")
PRESETS: Tuple[str, ...] = ("generic", "vllm", "sglang", "trtllm")
ENGINE_PRESETS: Tuple[str, ...] = ("vllm", "sglang", "trtllm")
PRESET_DIR = Path(__file__).resolve().parent.parent / "presets"
TOP_KERNELS = 5
OTHER_TOP_KERNELS = 15

Rule = Tuple[str, str]


@dataclass
class CategoryRules:
    """Ordered (regex, category) rules. ``preset == "auto"``: the engine preset is chosen per trace by
    :func:`analyze_categories` (``rules`` then holds user rules + generic until resolved)."""

    preset: str
    rules: List[Rule]
    user_rules: List[Rule] = field(default_factory=list)
    replace: bool = False
    source: Optional[str] = None          # path of the user rules file
    reason: str = ""                      # why this preset

    @property
    def categories(self) -> List[str]:
        """Category names in index order: the standard ones, then user-defined ones by first use."""
        out = list(CATEGORY_NAMES)
        for _, c in self.rules:
            if c not in out:
                out.append(c)
        return out

    def compiled(self) -> List[Tuple[re.Pattern, str]]:
        return [(re.compile(rx, re.IGNORECASE), c) for rx, c in self.rules]


# ----------------------------------------------------------------------------------------------------------
# presets and user rules


def _read_preset(name: str) -> Dict:
    path = PRESET_DIR / f"categories_{name}.json"
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def preset_rules(name: str) -> List[Rule]:
    """Rules of a preset, with the rules of the preset it ``extends`` appended."""
    p = _read_preset(name)
    rules = [(str(r[0]), str(r[1])) for r in p.get("rules", [])]
    base = p.get("extends")
    if base and base != name:
        rules += preset_rules(str(base))
    return rules


def preset_detect(name: str) -> List[str]:
    return [str(x) for x in _read_preset(name).get("detect", [])]


def _parse_user_file(path: str) -> Tuple[List[Rule], bool]:
    label = f"--categories {path}"
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{label}: cannot read the file ({e.strerror or e})") from None
    data = None
    is_yaml = path.lower().endswith((".yaml", ".yml"))
    if not is_yaml:
        try:
            data = json.loads(text)
        except ValueError as e:
            json_err = f"not valid JSON ({e.msg} at line {e.lineno})"
        else:
            json_err = ""
    if data is None:
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            msg = json_err if not is_yaml else "YAML needs PyYAML (pip install pyyaml); use JSON instead"
            raise InputError(f"{label}: {msg}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else "parse error"
            raise InputError(f"{label}: not valid JSON or YAML ({first})") from None
    if isinstance(data, list):
        data = {"rules": data}
    if not isinstance(data, dict) or "rules" not in data:
        raise InputError(f'{label}: expected an object '
                         f'{{"rules": [[regex, category], ...], "replace": false}}')
    raw = data["rules"]
    if not isinstance(raw, list):
        raise InputError(f'{label}: "rules" must be a list of [regex, category] pairs')
    rules: List[Rule] = []
    for i, r in enumerate(raw):
        if isinstance(r, dict) and set(r) >= {"regex", "category"}:
            r = [r["regex"], r["category"]]
        if not (isinstance(r, (list, tuple)) and len(r) == 2 and all(isinstance(x, str) for x in r)):
            raise InputError(f"{label}: rule #{i + 1} must be a [regex, category] pair of strings, got {r!r}")
        rx, cat = r[0], r[1].strip()
        if not cat:
            raise InputError(f"{label}: rule #{i + 1} has an empty category")
        try:
            re.compile(rx, re.IGNORECASE)
        except re.error as e:
            raise InputError(f"{label}: rule #{i + 1} regex {rx!r} is invalid ({e})") from None
        rules.append((rx, cat))
    replace = data.get("replace", False)
    if not isinstance(replace, bool):
        raise InputError(f'{label}: "replace" must be true or false')
    return rules, replace


def load_rules(preset: Optional[str] = None, extra_file: Optional[str] = None) -> CategoryRules:
    """Rules for ``preset`` (None / "auto": chosen per trace) plus an optional user rules file.

    Raises :class:`InputError` (one-line message) for an unknown preset or a bad file.
    """
    name = (preset or "auto").strip().lower()
    if name not in PRESETS and name != "auto":
        raise InputError(f"unknown categories preset {preset!r} (choose from: auto, {', '.join(PRESETS)})")
    user: List[Rule] = []
    replace = False
    if extra_file:
        user, replace = _parse_user_file(str(extra_file))
    if replace:
        return CategoryRules("custom", list(user), user, True, str(extra_file),
                             f"rules replaced by {extra_file}")
    base = preset_rules("generic" if name == "auto" else name)
    reason = "auto-selected per trace" if name == "auto" else f"preset {name} requested"
    return CategoryRules(name, user + base, user, False, str(extra_file) if extra_file else None, reason)


def with_preset(rules: CategoryRules, name: str, reason: str) -> CategoryRules:
    """``rules`` with its preset part replaced by preset ``name`` (user rules kept first)."""
    return CategoryRules(name, list(rules.user_rules) + preset_rules(name), list(rules.user_rules),
                         rules.replace, rules.source, reason)


# ----------------------------------------------------------------------------------------------------------
# classification


def classify(names: Sequence[str], rules: Optional[CategoryRules] = None) -> np.ndarray:
    """Category index (into ``rules.categories``) per distinct name; loops over rules × unmatched names."""
    rules = rules or load_rules("generic")
    cats = rules.categories
    index = {c: i for i, c in enumerate(cats)}
    out = np.full(len(names), index["other"], np.int64)
    todo = list(range(len(names)))
    for pattern, cat in rules.compiled():
        if not todo:
            break
        ci = index[cat]
        rest = []
        for i in todo:
            if pattern.search(names[i] or ""):
                out[i] = ci
            else:
                rest.append(i)
        todo = rest
    return out


def _name_time(name_idx: np.ndarray, dur: np.ndarray, n_names: int) -> Tuple[np.ndarray, np.ndarray]:
    """(count, total_ns) per name index (exact while sums stay below 2**53 ns)."""
    cnt = np.bincount(name_idx, minlength=n_names).astype(np.int64)
    tot = np.rint(np.bincount(name_idx, weights=dur.astype(np.float64), minlength=n_names)).astype(np.int64)
    return cnt, tot


def detect_engine(names: Sequence[str], name_total_ns: np.ndarray) -> Tuple[Optional[str], Dict[str, float]]:
    """Engine preset whose ``detect`` regexes match the most kernel time (None if none matches)."""
    total = int(name_total_ns.sum())
    shares: Dict[str, float] = {}
    best, best_ns = None, 0
    live = [i for i in range(len(names)) if name_total_ns[i] > 0]
    for eng in ENGINE_PRESETS:
        pats = [re.compile(p, re.IGNORECASE) for p in preset_detect(eng)]
        ns = sum(int(name_total_ns[i]) for i in live if any(p.search(names[i] or "") for p in pats))
        shares[eng] = pct(ns, total)
        if ns > best_ns:
            best, best_ns = eng, ns
    return best, shares


# ----------------------------------------------------------------------------------------------------------
# non-overlapped time


def nonoverlap_split(start: np.ndarray, end: np.ndarray, cat: np.ndarray,
                     n_cat: int) -> Tuple[np.ndarray, int]:
    """(nonoverlap_ns per category, busy_ns) for the intervals of ONE device (see module docstring).

    Memory is O(intervals): per category the union of its intervals is built; the number of active
    categories per elementary segment comes from one cumsum over all union-block boundaries; for each
    distinct active-count k, a prefix sum of the segment lengths with that k gives each category's
    length at that k. Exact shares Σ_k len(c, k) / k are rounded by the largest remainder.
    """
    out = np.zeros(n_cat, np.int64)
    n = int(start.shape[0])
    if n == 0:
        return out, 0
    start = np.asarray(start, np.int64)
    end = np.maximum(np.asarray(end, np.int64), start)
    cat = np.asarray(cat, np.int64)
    if n < 2 or bool((start[1:] >= start[:-1]).all()):
        # already sorted by start: a stable sort by category (radix sort on a small int type) suffices
        small = cat.astype(np.int16) if n_cat < (1 << 15) else cat
        order = np.argsort(small, kind="stable")
    else:
        order = np.lexsort((start, cat))
    s, e, c = start[order], end[order], cat[order]
    cuts = np.flatnonzero(c[1:] != c[:-1]) + 1
    lo = np.concatenate(([0], cuts))
    hi = np.concatenate((cuts, [n]))
    bs_l, be_l, bc_l = [], [], []
    for a, b in zip(lo.tolist(), hi.tolist()):
        u = iv.union(s[a:b], e[a:b])
        keep = u.end > u.start
        if keep.any():
            bs_l.append(u.start[keep])
            be_l.append(u.end[keep])
            bc_l.append(int(c[a]))
    if not bs_l:
        return out, 0
    sizes = np.array([x.shape[0] for x in bs_l], np.int64)
    bs, be = np.concatenate(bs_l), np.concatenate(be_l)
    block_first = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    # active-category count per elementary segment
    t = np.concatenate((bs, be))
    o = np.argsort(t, kind="stable")
    ts = t[o]
    del t
    ds = np.where(o < bs.shape[0], np.int8(1), np.int8(-1))   # +1 at a block start, −1 at its end
    del o
    first = np.empty(ts.shape[0], bool)
    first[0] = True
    np.not_equal(ts[1:], ts[:-1], out=first[1:])
    pos = np.flatnonzero(first)
    del first
    tu = ts[pos]
    del ts
    k_seg = np.cumsum(np.add.reduceat(ds.astype(np.int32), pos))[:-1]
    del ds, pos
    length = np.diff(tu)
    busy = int(length[k_seg > 0].sum())
    i0 = np.searchsorted(tu, bs)
    i1 = np.searchsorted(tu, be)
    ks = [int(k) for k in np.unique(k_seg[k_seg > 0]).tolist()]
    # len_ck[c][k]: length of segments with k active categories inside category c's blocks
    len_ck: Dict[int, Dict[int, int]] = {cc: {} for cc in bc_l}
    for k in ks:
        prefix = np.concatenate(([0], np.cumsum(np.where(k_seg == k, length, 0))))
        per_block = prefix[i1] - prefix[i0]
        per_cat = np.add.reduceat(per_block, block_first)
        for cc, v in zip(bc_l, per_cat.tolist()):
            if v:
                len_ck[cc][k] = int(v)
    lcm = 1
    for k in ks:
        lcm = lcm * k // gcd(lcm, k)
    numer = {cc: sum(v * (lcm // k) for k, v in len_ck[cc].items()) for cc in bc_l}
    floors = {cc: numer[cc] // lcm for cc in bc_l}
    deficit = busy - sum(floors.values())
    ranked = sorted(bc_l, key=lambda cc: (-(numer[cc] % lcm), cc))
    for cc in ranked[:deficit]:
        floors[cc] += 1
    for cc, v in floors.items():
        out[cc] = v
    return out, busy


# ----------------------------------------------------------------------------------------------------------
# analysis


@dataclass
class CategoryResult:
    available: bool
    reason: Optional[str]
    preset: str = "generic"
    preset_reason: str = ""
    detect_pct: Dict[str, float] = field(default_factory=dict)
    rules_file: Optional[str] = None
    rules_replaced: bool = False
    rule_count: int = 0
    include_memcpy: bool = False
    categories: List[str] = field(default_factory=list)
    kernel_count: int = 0
    total_kernel_ns: int = 0
    busy_ns: int = 0
    other_ns: int = 0
    other_pct: float = 0.0
    overall: List[Dict] = field(default_factory=list)
    devices: List[Dict] = field(default_factory=list)
    phases: List[Dict] = field(default_factory=list)
    other_top_kernels: List[Dict] = field(default_factory=list)
    rules: Optional[CategoryRules] = None              # not serialized
    name_category: Optional[np.ndarray] = None         # category index per kernel name (not serialized)
    kernel_category: Optional[np.ndarray] = None       # category index per kernel row (not serialized)

    def to_dict(self) -> Dict[str, object]:
        return {
            "available": self.available, "reason": self.reason, "preset": self.preset,
            "preset_reason": self.preset_reason, "detect_pct": dict(self.detect_pct),
            "rules_file": self.rules_file, "rules_replaced": self.rules_replaced,
            "rule_count": self.rule_count, "include_memcpy": self.include_memcpy,
            "categories": list(self.categories), "kernel_count": self.kernel_count,
            "total_kernel_ns": self.total_kernel_ns, "busy_ns": self.busy_ns,
            "other_ns": self.other_ns, "other_pct": self.other_pct, "overall": self.overall,
            "devices": self.devices, "phases": self.phases, "other_top_kernels": self.other_top_kernels,
        }


def _rows(cats: List[str], count: np.ndarray, total: np.ndarray, nonov: np.ndarray, total_all: int,
          busy: int) -> List[Dict]:
    """Rows of the categories present, by nonoverlap_ns desc, then total_ns desc, then category index."""
    present = np.flatnonzero(count > 0)
    order = sorted(present.tolist(), key=lambda i: (-int(nonov[i]), -int(total[i]), i))
    return [{"category": cats[i], "count": int(count[i]), "total_ns": int(total[i]),
             "pct": pct(int(total[i]), total_all), "nonoverlap_ns": int(nonov[i]),
             "nonoverlap_pct": pct(int(nonov[i]), busy)} for i in order]


def _codes(x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(distinct values ascending, code per row) — a lookup table when the value range is small (no sort)."""
    x = np.asarray(x, np.int64)
    if x.shape[0] == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    lo, hi = int(x.min()), int(x.max())
    if hi - lo < (1 << 20):
        present = np.bincount(x - lo, minlength=hi - lo + 1) > 0
        values = np.flatnonzero(present) + lo
        lut = np.cumsum(present) - 1
        return values.astype(np.int64), lut[x - lo].astype(np.int64)
    values, inv = np.unique(x, return_inverse=True)
    return values.astype(np.int64), inv.reshape(-1).astype(np.int64)


def _small(x: np.ndarray, n: int) -> np.ndarray:
    """``x`` in the smallest int type holding 0..n (numpy's stable sort is a radix sort for those)."""
    return x.astype(np.int16) if n < (1 << 15) else x.astype(np.int32) if n < (1 << 31) else x


def _scope(start: np.ndarray, end: np.ndarray, cat: np.ndarray, dev_code: np.ndarray, n_dev: int,
           n_cat: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per (device, category): count, total, nonoverlap; per device: busy. Rows are in start order; each
    device's rows are gathered one device at a time (only one device's copy is alive at once)."""
    key = dev_code * n_cat + cat
    count = np.bincount(key, minlength=n_dev * n_cat).reshape(n_dev, n_cat).astype(np.int64)
    total = np.rint(np.bincount(key, weights=(end - start).astype(np.float64), minlength=n_dev * n_cat))
    total = total.astype(np.int64).reshape(n_dev, n_cat)
    del key
    nonov = np.zeros((n_dev, n_cat), np.int64)
    busy = np.zeros(n_dev, np.int64)
    # group rows by device (stable: each group stays sorted by start)
    o = np.argsort(_small(dev_code, n_dev), kind="stable")
    bounds = np.searchsorted(dev_code[o], np.arange(n_dev + 1))
    for j in range(n_dev):
        a, b = int(bounds[j]), int(bounds[j + 1])
        if b > a:
            idx = o[a:b]
            nonov[j], busy[j] = nonoverlap_split(start[idx], end[idx], cat[idx], n_cat)
            del idx
    return count, total, nonov, busy


def analyze_categories(model: TraceModel, rules: Optional[CategoryRules] = None,
                       kernel_phase: Optional[np.ndarray] = None, phase_names: Optional[List] = None,
                       include_memcpy: bool = False) -> CategoryResult:
    k = model.kernels
    if k is None or len(k) == 0:
        return CategoryResult(False, "no CUDA kernels were captured — nothing to categorize")
    if kernel_phase is not None and np.shape(kernel_phase)[0] != len(k):
        raise ValueError(f"kernel_phase has {np.shape(kernel_phase)[0]} entries for {len(k)} kernels")
    rules = rules or load_rules(None)
    names = list(k.names)
    name_idx = k.name_idx.astype(np.int64)
    n_cnt, n_tot = _name_time(name_idx, k.dur, len(names))
    detect_pct: Dict[str, float] = {}
    if rules.preset == "auto":
        eng, detect_pct = detect_engine(names, n_tot)
        shares = ", ".join(f"{e} {v:g} %" for e, v in detect_pct.items())
        if eng is None:
            rules = with_preset(rules, "generic", f"auto: no engine-specific kernel names found ({shares})")
        else:
            rules = with_preset(rules, eng, f"auto: {eng} kernel names cover the most kernel time ({shares})")
    cats = rules.categories
    n_cat = len(cats)
    other = cats.index("other")
    name_cat = classify(names, rules)

    start, end = np.asarray(k.start, np.int64), np.asarray(k.end, np.int64)
    dev = np.asarray(k.device, np.int64)
    row_name = name_idx
    all_names = names
    phase = (np.maximum(np.asarray(kernel_phase, np.int64), -1) if kernel_phase is not None
             else np.full(len(k), -1, np.int64))
    if include_memcpy:
        extra_s, extra_e, extra_d, extra_n = [], [], [], []
        all_names = list(names)
        for ops, kind in ((model.memcpy, "memcpy"), (model.memset, "memset")):
            if ops is None or len(ops) == 0:
                continue
            if kind == "memcpy":
                uniq, inv = np.unique(ops["copy_kind"], return_inverse=True)
                base = len(all_names)
                all_names += [f"[CUDA memcpy {MEMCPY_KIND_LABEL.get(int(u), str(int(u)))}]"
                              for u in uniq.tolist()]
                extra_n.append(base + inv.reshape(-1).astype(np.int64))
            else:
                all_names.append("[CUDA memset]")
                extra_n.append(np.full(len(ops), len(all_names) - 1, np.int64))
            extra_s.append(ops["start"].astype(np.int64))
            extra_e.append(ops["end"].astype(np.int64))
            extra_d.append(ops["device"].astype(np.int64))
        if extra_s:
            name_cat = np.concatenate((name_cat, classify(all_names[len(names):], rules)))
            start = np.concatenate([start] + extra_s)
            end = np.concatenate([end] + extra_e)
            dev = np.concatenate([dev] + extra_d)
            row_name = np.concatenate([row_name] + extra_n)
            phase = np.concatenate((phase, np.full(start.shape[0] - len(k), -1, np.int64)))
            n_cnt, n_tot = _name_time(row_name, end - start, len(all_names))
    cat = name_cat[row_name]
    devices, dev_code = _codes(dev)
    n_dev = int(devices.shape[0])

    count, total, nonov, busy = _scope(start, end, cat, dev_code, n_dev, n_cat)
    tot_all = int(total.sum())
    busy_all = int(busy.sum())
    c_cnt, c_tot, c_non = count.sum(0), total.sum(0), nonov.sum(0)
    res = CategoryResult(
        True, None, preset=rules.preset, preset_reason=rules.reason, detect_pct=detect_pct,
        rules_file=rules.source, rules_replaced=rules.replace, rule_count=len(rules.rules),
        include_memcpy=include_memcpy, categories=cats, kernel_count=int(start.shape[0]),
        total_kernel_ns=tot_all, busy_ns=busy_all, other_ns=int(c_tot[other]),
        other_pct=pct(int(c_tot[other]), tot_all), rules=rules, name_category=name_cat[: len(names)],
        kernel_category=cat[: len(k)],
    )
    res.overall = _rows(cats, c_cnt, c_tot, c_non, tot_all, busy_all)
    for row in res.overall:
        ci = cats.index(row["category"])
        members = np.flatnonzero((name_cat == ci) & (n_cnt > 0))
        top = members[np.lexsort((members, -n_tot[members]))][:TOP_KERNELS]
        row["top_kernels"] = [{"name": all_names[i], "count": int(n_cnt[i]), "total_ns": int(n_tot[i])}
                              for i in top.tolist()]
    members = np.flatnonzero((name_cat == other) & (n_cnt > 0))
    top = members[np.lexsort((members, -n_tot[members]))][:OTHER_TOP_KERNELS]
    res.other_top_kernels = [{"name": all_names[i], "count": int(n_cnt[i]), "total_ns": int(n_tot[i])}
                             for i in top.tolist()]
    for j in range(n_dev):
        dt = int(total[j].sum())
        res.devices.append({
            "device_id": int(devices[j]), "kernel_count": int(count[j].sum()), "total_kernel_ns": dt,
            "busy_ns": int(busy[j]),
            "categories": _rows(cats, count[j], total[j], nonov[j], dt, int(busy[j])),
        })

    if kernel_phase is not None:
        labels = list(phase_names or [])
        values, pcode = _codes(phase)
        n_ph = int(values.shape[0])
        # one stable sort groups rows by (phase, device); each group stays sorted by start
        o = np.argsort(_small(pcode * n_dev + dev_code, n_ph * n_dev), kind="stable")
        bounds = np.searchsorted(pcode[o], np.arange(n_ph + 1))
        order = [j for j in range(n_ph) if values[j] >= 0] + [j for j in range(n_ph) if values[j] < 0]
        for j in order:
            p = int(values[j])
            ro = o[int(bounds[j]):int(bounds[j + 1])]
            pc, pt, pn, pb = _scope(start[ro], end[ro], cat[ro], dev_code[ro], n_dev, n_cat)
            ptot, pbusy = int(pt.sum()), int(pb.sum())
            name = None if p < 0 else (str(labels[p]) if p < len(labels) else f"phase {p}")
            res.phases.append({
                "phase": name, "phase_index": int(p), "kernel_count": int(pc.sum()), "total_kernel_ns": ptot,
                "busy_ns": pbusy, "categories": _rows(cats, pc.sum(0), pt.sum(0), pn.sum(0), ptot, pbusy),
            })
    return res
