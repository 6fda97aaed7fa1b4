"""Phase maps: NVTX range-name substrings → inference phase (prefill / decode / other). The one place that reads
phase presets (``presets/phases.json``) and user ``--phase-map`` files (format: docs/FINDINGS.md, "Phases");
analyses receive a :class:`PhaseMap` and do no file I/O.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import InputError, OptionError
from .user_file import Unreadable, load_json, read_text, refusal

PHASES = ("prefill", "decode", "other")
UNMAPPED = "unmapped"
PRESET_FILE = Path(__file__).resolve().parent.parent / "presets" / "phases.json"
FORMAT = '{"phase": ["substring", ...]}'

PhaseDict = Dict[str, List[str]]


@dataclass(frozen=True)
class PhaseMap:
    """Ordered phases with their name substrings, plus the preset ``ignore`` substrings (names whose
    longest match is one of these have no phase) and ``step_keywords`` (step-like NVTX names).

    ``source``: ``"user"`` for a user map, ``"preset:<framework>+…"`` for the merged presets."""

    phases: Tuple[Tuple[str, Tuple[str, ...]], ...]
    source: str = "user"
    ignore: Tuple[str, ...] = ()
    step_keywords: Tuple[str, ...] = ()

    @property
    def names(self) -> List[str]:
        return [p for p, _ in self.phases]

    def as_dict(self) -> PhaseDict:
        return {p: list(subs) for p, subs in self.phases}


@lru_cache(maxsize=1)
def _preset_document() -> Dict:
    try:
        with open(PRESET_FILE, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as e:
        raise InputError(f"phase presets cannot be read from {PRESET_FILE} ({e})") from None
    if not (isinstance(data, dict) and isinstance(data.get("frameworks"), dict)):
        raise InputError(f"phase presets in {PRESET_FILE} have no \"frameworks\" object")
    return data


def _merge(maps: Sequence[Mapping[str, Sequence[str]]]) -> PhaseDict:
    out: PhaseDict = {p: [] for p in PHASES}
    for m in maps:
        for phase, subs in m.items():
            lst = out.setdefault(phase, [])
            for s in subs:
                if s.lower() not in (x.lower() for x in lst):
                    lst.append(s)
    return out


def parse_phase_map(data: object, option: str = "phase_map",
                    path: Optional[Union[str, os.PathLike]] = None) -> PhaseDict:
    """Validate a user phase map (see module docstring) and return it as ``{phase: [substring, ...]}``.

    Raises :class:`~nsys_llm_explainer.errors.OptionError` naming ``option`` (and the file ``path`` it came
    from)."""
    bad = OptionError(option, ("" if path is None else f"{path} ") + f"must be a JSON object {FORMAT}")
    if not isinstance(data, Mapping):
        raise bad
    out: PhaseDict = {}
    for k, v in data.items():
        subs = [v] if isinstance(v, str) else v
        if not (isinstance(k, str) and isinstance(subs, list) and all(isinstance(s, str) for s in subs)):
            raise bad
        if k == UNMAPPED:
            raise refusal(option, path, f"phase name {UNMAPPED!r} is reserved")
        out[k] = [s for s in subs if s]
    return out


def read_phase_map_file(path: Union[str, os.PathLike], option: str = "phase_map") -> PhaseDict:
    """Read and validate a JSON phase-map file (:func:`parse_phase_map`)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        raise OptionError(option, f"file not found: {path}") from None
    except (OSError, ValueError):   # a parent that may not be searched, a name too long…: worded below
        pass
    try:
        text = read_text(path)   # size-capped, regular files only
    except Unreadable as exc:
        raise OptionError(option, f"{path}: {exc}") from None
    try:
        data = load_json(text, option, str(path))   # depth and size bounded (config/user_file.py)
    except json.JSONDecodeError as exc:
        raise OptionError(option, f"{path} is not valid JSON: {exc}") from None
    return parse_phase_map(data, option, path)


def build_phase_map(user_map: Union[PhaseMap, Mapping, None] = None, option: str = "phase_map") -> PhaseMap:
    """A :class:`PhaseMap`: the validated user map (source ``"user"``) or, when ``user_map`` is empty or
    None, the merged presets. ``ignore`` / ``step_keywords`` always come from the presets."""
    if isinstance(user_map, PhaseMap):
        return user_map
    user = parse_phase_map(user_map, option) if user_map else None
    doc = _preset_document()
    phases = user if user is not None else _merge(list(doc["frameworks"].values()))
    return PhaseMap(tuple((p, tuple(subs)) for p, subs in phases.items()),
                    "user" if user is not None else "preset:" + "+".join(doc["frameworks"]),
                    tuple(str(s) for s in doc.get("ignore", [])), tuple(str(s) for s in doc.get("step_keywords", [])))

