"""Bounded matching (docs/SECURITY.md "Bounded matching").

* Every built-in pattern the tool applies to names — found by importing every module (compiled patterns at
  module level, in dicts / lists / tuples), the category presets, the default step marker and every literal
  pattern given to ``re.*`` in the source — finishes on each 100 KB adversarial name
  (:mod:`adversarial_names`) within ~50 ms; so do the name functions that are not a single regex.
* The rewritten patterns give the same answers as the rules as documented (``X\\w*Y``), on random strings
  built from their pieces; ``normalize_range_name`` as the regex it replaced.
* A user's pattern (``--step-marker``, ``--categories`` rules), matched in this process by ``regex``: ordinary
  patterns answer as ``re`` does (the documented differences pinned); a hostile one ends within the time limit
  with one ``OptionError`` line naming the option, and a signal stops it; a pattern whose repeats would make
  ``regex`` compile gigabytes is refused first.
"""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Sequence, Tuple

import pytest
from adversarial_names import adversarial, fill, literal_runs

import nsys_llm_explainer
from nsys_llm_explainer import interrupts
from nsys_llm_explainer.analyses.api.classes import normalize as api_normalize
from nsys_llm_explainer.analyses.idle.range_names import normalize_range_name
from nsys_llm_explainer.analyses.kernels import stack, traits, trials
from nsys_llm_explainer.analyses.kernels.categories import classify
from nsys_llm_explainer.analyses.steps.detect import DEFAULT_MARKER
from nsys_llm_explainer.analyses.steps.nvtx_method import _name_groups
from nsys_llm_explainer.analyses.steps.phases import phase_of_names
from nsys_llm_explainer.config import patterns as P
from nsys_llm_explainer.config.categories import PRESETS, build_rules, builtin_preset
from nsys_llm_explainer.config.phase_map import build_phase_map
from nsys_llm_explainer.errors import Interrupted, OptionError

SRC = Path(nsys_llm_explainer.__file__).resolve().parent
#: one pattern on one 100 KB name: a linear scan takes 1–10 ms here, a quadratic one seconds to minutes and an
#: exponential one forever, so this bound tells them apart with room for a loaded machine (the ratio, not the
#: clock, is what is tested; bench/ measures speed)
BUDGET_S = 0.25
#: the entry point (importing it would install signal handlers)
SKIP_MODULES = ("nsys_llm_explainer.__main__",)
RE_FUNCS = {"compile", "search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer"}


# ------------------------------------------------------------------------------------------- the built-in patterns
def _collect(value: object, where: str, out: Dict[Tuple[str, int], str], depth: int = 0) -> None:
    if isinstance(value, re.Pattern):
        out.setdefault((value.pattern, value.flags), where)
    elif depth < 5 and isinstance(value, dict):
        for k, v in value.items():
            _collect(v, f"{where}[{k!r}]", out, depth + 1)
    elif depth < 5 and isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _collect(v, f"{where}[{i}]", out, depth + 1)


#: ``re.<func>`` in a module's text: only the modules that have one are parsed (a seventh of them; parsing all took
#: a second of each test process's collection)
RE_CALL_TEXT = re.compile(r"\bre\s*\.\s*(?:" + "|".join(sorted(RE_FUNCS)) + r")\b")


def _literal_patterns() -> Iterator[Tuple[str, str]]:
    """(pattern, where) for every string literal given as the pattern of a ``re.<func>(...)`` call in the source."""
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if not RE_CALL_TEXT.search(text):
            continue
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RE_FUNCS
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                yield node.args[0].value, f"{path.relative_to(SRC)}:{node.lineno}"


def builtin_patterns() -> Dict[Tuple[str, int], str]:
    """(pattern, flags) → where it was found."""
    out: Dict[Tuple[str, int], str] = {}
    for mod in pkgutil.walk_packages([str(SRC)], "nsys_llm_explainer."):
        if mod.name.startswith(SKIP_MODULES):
            continue
        m = importlib.import_module(mod.name)
        for name, value in vars(m).items():
            _collect(value, f"{mod.name}.{name}", out)
    for preset in PRESETS:
        p = builtin_preset(preset)
        for i, (rx, cat) in enumerate(p.rules):
            out.setdefault((rx, re.IGNORECASE), f"preset {preset} rule #{i + 1} ({cat})")
        for rx in p.detect:
            out.setdefault((rx, re.IGNORECASE), f"preset {preset} detect")
    out.setdefault((DEFAULT_MARKER, re.IGNORECASE), "DEFAULT_MARKER")
    for rx, where in _literal_patterns():
        out.setdefault((rx, re.compile(rx).flags), where)
    return out


PATTERNS = builtin_patterns()
NAMES = adversarial()
#: the sweep of every built-in pattern over every hostile name uses 50 KB names: the cheapest quadratic scan
#: (``a*x`` on ``a…a``) takes ~1.5 s there, 6× the budget, and the sweep half the time of 100 KB names (the
#: patterns that did backtrack are checked on 100 KB names below, and a whole report on 100 KB names)
SWEEP_SIZE = 50_000
SWEEP_NAMES = adversarial(SWEEP_SIZE)


def test_every_kind_of_built_in_pattern_is_found() -> None:
    found = {p for p, _ in PATTERNS}
    assert len(PATTERNS) > 100
    for must in (traits._RX["tensor_core_gemm"].pattern, DEFAULT_MARKER, builtin_preset("generic").rules[1][0],
                 stack._STACKS[4][1]["kernel"][1].pattern, stack._STACKS[4][1]["nvtx"][1].pattern,
                 r"(?<![A-Za-z0-9])triton_(?:poi|red|per|tem)_", r"[^A-Za-z0-9._-]+", r"(\d+)"):
        assert must in found, must


def _slowest(fn: Callable[[str], object], names: List[str], budget: float = BUDGET_S) -> Tuple[float, str]:
    """The longest CPU time ``fn`` takes on one of ``names`` (best of two for any over the budget) and that name:
    CPU time of this process, so a loaded machine (other test workers) does not inflate it."""
    worst = (0.0, "")
    for n in names:
        best = float("inf")
        for _ in range(2):
            t = time.process_time()
            fn(n)
            best = min(best, time.process_time() - t)
            if best <= budget:
                break
        if best > worst[0]:
            worst = (best, n[:40])
    return worst


def _own_names(pattern: str) -> List[str]:
    """:data:`SWEEP_SIZE` names repeating the pattern's own literal words (with a separator, and in pairs)."""
    words = sorted(set(literal_runs(pattern)))[:40]
    names = [fill(w + sep, SWEEP_SIZE) for w in words for sep in ("", "_", "<", "0")]
    names += [fill(a + b, SWEEP_SIZE) for a, b in zip(words, words[1:])]
    return names


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(PATTERNS), ids=lambda k: k[0][:40])
def test_each_built_in_pattern_is_fast_on_each_hostile_name(key: Tuple[str, int]) -> None:
    rx = re.compile(*key)
    t, name = _slowest(rx.search, SWEEP_NAMES + _own_names(key[0]))
    assert t <= BUDGET_S, f"{PATTERNS[key]}: /{key[0]}/ took {t:.3f} s on {name!r}…"


def test_the_patterns_that_backtracked_are_fast_on_the_names_that_made_them_slow() -> None:
    """The fast set's part of the test above: the rules that took seconds to minutes before (all > 1 s)."""
    cases = [(traits._RX["simt"], fill("xmma")), (traits._RX["tensor_core_gemm"], fill("xmma_gemm_")),
             (traits._RX["tensor_core_gemm"], fill("bf16")), (traits._RX["conv"], fill("cudnn")),
             (trials._FFT_TRIAL_RX, fill("transpose")), (traits._RX["gemv_lt"], fill("gemv")),
             (stack._STACKS[4][1]["kernel"][1], fill("sm90_xmma_"))]
    for preset in PRESETS:
        rules = dict((c, rx) for rx, c in reversed(builtin_preset(preset).rules))
        cases += [(re.compile(rules["custom_allreduce"], re.I), fill("oneshot")),
                  (re.compile(rules["custom_allreduce"], re.I), fill("allreduce")),
                  (re.compile(rules["norm"], re.I), fill("triton_fused_"))]
    for rx, name in cases:
        t, _ = _slowest(rx.search, [name])
        assert t <= BUDGET_S, (rx.pattern, name[:20], t)


NAME_FUNCTIONS: Dict[str, Callable[[str], object]] = {
    "normalize_range_name": normalize_range_name,
    "gemv_float": traits._gemv_float,
    "api normalize": api_normalize,
    "nvtx name groups": lambda n: _name_groups([n]),
    "phase of names": lambda n: phase_of_names([n], build_phase_map(None)),
    "kernel traits": lambda n: traits.classify_names([n]),
    "stack": lambda n: stack.detect_stack([n], [n], [n], [n]),
    "categories": lambda n: classify([n], build_rules("generic")),
}


@pytest.mark.parametrize("fn", sorted(NAME_FUNCTIONS))
def test_name_functions_are_linear_on_hostile_names(fn: str) -> None:
    budget = 6 * BUDGET_S if fn in ("kernel traits", "stack", "categories") else BUDGET_S   # many patterns at once
    worst, name = _slowest(NAME_FUNCTIONS[fn], NAMES, budget)
    assert worst <= budget, (fn, worst, name)


# ------------------------------------------------------------------------------------------- same answers
PLAIN = {   # the rules as the docstrings write them, the oracle for their linear-time forms
    "simt": r"sgemm|cgemm|scudnn|xmma\w*f32f32_f32f32_f32|(?:gemv|gemmsn)\w*<.*float",
    "tensor_core_gemm": traits._TC_MARK + r"|nvjet|sm9\d_xmma|tcgen05|(?:bf16|tf32|fp8|e4m3)\w*gemm"
                        r"|xmma\w*(?:gemm|fprop|dgrad|wgrad)\w*(?:f16|tf32|fp8|e4m3|i8i8|int8)"
                        r"|marlin|machete|gemm_forward_4bit|cutlass_[23]x_gemm|gemm[^()]*(?:e4m3|e5m2)",
    "conv": r"convol|conv[123]d|(?<![a-z])conv_|winograd|im2col|scudnn|\d{3,5}cudnn|fprop|dgrad|wgrad|nhwckrsc"
            r"|cudnn::cnn|fft[12]d_[rc]2[rc]|dse::\w*fft|flip_filter|cudnn\S*fft",
    "fft_trial": r"fft[12]d_[rc]2[rc]|dse::\w*fft|flip_filter|cudnn\S*fft|cgemm|compute_gemm_pointers"
                 r"|transpose\w*<float2",
    "trt": r"(?<![a-z])trt_|_trt(?![a-z])",
    "custom_allreduce": r"(one|two)_?shot\w*all_?reduce|all_?reduce\w*(one|two)_?shot",
    "norm": r"triton_\w*fused\w*rsqrt",
}
PIECES = {   # the words each rule is made of, and separators
    "simt": ["xmma", "f32f32_f32f32_f32", "gemv", "gemmsn", "<", "float", "\n", "a", "_", " ", "sgemm", "A<"],
    "tensor_core_gemm": ["xmma", "gemm", "fprop", "dgrad", "wgrad", "f16", "tf32", "fp8", "e4m3", "i8i8", "int8",
                         "bf16", "_", "a", " ", "sm90", "(", ")", "e5m2", "<"],
    "conv": ["cudnn", "fft", " ", "dse::", "_", "a", ":", "conv_", "x"],
    "fft_trial": ["transpose", "<float2", "<", "float", "cudnn", "fft", "_", " ", "a"],
    "trt": ["sm", "90", "1", "_xmma_", "execute", "_", "a", " ", "trt", "xmma"],
    "custom_allreduce": ["one", "two", "_", "shot", "all", "reduce", "a", " ", "all_", "oneshot", "allreduce"],
    "norm": ["triton_", "fused", "rsqrt", "_", "a", " ", "triton"],
}
#: the rewritten parts of the generic preset's rules, as they stand in presets/categories_generic.json
PRESET_PARTS = {
    "custom_allreduce": r"(one|two)_?shot(?:(?!(?:one|two)_?shot)\w)*all_?reduce"
                        r"|all_?reduce(?:(?!all_?reduce)\w)*(one|two)_?shot",
    "norm": r"triton_(?:(?!triton_)\w)*fused(?:(?!fused)\w)*rsqrt",
}


def _linear_forms() -> Dict[str, Callable[[str], bool]]:
    generic = dict((c, rx) for rx, c in reversed(builtin_preset("generic").rules))
    parts = {k: re.compile(v, re.I) for k, v in PRESET_PARTS.items()}
    for k, v in PRESET_PARTS.items():
        assert v in generic[k], k
    return {
        "simt": lambda s: bool(traits._RX["simt"].search(s) or traits._gemv_float(s)),
        "tensor_core_gemm": lambda s: bool(traits._RX["tensor_core_gemm"].search(s)),
        "conv": lambda s: bool(traits._RX["conv"].search(s)),
        "fft_trial": lambda s: bool(trials._FFT_TRIAL_RX.search(s)),
        "trt": lambda s: bool(stack._STACKS[4][1]["kernel"][1].search(s)),
        "custom_allreduce": lambda s: bool(parts["custom_allreduce"].search(s)),
        "norm": lambda s: bool(parts["norm"].search(s)),
    }


def test_linear_forms_match_exactly_what_the_documented_rules_match() -> None:
    assert stack._STACKS[4][0] == "tensorrt" and stack._STACKS[4][1]["kernel"][0] == PLAIN["trt"]
    forms = _linear_forms()
    plain = {k: re.compile(v, re.I) for k, v in PLAIN.items()}
    rnd = random.Random(17)
    hits = dict.fromkeys(PLAIN, 0)
    for _ in range(5_000):
        for k, rx in plain.items():
            s = "".join(rnd.choice(PIECES[k]) for _ in range(rnd.randint(0, 10)))
            want = bool(rx.search(s))
            assert forms[k](s) == want, (k, s)
            hits[k] += want
    assert min(hits.values()) > 100, hits   # each rule matched often enough to mean something


def test_normalize_range_name_is_the_regex_it_replaced() -> None:
    old = re.compile(r"(?<![A-Za-z0-9])\d+|\d+(?![A-Za-z0-9])")
    rnd = random.Random(3)
    alphabet = "aZ0991_ -\u0663\u06f5\n:é"
    for _ in range(50_000):
        s = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 16)))
        assert normalize_range_name(s) == old.sub("N", s), s
    assert normalize_range_name("layer_12_attn") == "layer_N_attn"
    assert normalize_range_name("h2d_copy step 7") == "h2d_copy step N"
    assert normalize_range_name("a" + "1" * 100_000 + "a") == "a" + "1" * 100_000 + "a"
    assert normalize_range_name("x" + "1" * 10 + "\u0663" + "1" * 10 + "x") == "xN\u0663Nx"   # \d is Unicode


# ------------------------------------------------------------------------------------------- user patterns
HOSTILE = "(a+)+$"
A_NAME = "a" * 100_000 + "b"   # matched by its two ends: 4,096 a, a newline, 4,095 a and the b
NAMES_MIX = ["void gemm_kernel_tn<float>", "Sampling_TopK", "mm_kernel", "bmm", "", "x\udcff_kernel", "argmax\n2",
             "é_kernel", None, "k" * 10_000 + "_kernel"]


@pytest.mark.parametrize("patterns", [[DEFAULT_MARKER], ["zzz", r"gemm\w*_tn", "(?<![a-z])mm", "^void"],
                                      [r"\w+_kernel$", "."], ["^k+_kernel$"], ["sampling_topk|ARGMAX"]])
def test_first_match_answers_as_re_does(patterns: List[str]) -> None:
    want = [next((j for j, p in enumerate(patterns) if re.search(p, P.match_text(n), re.I)), -1) for n in NAMES_MIX]
    assert P.first_match(patterns, NAMES_MIX, "step_marker", [repr(p) for p in patterns]) == want
    assert P.match_text("k" * 10_000 + "_kernel") == "k" * 4096 + "\n" + "k" * 4089 + "_kernel"
    assert want[-1] == (-1 if patterns == ["^k+_kernel$"] else want[-1])   # the newline at the cut is never crossed


def test_where_regex_differs_from_re_as_documented() -> None:
    """docs/SECURITY.md: off ASCII, ``\\w`` follows Unicode (a combining accent is a word character, a
    superscript digit is not); ``{e<=1}`` is fuzzy matching where ``re`` reads it as text."""
    names = ["e\u0301", "x\u00b2", "ab", "a{e<=1}"]
    assert [bool(re.search(r"^\w+$", n)) for n in names[:2]] == [False, True]
    assert P.first_match([r"^\w+$"], names[:2], "step_marker", ["w"]) == [0, -1]
    assert [bool(re.search("^a{e<=1}$", n)) for n in names[2:]] == [False, True]
    assert P.first_match(["^a{e<=1}$"], names[2:], "step_marker", ["f"]) == [0, -1]


def test_a_pattern_that_expands_past_the_limit_is_refused_before_compiling() -> None:
    """``regex`` compiles ``{m,n}`` as m copies (``a{10000000}``: gigabytes); ``re`` accepts such a pattern."""
    for p in ("a{100001}", "(?:ab{1000}){101}", "x|(?:(?:a){400}){251}"):
        re.compile(p)
        with pytest.raises(OptionError) as e:
            P.first_match(["ok", p], ["name"], "categories_file", ["rule #1", "rule #2"])
        assert str(e.value) == ("categories_file rule #2 has repeats that expand to over 100,000 items (a repeat "
                                "{m,n} counts its body m times; names are matched on at most 8,193 characters): "
                                "lower the counts")
    assert P.first_match(["a{100000}", "(?:ab{999}){100}", "a{0,4294967294}"], ["a" * 8192, "b"], "o",
                         ["1", "2", "3"]) == [2, 2]


def test_a_signal_interrupts_a_hostile_match_on_the_main_thread(monkeypatch) -> None:
    """``regex`` lets the handler run inside the match: the run stops at once, not at the time limit."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        pytest.skip("needs the main thread and SIGTERM")
    monkeypatch.setattr(P, "TIMEOUT_S", 60.0)
    previous = interrupts.install()
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    t = time.monotonic()
    try:
        timer.start()
        with pytest.raises(Interrupted):
            P.first_match([HOSTILE], [A_NAME], "step_marker", [repr(HOSTILE)])
    finally:
        timer.cancel()
        interrupts.restore(previous)
        interrupts._STATE.update(fired=0, pending=None, defer=0)
    assert time.monotonic() - t < 3


# ------------------------------------------------------------------------------------------- end to end
def _hostile_trace(path: Path, names: List[str], nvtx: Sequence[str] = ()) -> None:
    from synth import TraceBuilder

    b = TraceBuilder()
    b.process(100, "proc")
    g = b.thread(100, 100, name="main")
    b.gpu(id=0)
    for i in range(6):
        s = 1_000_000 + i * 2_000_000
        for j, name in enumerate(names):
            if nvtx:
                b.nvtx_push_pop(s + j * 30_000, s + j * 30_000 + 25_000, nvtx[j % len(nvtx)], tid_g=g)
            a, k = s + 1000 + j * 30_000, s + 5000 + j * 30_000
            b.launch(a, a + 2000, k, k + 10_000, pid=100, tid=100, device=0, name=name)
    b.write(str(path), overwrite=True)


@pytest.mark.slow
def test_a_report_of_50_hostile_kernel_and_nvtx_names_takes_seconds(tmp_path: Path) -> None:
    """50 kernels and 50 NVTX ranges named by :func:`adversarial` (100 KB each): before, the trait and category
    rules and the NVTX naming backtracked for over 15 minutes (and SIGTERM could not stop them)."""
    from conftest import run_cli

    trace = tmp_path / "hostile.sqlite"
    _hostile_trace(trace, NAMES[:50], NAMES[-50:])
    t = time.monotonic()
    proc = run_cli(str(trace), "--out", str(tmp_path / "out"), "--quiet", timeout=120)
    took = time.monotonic() - t
    assert proc.returncode == 0, proc.stderr
    assert took < 30, took   # ~6 s here, most of it writing 35 MB of names into the outputs


def _cli(*args: str) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    return subprocess.Popen([sys.executable, "-m", "nsys_llm_explainer", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.fixture(scope="module")
def a_trace(tmp_path_factory) -> Path:
    trace = tmp_path_factory.mktemp("hostile") / "a.sqlite"
    _hostile_trace(trace, [A_NAME, "sampling_kernel", "gemm_kernel"])
    return trace


@pytest.mark.parametrize("how", ["step-marker", "categories"])
def test_a_hostile_user_pattern_is_one_line_exit_2_within_the_limit(monkeypatch, capsys, tmp_path: Path,
                                                                    a_trace: Path, how: str) -> None:
    """The command line's one line naming the option and the rule (in this process, the 5 s limit made 1 s)."""
    from nsys_llm_explainer.cli import main

    monkeypatch.setattr(P, "TIMEOUT_S", 1.0)
    monkeypatch.delenv("NSYS_LLM_EXPLAIN_DEBUG", raising=False)
    rules = tmp_path / "rules.json"
    rules.write_text('{"rules": [["gemm", "mine"], ["(a+)+$", "theirs"]]}', encoding="utf-8")
    opt = ["--step-marker", HOSTILE] if how == "step-marker" else ["--categories", str(rules)]
    t = time.monotonic()
    code = main([str(a_trace), "--out", str(tmp_path / "out"), "--quiet", *opt])
    assert time.monotonic() - t < P.TIMEOUT_S + 10
    lines = capsys.readouterr().err.splitlines()
    assert code == 2 and len(lines) == 1, lines
    where = f"--step-marker {HOSTILE!r}" if how == "step-marker" else f"--categories {rules}: rule #2 {HOSTILE!r}"
    assert lines[0] == (f"nsys-llm-explain: error: {where} did not finish within 1 s over 3 kernel name(s) (the "
                        "longest has 8,193 characters): nested repeats (as in '(a+)+') and backreferences "
                        "backtrack exponentially; simplify it")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_matching_stops_the_run(tmp_path: Path, a_trace: Path, sig: int, code: int) -> None:
    """Matching on the main thread stops at once; on the second analysis thread, when the running search ends
    (at most the 5 s limit): either way the run ends with the signal's code and one line."""
    proc = _cli(str(a_trace), "--out", str(tmp_path / "out"), "--quiet", "--step-marker", HOSTILE)
    time.sleep(2.0)   # started, reading or matching
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    # the match in flight ends within its limit; the rest is teardown, which a loaded 2-core CI stretches (20 s
    # seen at load 10), so no wall-clock bound but communicate's: the exit code tells a run that went on — it
    # would end with exit 2, the pattern's time-out — from a stopped one
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert err.splitlines() == [f"nsys-llm-explain: interrupted by {signal.Signals(sig).name}; no output was written"]
