"""Property test: hostile paths. Each seed names the trace, its directories and ``--out`` with
hostile components (spaces, a leading ``-``, newline, tab, ESC, bidi, quotes, shell and URI characters, unicode,
200 bytes; sometimes a byte that is not UTF-8: refused in a trace name, fine in ``--out``), reaches the trace
directly, relatively (after ``--`` when it starts with ``-``) or through a chain of symbolic links, and gives
``--out`` as a new nested path, an empty directory, a link (chain) to one, or a previous output of the same kind
tampered with: a foreign file, links to a directory outside (at the top, inside ``tables/``, or as ``tables/``
itself), manifest entries outside ``--out`` (absolute, ``..``, through a link) — with or without ``--force``, for
a report or a comparison. Checks:

* the exit code the rules give (docs/SECURITY.md §2; 2: ``tables/`` a link, even with ``--force``; foreign content
  without ``--force``; a trace name that is not UTF-8); a refusal is one inert line, a success a complete output
  with at most one warning line (the ignored manifest entries, when there are some) and an inert report.md;
* nothing outside the real ``--out`` is created, changed or removed — but the parents ``--out`` needed — (every
  entry of the whole test directory hashed before and after, links not followed), the trace is byte-identical,
  no side file appears beside it and no descriptor of this process is left open on it; inside ``--out``, the
  files and links that are not the tool's are untouched; after a refusal nothing changed at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from fuzz_inputs import HIDDEN, replayable, seeds

from nsys_llm_explainer.cli import main
from nsys_llm_explainer.output import MANIFEST

PIECES = [" ", "  ", "-", "--", "-o", "\n", "\t", "\r", "\x1b[31m", "\x1b]8;;http://evil.example/\x07", "\u202e",
          "名前", "\U0001f600", "e\u0301", "'", '"', "$HOME", "`id`", "$(id)", "*", "?", "[a]", "#", "%41", "%", "&",
          ";", "|", "<", ">", "...", "~", "\\", ":", "=", ",", "{a,b}", "!", "report.md", "tables", ".sqlite",
          "?mode=rw", "#frag", "\u00a0", "x", "data", "trace"]
NOT_UTF8 = os.fsdecode(b"\xff")      # a byte that is not UTF-8 (Python's surrogate escape)


def component(rng: random.Random, allow_bad: bool = False) -> str:
    """One hostile path component: no '/', no NUL, never '.' or '..', at most 200 bytes."""
    name = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 6))).replace("/", "")
    if rng.random() < 0.3:
        name = "-" + name
    if rng.random() < 0.05:
        name = name + "L" * (200 - len(os.fsencode(name)))
    if allow_bad and rng.random() < 0.08:
        name += NOT_UTF8
    while len(os.fsencode(name)) > 200:
        name = name[:-1]
    return name if name not in (".", "..") else name + "x"


# ------------------------------------------------------------------------------------------------ snapshots
def snapshot(root: Path) -> Dict[str, str]:
    """Every entry under ``root``, links not followed: file → sha256, link → its target, directory → 'dir'."""
    out: Dict[str, str] = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = Path(d, n)
            rel = os.fsencode(p.relative_to(root)).hex()
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def outside(snap: Dict[str, str], root: Path, real_out: Path) -> Dict[str, str]:
    """The entries of ``snap`` that are not inside ``real_out``."""
    inside = os.fsencode(real_out.relative_to(root)).hex() if real_out.is_relative_to(root) else None
    return {k: v for k, v in snap.items() if inside is None or (k != inside and not
                                                              os.fsdecode(bytes.fromhex(k)).startswith(
                                                                  os.fsdecode(bytes.fromhex(inside)) + "/"))}


def open_on(path: Path) -> List[str]:
    """Descriptors of this process open on ``path`` (or a side file of it)."""
    real = os.path.realpath(path)
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target == real or target.startswith(real + "-"):
            found.append(target)
    return found


# ------------------------------------------------------------------------------------------------ one case
class Case:
    def __init__(self, seed: int, root: Path, base_trace: Path) -> None:
        rng = random.Random(seed)
        self.rng, self.root = rng, root
        self.kind = rng.choice(["report", "report", "compare"])
        self.force = rng.random() < 0.5
        self.quiet = rng.random() < 0.5
        # the trace: hostile directories and name, sometimes reached through links
        tdir = root / "in" / component(rng)
        tdir.mkdir(parents=True)
        self.trace = tdir / (component(rng, allow_bad=True) + ".sqlite")
        shutil.copyfile(base_trace, self.trace)
        self.base = base_trace
        self.bad_name = NOT_UTF8 in str(self.trace)
        self.arg, self.cwd = self._reach(rng, self.trace)
        # where --out goes
        self.victim = root / "victim"
        (self.victim / "tables").mkdir(parents=True)
        for rel in ("report.md", "compare.md", "tables/kernels.csv", "keep.txt"):
            (self.victim / rel).write_text(f"the user's {rel}\n")
        self.out_kind = rng.choice(["new", "empty", "link", "previous", "previous", "previous"])
        self.tamper: List[str] = []
        self.hostile_entries: List[str] = []

    def _reach(self, rng: random.Random, trace: Path) -> Tuple[str, Optional[Path]]:
        how = rng.choice(["absolute", "relative", "link", "link chain", "linked dir"])
        links = self.root / "links" / component(rng)
        if how == "relative":
            return trace.name, trace.parent
        if how == "absolute":
            return str(trace), None
        links.mkdir(parents=True)
        if how == "linked dir":
            os.symlink(trace.parent, links / "dir")
            return str(links / "dir" / trace.name), None
        first = links / (component(rng) + ".sqlite")
        os.symlink(trace if rng.random() < 0.5 else os.path.relpath(trace, links), first)
        if how == "link chain":
            second = links / (component(rng) + ".sqlite")
            os.symlink(first.name, second)
            first = second
        return str(first), None

    def argv(self, out_arg: str) -> List[str]:
        traces = [self.arg, self.arg] if self.kind == "compare" else [self.arg]
        head = ["compare"] if self.kind == "compare" else []
        return head + ["--out=" + out_arg] + (["--quiet"] if self.quiet else []) + (["--force"] if self.force else []) \
            + ["--"] + traces

    def prepare_out(self, capsys) -> Tuple[str, Path]:
        """Make ``--out`` as drawn; returns (the --out argument, the real output directory)."""
        rng = self.rng
        parent = self.root / "outs" / component(rng)
        real = parent / component(rng, allow_bad=True)     # an --out name that is not UTF-8 works
        if self.out_kind == "new":
            real = real / component(rng)          # parents created only by a successful run
            return str(real), real
        parent.mkdir(parents=True)
        if self.out_kind in ("empty", "link"):
            real.mkdir()
        else:                                     # a previous output of the same kind, then tampered with
            head = ["compare"] if self.kind == "compare" else []
            traces = [str(self.base)] * (2 if self.kind == "compare" else 1)
            assert main(head + ["--out", str(real), "--quiet", *traces]) == 0, capsys.readouterr().err
            capsys.readouterr()
            self._tamper(real)
        if self.out_kind == "link" or (self.out_kind == "previous" and rng.random() < 0.3):
            link = self.root / "outs" / component(rng)
            os.symlink(real, link)
            if rng.random() < 0.5:
                os.symlink(link.name, self.root / "outs" / "chain")
                link = self.root / "outs" / "chain"
            return str(link), real
        return str(real), real

    def _tamper(self, out: Path) -> None:
        rng = self.rng
        man_path = out / MANIFEST
        man = json.loads(man_path.read_text(encoding="utf-8"))
        for t in ("foreign file", "link at the top", "link in tables", "tables is a link", "absolute entry",
                  "dotdot entry"):
            if rng.random() < 0.3:
                self.tamper.append(t)
        if "foreign file" in self.tamper:
            (out / (component(rng) + ".txt")).write_text("the user's notes\n")
        if "link at the top" in self.tamper:
            os.symlink(self.victim, out / "elsewhere")
            self.hostile_entries += ["elsewhere/keep.txt", "elsewhere/report.md"]
        if "tables is a link" in self.tamper:
            shutil.rmtree(out / "tables")
            os.symlink(self.victim / "tables", out / "tables")
        elif "link in tables" in self.tamper:
            os.symlink(self.victim, out / "tables" / "sub")
            self.hostile_entries += ["tables/sub/keep.txt", "tables/sub/tables/kernels.csv"]
        if "absolute entry" in self.tamper:
            self.hostile_entries += [str(self.victim / "keep.txt"), str(self.victim / "report.md")]
        if "dotdot entry" in self.tamper:
            rel = os.path.relpath(self.victim, out)
            self.hostile_entries += [f"{rel}/keep.txt", f"{rel}/compare.md"]
        man["files"] += self.hostile_entries
        man_path.write_text(json.dumps(man), encoding="utf-8")

    def refusals(self) -> List[str]:
        """What the one line of a refusal may say: one entry per rule this case breaks (none: exit 0)."""
        why = []
        if self.bad_name:
            why.append("the file name is not valid UTF-8")
        if "tables is a link" in self.tamper:      # never written through, even with --force
            why.append("holds 'tables', a symbolic link")
        if {"foreign file", "link at the top", "link in tables"} & set(self.tamper) and not self.force:
            why.append("not written by this tool")
        return why


def lines(text: str) -> List[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


@pytest.fixture(scope="module")
def base_trace(small_trace: Path) -> Path:
    """conftest's 100 KB export: the paths are the point here, not the trace (copied into each case's root)."""
    return small_trace


@pytest.mark.parametrize("seed", seeds(10, 15))
def test_hostile_paths_never_touch_anything_outside_out(seed: int, tmp_path: Path, base_trace: Path, capsys,
                                                        monkeypatch) -> None:
    root = tmp_path / "root"
    root.mkdir()
    case = Case(seed, root, base_trace)
    out_arg, real = case.prepare_out(capsys)
    argv = case.argv(out_arg)
    with replayable(seed, {"argv": argv, "cwd": case.cwd, "out": case.out_kind, "tamper": case.tamper,
                           "force": case.force}):
        before = snapshot(root)
        old = json.loads((real / MANIFEST).read_text(encoding="utf-8"))["files"] if case.out_kind == "previous" else []
        if case.cwd is not None:
            monkeypatch.chdir(case.cwd)
        rc = main(argv)
        monkeypatch.chdir(tmp_path)
        cap = capsys.readouterr()
        after = snapshot(root)
        for what, text in (("stdout", cap.out), ("stderr", cap.err)):
            bad = HIDDEN.search(text)
            assert bad is None, f"raw {bad.group()!a} on {what}: {text[max(0, bad.start() - 80): bad.end() + 40]!a}"
        assert "Traceback" not in cap.err and "internal error" not in cap.err, cap.err
        assert not open_on(case.trace), f"left open: {open_on(case.trace)}"
        why = case.refusals()
        assert rc == (2 if why else 0), f"exit {rc}, expected {2 if why else 0} ({why}): {cap.err!a}"
        if rc == 2:
            (line,) = lines(cap.err)
            assert line.startswith("nsys-llm-explain: error: ") and any(w in line for w in why), (line, why)
            assert after == before, "a refused run changed something"
            return
        # a success: outside the real --out only the parents it needed were created
        new = {k: v for k, v in outside(after, root, real).items() if k not in before}
        for k, v in new.items():
            p = root / os.fsdecode(bytes.fromhex(k))
            assert v == "dir" and real.is_relative_to(p), f"created outside --out: {p!a}"
        assert {k: v for k, v in outside(after, root, real).items() if k not in new} == outside(before, root, real), \
            "something outside --out changed"
        warnings = [ln for ln in lines(cap.err) if not ln.startswith("[nsys-llm-explain] ")]   # progress lines
        assert len(warnings) == (1 if case.hostile_entries else 0), warnings
        if warnings:
            assert warnings[0].startswith("nsys-llm-explain: warning: the .nsys-llm-explainer.json in --out ")
        assert case.quiet or cap.out.startswith("nsys-llm-explain: wrote "), cap.out[:300]
        # inside: a complete output, and what is not the tool's untouched
        stem = "compare" if case.kind == "compare" else "report"
        for f in (f"{stem}.md", f"{stem}.json", f"{stem}.html", MANIFEST):
            assert (real / f).is_file(), f"{f} missing"
        md = (real / f"{stem}.md").read_text(encoding="utf-8")     # it names the trace
        bad = HIDDEN.search(md)
        assert bad is None, f"raw {bad.group()!a} in {stem}.md: {md[max(0, bad.start() - 80): bad.end() + 40]!a}"
        files = json.loads((real / MANIFEST).read_text(encoding="utf-8"))["files"]
        assert all((real / f).is_file() and not os.path.isabs(f) and ".." not in f.split("/") for f in files), files
        if case.out_kind == "previous":
            ours = {os.fsencode(Path(f)).hex() for f in files + old if isinstance(f, str)} | {MANIFEST.encode().hex()}
            rel = os.fsencode(real.relative_to(root)).hex()
            for k, v in before.items():
                name = os.fsdecode(bytes.fromhex(k))
                inner = os.fsdecode(bytes.fromhex(rel))
                if name.startswith(inner + "/") and v != "dir":
                    sub = os.fsencode(name[len(inner) + 1:]).hex()
                    if sub not in ours:
                        assert after.get(k) == v, f"a file or link of the user's in --out changed: {name!a}"
