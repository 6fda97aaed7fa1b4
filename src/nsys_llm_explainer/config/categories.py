"""Kernel-category rules: presets (``presets/categories_<name>.json``) and the user ``--categories`` file, read
here only: :func:`load_rules` returns every preset the analysis may need, so :mod:`analyses.categories` does no
file I/O. File formats: docs/FINDINGS.md, "Kernel categories".
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from ..errors import InputError
from .user_file import YAML_MAX_BYTES, Unreadable, load_json, load_yaml, read_text, refusal, scrub

CATEGORY_NAMES: List[str] = [
    "gemm", "attention", "norm", "activation", "rope", "moe", "nccl", "custom_allreduce", "all_to_all", "sampling",
    "softmax", "quantize", "reduction", "pooling", "elementwise", "optimizer", "memcpy", "triton", "other",
]
PRESETS: Tuple[str, ...] = ("generic", "vllm", "sglang", "trtllm")
ENGINE_PRESETS: Tuple[str, ...] = ("vllm", "sglang", "trtllm")
PRESET_DIR = Path(__file__).resolve().parent.parent / "presets"

Rule = Tuple[str, str]


@dataclass(frozen=True)
class PresetRules:
    """One preset: its rules (with the rules of the preset it ``extends`` appended) and ``detect`` regexes."""

    name: str
    rules: Tuple[Rule, ...]
    detect: Tuple[str, ...] = ()


@dataclass(frozen=True)
class CategoryRules:
    """Ordered (regex, category) rules, first match wins.

    ``preset == "auto"``: the engine preset is chosen per trace by :func:`analyses.categories.analyze_categories`
    (``rules`` then holds user rules + generic until resolved); ``presets`` holds the presets that choice
    may use (generic and the engines), so resolving needs no file I/O."""

    preset: str
    rules: Tuple[Rule, ...]
    user_rules: Tuple[Rule, ...] = ()
    replace: bool = False
    source: Optional[str] = None          # path of the user rules file
    reason: str = ""                      # why this preset
    presets: Tuple[PresetRules, ...] = ()

    @property
    def categories(self) -> List[str]:
        """Category names in index order: the standard ones, then user-defined ones by first use."""
        out = list(CATEGORY_NAMES)
        for _, c in self.rules:
            if c not in out:
                out.append(c)
        return out

    def to_dict(self) -> Dict[str, object]:
        """``report.json`` ``options.categories``: the user's rules and the presets auto-selection may use (by
        name and ``detect`` regexes); the merged rule lists are left out (the applied ones are in ``categories``)."""
        return {"preset": self.preset, "user_rules": [list(r) for r in self.user_rules], "replace": self.replace,
                "source": self.source, "reason": self.reason,
                "presets": [{"name": p.name, "detect": list(p.detect)} for p in self.presets]}

    @classmethod
    def from_dict(cls, d: object, where: str = "categories") -> CategoryRules:
        """The rules of a :meth:`to_dict` dict: the user's rules as written there, the merged rule lists (left out
        of it) rebuilt from the built-in presets as :func:`build_rules` makes them."""
        try:
            if not isinstance(d, dict):
                raise TypeError
            user = tuple((str(rx), str(c)) for rx, c in d["user_rules"])
            preset, rep, source, reason = str(d["preset"]), d["replace"] is True, d["source"], str(d["reason"])
            detect = {str(p["name"]): tuple(str(x) for x in p["detect"]) for p in d["presets"]}
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{where}: not the object CategoryRules.to_dict() writes") from None
        base = build_rules(preset if preset in PRESETS else None, user, rep)
        presets = tuple(PresetRules(n, builtin_preset(n).rules if n in PRESETS else (), det)
                        for n, det in detect.items())
        return dataclasses.replace(base, preset=preset, user_rules=user, source=source, reason=reason, presets=presets)

    def compiled(self) -> List[Tuple[re.Pattern, str]]:
        return [(re.compile(rx, re.IGNORECASE), c) for rx, c in self.rules]

    def preset_named(self, name: str) -> PresetRules:
        for p in self.presets:
            if p.name == name:
                return p
        return builtin_preset(name)

    def engine_presets(self) -> List[PresetRules]:
        """The engine presets auto-selection compares, in tie-break order."""
        return [self.preset_named(e) for e in ENGINE_PRESETS]

    def with_preset(self, name: str, reason: str) -> CategoryRules:
        """These rules with the preset part replaced by preset ``name`` (user rules kept first)."""
        rules = self.user_rules + self.preset_named(name).rules
        return dataclasses.replace(self, preset=name, rules=rules, reason=reason)


# ----------------------------------------------------------------------------------------------------------
# presets


def _read_preset(name: str) -> Dict:
    path = PRESET_DIR / f"categories_{name}.json"
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"categories preset {name!r} cannot be read from {path} ({e})") from None


@cache
def builtin_preset(name: str) -> PresetRules:
    """A built-in preset (read once); raises :class:`InputError` for an unknown name."""
    if name not in PRESETS:
        raise InputError(f"unknown categories preset {name!r} (choose from: auto, {', '.join(PRESETS)})")
    p = _read_preset(name)
    rules = tuple((str(r[0]), str(r[1])) for r in p.get("rules", []))
    base = p.get("extends")
    if base and base != name:
        rules += builtin_preset(str(base)).rules
    return PresetRules(name, rules, tuple(str(x) for x in p.get("detect", [])))


# ----------------------------------------------------------------------------------------------------------
# user rules


def _decode(text: str, path: str, option: str) -> object:
    """JSON, else YAML (by suffix, or when the text is not JSON), within the option-file limits
    (:mod:`config.user_file`: depth, values with YAML aliases expanded; messages never quote the file)."""
    is_yaml = path.lower().endswith((".yaml", ".yml"))
    json_err = ""
    if not is_yaml:
        try:
            return load_json(text, option, path)
        except ValueError as e:
            json_err = (f"not valid JSON ({e.msg} at line {e.lineno})" if isinstance(e, json.JSONDecodeError)
                        else "not valid JSON")
        if len(text) > YAML_MAX_BYTES:   # too big to be tried as YAML: the JSON error is the answer
            raise refusal(option, path, json_err) from None
    try:
        return load_yaml(text, option, path, "JSON or YAML")
    except ImportError:
        msg = json_err if not is_yaml else "YAML needs PyYAML (pip install pyyaml); use JSON instead"
        raise refusal(option, path, msg) from None


def _kind(v: object) -> str:
    """What a value is, without its content (messages never quote an option file)."""
    if isinstance(v, (list, tuple)):
        return f"a list of {len(v)} item(s)"
    if isinstance(v, dict):
        return f"an object with {len(v)} key(s)"
    return "null" if v is None else f"a {type(v).__name__}"


def parse_rules_data(data: object, option: str = "categories_file",
                     path: Optional[str] = None) -> Tuple[Tuple[Rule, ...], bool]:
    """Validate decoded rules (docs/FINDINGS.md, "Kernel categories") → (rules, replace); :class:`OptionError`
    naming ``option`` (and the file ``path`` they came from) if bad."""
    if isinstance(data, list):
        data = {"rules": data}
    if not isinstance(data, dict) or "rules" not in data:
        raise refusal(option, path, 'expected an object {"rules": [[regex, category], ...], "replace": false}')
    raw = data["rules"]
    if not isinstance(raw, list):
        raise refusal(option, path, '"rules" must be a list of [regex, category] pairs')
    rules: List[Rule] = []
    for i, r in enumerate(raw):
        if isinstance(r, dict) and set(r) >= {"regex", "category"}:
            r = [r["regex"], r["category"]]
        if not (isinstance(r, (list, tuple)) and len(r) == 2 and all(isinstance(x, str) for x in r)):
            raise refusal(option, path, f"rule #{i + 1} must be a [regex, category] pair of strings, got {_kind(r)}")
        rx, cat = r[0], r[1].strip()
        if not cat:
            raise refusal(option, path, f"rule #{i + 1} has an empty category")
        try:
            re.compile(rx, re.IGNORECASE)
        except re.error as e:
            raise refusal(option, path, f"rule #{i + 1} has an invalid regex ({scrub(str(e))})") from None
        except (OverflowError, RecursionError):   # a repeat count past the engine's limit, nesting past Python's
            raise refusal(option, path, f"rule #{i + 1} has an invalid regex (a repeat count or nesting beyond what "
                       "Python's regular expressions take)") from None
        rules.append((rx, cat))
    rep = data.get("replace", False)
    if not isinstance(rep, bool):
        raise refusal(option, path, '"replace" must be true or false')
    return tuple(rules), rep


# ----------------------------------------------------------------------------------------------------------
# rule sets


def build_rules(preset: Optional[str] = None, own: Tuple[Rule, ...] = (), replace: bool = False,
                source: Optional[str] = None) -> CategoryRules:
    """Rules for ``preset`` (None / "auto": chosen per trace) with the parsed user rules ``own`` (of the file
    ``source``; ``replace``: they replace the presets)."""
    name = (preset or "auto").strip().lower()
    if name not in PRESETS and name != "auto":
        raise InputError(f"unknown categories preset {preset!r} (choose from: auto, {', '.join(PRESETS)})")
    if replace:
        return CategoryRules("custom", own, own, True, source, f"rules replaced by {source}")
    if name == "auto":
        presets = tuple(builtin_preset(p) for p in PRESETS)
        return CategoryRules("auto", own + presets[0].rules, own, False, source, "auto-selected per trace",
                             presets)
    p = builtin_preset(name)
    return CategoryRules(name, own + p.rules, own, False, source, f"preset {name} requested", (p,))


def load_rules(preset: Optional[str] = None, extra_file: Optional[Union[str, os.PathLike]] = None,
               option: str = "categories_file") -> CategoryRules:
    """Rules for ``preset`` (None / "auto": chosen per trace) plus an optional user rules file.

    Raises :class:`InputError` (one-line message) for an unknown preset or a bad file (``<option> <path>: …``)."""
    if not extra_file:
        return build_rules(preset)
    path = str(extra_file)
    try:
        text = read_text(path)
    except Unreadable as e:   # one message shape: "<option> <path>: cannot read the file (why)"
        raise refusal(option, path, f"cannot read the file ({e})") from None
    return build_rules(preset, *parse_rules_data(_decode(text, path, option), option, path), path)
