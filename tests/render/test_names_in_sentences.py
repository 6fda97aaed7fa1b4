"""Hostile names inside the tool's sentences: names that the analyses write into a sentence —
the steps' confidence reason (NVTX names quoted with ``repr``), the steps' notes naming MoE-router / resampling
kernels, the step-sync evidence naming its thread — stay inert *and* keep the sentence true: a 100 KB name is
shortened where it stands (docs/SECURITY.md §4, "Long names"), never by cutting the sentence's middle away, and
report.html holds no more of it than report.md. Each trace is built by hand; the truth is in the docstring."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder
from test_claims_speculative_decoding import spec_trace

from nsys_llm_explainer import analyze
from nsys_llm_explainer.render import render_html, render_markdown
from nsys_llm_explainer.render.escape import CODE_LIMIT, TEXT_LIMIT, shorten_text

US = 1_000
MS = 1_000_000
LONG = "L" * 100_000


def _spec(path: Path, draft: str, verify: str) -> str:
    """Speculative decoding (as tests/findings/test_claims_speculative_decoding.py): one process, one thread, GPU 0; 30
    iterations of 2 ms from 10 ms: 4 ``draft`` ranges of 100 µs (one 60 µs draft kernel each), then a 300 µs ``verify``
    range launching the 900 µs target kernel and a 10 µs sampling kernel. The verify ranges are the step (79 % of the
    GPU time), confidence medium: they enclose 60 of the thread's 180 launches (33 %), the draft ranges ×120 between."""
    return spec_trace(draft, verify).write(str(path), overwrite=True)


def _short(name: str, limit: int = CODE_LIMIT) -> str:
    """``name`` as shortened for a reader: ⅘ head, middle ellipsis, ⅕ tail (escape.shorten)."""
    tail = limit // 5
    return name[:limit - 1 - tail] + "…" + name[-tail:]


def test_shorten_text_shortens_long_words_before_the_sentence() -> None:
    """Text over TEXT_LIMIT (2,000) characters: each run of over CODE_LIMIT (200) non-space characters is shortened
    to 200 (159 + '…' + 40) first; the sentence is then 31 + 200 + 31 = 262 characters and stays whole. Text within
    the limit is unchanged, and a sentence of many short words is still cut at 2,000."""
    s = "NVTX range 'verify_step" + LONG + "' (30 instances) looks"
    assert shorten_text(s) == "NVTX range " + _short("'verify_step" + LONG + "'") + " (30 instances) looks"
    assert shorten_text("a" * 300 + " b") == "a" * 300 + " b"
    many = "ab " * 1_000
    assert len(shorten_text(many)) == TEXT_LIMIT


def test_confidence_reason_with_long_range_names_keeps_its_sentence(tmp_path: Path) -> None:
    """The spec trace with ranges ``draft_step`` + 100 KB and ``verify_step`` + 100 KB. The confidence reason reads
    "NVTX range `verify_step…` (30 instances) looks like a step but encloses only 33% of the kernel launches of its
    threads; with `draft_step…` ×120 between its instances, parts of one iteration: …". report.md cut the whole
    reason to 2,000 characters with a middle ellipsis: "NVTX range 'verify_stepL…L' ×120 between its instances"
    — the coverage sentence gone and the draft ranges' count given to the verify range; report.html wrote the
    reason whole, both 100 KB names in it. Each name is now a code span (vocabulary.code_spans.code_name, no longer
    ``repr``), shortened where it stands (200 characters), in both."""
    p = _spec(tmp_path / "t.sqlite", "draft_step" + LONG, "verify_step" + LONG)
    rep = analyze(p)
    md, page = render_markdown(rep), render_html(rep)
    v, d = _short("verify_step" + LONG), _short("draft_step" + LONG)
    assert (f"NVTX range `{v}` (30 instances) looks like a step but encloses only 33% of the kernel launches of its "
            f"threads; with `{d}` ×120 between its instances, parts of one iteration") in md
    assert (f"NVTX range <code>{v}</code> (30 instances) looks like a step but encloses only 33% of the kernel "
            f"launches of its threads; with <code>{d}</code> ×120 between its instances, parts of one "
            "iteration") in page
    page_text = page.split('<script type="application/json"', 1)[0]     # the data island keeps names exactly
    assert "L" * 5_000 not in md and "L" * 5_000 not in page_text


def _marker_loop(path: Path, router: str, resample: str) -> str:
    """No NVTX; 40 steps on GPU 0 of ``gemm_a`` 100 µs, ``router`` 10, ``resample`` 10, ``router`` 10, ``gemm_b``
    100 and ``argmax_kernel`` 5 µs: steps by the default marker (``argmax``), ``router`` (a MoE router: 80 launches)
    and ``resample`` (an up-sampling kernel: 40) left out of the marker, each named in a note."""
    b = TraceBuilder()
    b.process(10, "p")
    b.thread(10, 10, "t")
    b.gpu(0)
    t = 1 * MS
    for _ in range(40):
        for nm, d in (("gemm_a", 100), (router, 10), (resample, 10), (router, 10), ("gemm_b", 100),
                      ("argmax_kernel", 5)):
            b.launch(t - 5 * US, t - 1 * US, t, t + d * US, pid=10, tid=10, device=0, name=nm)
            t += (d + 5) * US
        t += 300 * US
    return b.write(str(path), overwrite=True)


def test_step_notes_show_their_kernel_names_as_names(tmp_path: Path) -> None:
    """The router / resampling notes name kernels in backticks ("… not once per step): `moe_topk_router…` (80)").
    They were rendered as plain text: the backticks shown as characters (``&#96;`` in report.md) and a 100 KB name
    kept up to the 2,000-character text limit. As names they are monospace, shortened to 200 characters."""
    router, resample = "moe_topk_router" + LONG, "upsample_nearest<float>"
    rep = analyze(_marker_loop(tmp_path / "t.sqlite", router, resample))
    md, page = render_markdown(rep), render_html(rep)
    assert ("- Note: MoE router kernels left out of the default step marker (they run once per MoE layer, not once "
            f"per step): `{_short(router)}` (80)") in md
    assert ("not token sampling): <code>upsample_nearest&lt;float&gt;</code> (40)") in md
    assert f"per step): <code>{_short(router)}</code> (80)" in page
    assert "L" * 5_000 not in md and "L" * 5_000 not in page.split('<script type="application/json"', 1)[0]


def _cycle(b: TraceBuilder, pid: int, T: int, name: str, thread: str) -> None:
    """As tests/findings/test_claims_shared_gpu.py: 10 launches, kernels back to back [T + 20, T + 920) µs, then a
    ``cudaStreamSynchronize`` [T + 100, T + 925) µs, on thread ``thread`` (tid = pid)."""
    g = b.thread(pid, pid, thread)
    for i in range(10):
        a = T + i * 10 * US
        b.launch(a, a + 6 * US, T + (20 + 90 * i) * US, T + (110 + 90 * i) * US, pid=pid, tid=pid, name=name)
    c = b.runtime(T + 100 * US, T + 925 * US, tid_g=g, name="cudaStreamSynchronize_v3020")
    b.sync(T + 102 * US, T + 922 * US, pid=pid, sync_type=3, corr=c)


def test_a_thread_name_with_backticks_is_shown_whole_in_the_step_sync_evidence(tmp_path: Path) -> None:
    """Two engines time-sliced on GPU 0 (test_claims_shared_gpu's ``_two_engines``), engine A's thread named ``\\`x\\`
    <b>``. The step-sync evidence was built as "Device 0, thread `{name}` (pid 100, tid 100): …"; the name's own
    backticks paired with the sentence's, so report.md read "Device 0, thread x<code> &lt;b&gt;</code> (pid 100 …": the
    name shown as ``x`` and a code span `` <b>``, not as itself (inert, but not the thread's name). With an odd count of
    backticks in a name every code span of the evidence turned to plain text. The name is now written by
    ``vocabulary.code_spans.code_name`` as the fenced span "`` `x` <b> ``" (docs/SECURITY.md §4, "Names in sentences"),
    which report.md shows as the one name, escaped in ``<code>``."""
    b = TraceBuilder()
    b.process(100, "A")
    b.process(200, "B")
    for c in range(50):
        T = 1 * MS + c * 2 * MS
        _cycle(b, 100, T, "vllm_gemm", "`x` <b>")
        _cycle(b, 200, T + 1 * MS, "sgl_gemm", "B")
    md = render_markdown(analyze(b.write(str(tmp_path / "t.sqlite"), overwrite=True)))
    assert "- Device 0, thread <code>&#96;x&#96; &lt;b&gt;</code> (pid 100, tid 100): 50 blocking calls" in md


def _start_up(path: Path, api: str) -> str:
    """One thread of pid 7: ``api`` (a CUDA runtime call the tool does not classify: `other_api`) [0, 3,000 µs), then
    100 kernels of 9 µs every 10 µs from 3,010 µs, each launched 8 µs ahead by a 2 µs call (last ends 4,009 µs)."""
    b = TraceBuilder()
    b.process(7, "p")
    g = b.thread(7, 1, "t")
    b.runtime(0, 3_000 * US, tid_g=g, name=api + "_v4000")
    for i in range(100):
        t = 3_010 * US + i * 10 * US
        b.launch(t - 8 * US, t - 6 * US, t, t + 9 * US, pid=7, tid=1, name="gemm")
    return b.write(str(path), overwrite=True)


def test_the_terminal_verdict_shortens_a_long_name_where_it_stands(tmp_path: Path) -> None:
    """Window [0, 4,009 µs): the leading gap holds the whole call, so the verdict is the start-up finding's title,
    "Start-up, not the loop: GPU idle in other CUDA API calls (`NAME`) before the GPU's first kernel, 74.6 % of the
    window (2.992 ms, once)", NAME = `cudaHostRegister` + markup, ESC, a bidi override and 100 KB of L. The line is
    over the terminal's 300 characters: the terminal cut its middle ("(`` cudaHostRegisterx`<script>…LLL…he GPU's
    first kernel": the name's closing fence and "before t" gone). The name is now shortened to 80 characters where it
    stands (63 + '…' + 16 L, visible escapes; fenced with ``, as it still holds a backtick) and the sentence stays
    whole; report.md is unchanged (its name at 200). A line within 300 characters keeps a 100-character name whole
    (the real traces' summaries: unchanged)."""
    from nsys_llm_explainer.options import options_from_kwargs
    from nsys_llm_explainer.pipeline import analyze_path
    from nsys_llm_explainer.render import summary_lines
    from nsys_llm_explainer.render.escape import term_text

    hostile = "cudaHostRegisterx`<script>alert(1)</script>|*_[a](http://e.x)&\"'\x1b[31m\u202e" + LONG
    p = _start_up(tmp_path / "t.sqlite", hostile)
    rep = analyze_path(p, options_from_kwargs(window=(0, 4_009 * US)))
    verdict = term_text(summary_lines(rep)[0])
    name = "cudaHostRegisterx`<script>alert(1)</script>|*_[a](http://e.x)&\"" + "…" + "L" * 16
    assert verdict == ("verdict: Start-up, not the loop: GPU idle in other CUDA API calls (`` " + name + " ``) before "
                       "the GPU's first kernel, 74.6 % of the window (2.992 ms, once)"), verdict
    assert "\x1b" not in verdict and "\u202e" not in verdict
    plain100 = "cudaHostRegister" + "a" * 84
    rep = analyze_path(_start_up(tmp_path / "u.sqlite", plain100), options_from_kwargs(window=(0, 4_009 * US)))
    assert term_text(summary_lines(rep)[0]) == (
        f"verdict: Start-up, not the loop: GPU idle in other CUDA API calls (`{plain100}`) before the GPU's first "
        "kernel, 74.6 % of the window (2.992 ms, once)")
