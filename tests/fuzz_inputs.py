"""Generators for the property tests (``test_fuzz_names.py``, ``test_fuzz_paths.py``,
``test_fuzz_options.py``): hostile names, paths, option files and option values, each drawn from
``random.Random(seed)`` (no dependency), so a case is its seed.

Seeds: the fast set runs the first few seeds from :data:`BASE_SEED`, a larger sweep marked ``slow`` the next
ones. ``NSYS_FUZZ_SEED=N`` moves the base (to explore new cases, or to replay one: the case of seed N is then
the first, ``-k seedN``). A failing case says its seed and the command that replays it (:func:`replayable`).
"""

from __future__ import annotations

import os
import random
import re
from contextlib import contextmanager
from typing import Iterator, List

import pytest

#: first seed of every fuzz test (``NSYS_FUZZ_SEED`` moves it)
DEFAULT_SEED = 1717
BASE_SEED = int(os.environ.get("NSYS_FUZZ_SEED", DEFAULT_SEED))

#: every character that must never reach a human-facing output raw (report.md, report.html's text, terminal)
HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
#: a CSV cell that a spreadsheet could run as a formula
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def seeds(fast: int, slow: int) -> List:
    """``fast`` seeds for the fast set, then ``slow`` more marked ``slow``; ids ``seed<N>``."""
    out = [pytest.param(BASE_SEED + i, id=f"seed{BASE_SEED + i}") for i in range(fast)]
    out += [pytest.param(BASE_SEED + i, id=f"seed{BASE_SEED + i}", marks=pytest.mark.slow)
            for i in range(fast, fast + slow)]
    return out


def show(value: object, limit: int = 300) -> str:
    """``value`` as inert ASCII (its ``ascii()``), shortened in the middle: for failure messages."""
    s = ascii(value)
    return s if len(s) <= limit else s[: limit // 2] + f" …({len(s)} chars)… " + s[-limit // 4:]


@contextmanager
def replayable(seed: int, what: object = "") -> Iterator[None]:
    """Any failure inside becomes an ``AssertionError`` naming the seed, the generated input (``what``, shown
    inert) and the command that replays this case alone."""
    try:
        yield
    except Exception as exc:
        node = os.environ.get("PYTEST_CURRENT_TEST", "tests/…").split(" ")[0].split("[")[0]
        raise AssertionError(f"fuzz case seed {seed} failed: {type(exc).__name__}: {exc}\n  input: {show(what)}\n"
                             f"  replay: NSYS_FUZZ_SEED={seed} python -m pytest '{node}' -m '' -k seed{seed}") from exc


# ------------------------------------------------------------------------------------------------ names
CONTROLS = [chr(c) for c in range(0x20)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xa0)]
TERMINAL = ["\x1b[31m", "\x1b[0m", "\x1b[2J", "\x1b[1;1H", "\x1b]8;;http://evil.example/\x07", "\x1b]8;;\x1b\\",
            "\x1b]0;pwned\x07", "\x9b31m", "\x1bP+q\x1b\\", "\x07", "\x08\x08\x08"]
BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e",
        "\u200f", "\u061c", "\u2028", "\u2029"]
#: markup whose injection a test can see: every tag and attribute it could inject is one the page never uses
MARKUP = ["|", "||", "`", "```", "*", "**", "_", "__", "~~", "$", "$$", "\\", "#", "> ", "- ", "1. ", "---",
          "[x](http://evil.example)", "![i](http://evil.example/i.png)", "<http://evil.example>", "www.evil.example",
          "user@evil.example", "<script>fzx()</script>", "<img src=x onerror=fzx()>", "\"'><svg onload=fzx()>",
          "</script><iframe srcdoc=fzx>", "</code>", "</td></tr></table>", "<!--", "-->", "<![CDATA[", "&amp;",
          "&#x1b;", "&#27;", "&lt;script&gt;", "javascript:fzx()", "\" onmouseover=\"fzx()", "' onfocus='fzx()",
          "{{fzx}}", "${fzx}", "%s%n", "\\u001b", "\\x1b"]
CSV_META = [",", "\"", "\"\"", "\r\n", "\n", ";", "'"]
UNICODE = ["名前", "カーネル", "\U0001f600", "e\u0301", "\u200d", "\ufeff", "\ufffd", "\uffff", "\U0010ffff", "ß", "İ",
           "\u00a0", "\u3000", "\u0000"]
PLAIN = ["gemm", "ampere_sgemm_128x64_nn", "flash_fwd", "void f<int>(float*)", "ncclAllReduce", " ", "x", "step"]
POOLS = [CONTROLS, TERMINAL, BIDI, MARKUP, CSV_META, UNICODE, PLAIN, PLAIN]
#: bytes that are not UTF-8: a lone continuation byte, 0xff, a truncated sequence, an encoded surrogate, an
#: overlong '/', a five-byte form
BAD_UTF8 = [b"\x80", b"\xff", b"\xfe", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80"]


def hostile_name(rng: random.Random, long: bool = True) -> str:
    """A name built from 1–8 hostile pieces (controls, terminal sequences, bidi, Markdown / HTML / CSV markup,
    unicode), often starting like a formula; one in eight is padded past 100 KB (``long``)."""
    parts = [rng.choice(rng.choice(POOLS)) for _ in range(rng.randint(1, 8))]
    if rng.random() < 0.4:
        parts.insert(0, rng.choice(FORMULA_START))
    name = "".join(parts)
    if long and rng.random() < 0.125:
        unit = name + rng.choice(PLAIN)
        name = unit * (100_000 // len(unit) + 1)
    return name


def distinct(rng: random.Random, n: int, make, *args) -> List:
    """``n`` distinct values of ``make(rng, *args)``."""
    out: List = []
    while len(out) < n:
        v = make(rng, *args)
        if v not in out:
            out.append(v)
    return out


def undecodable(rng: random.Random) -> bytes:
    """A name's UTF-8 bytes with 1–3 byte sequences that are not UTF-8 put in."""
    raw = hostile_name(rng, long=False).replace("\x00", "").encode("utf-8")
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(raw))
        raw = raw[:at] + rng.choice(BAD_UTF8) + raw[at:]
    return raw

