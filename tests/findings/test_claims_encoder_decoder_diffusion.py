"""Encoder-decoder, multimodal and diffusion workloads (a Stable-Diffusion loop: text encoder, UNet denoising steps, VAE
decode; Whisper: audio encoder once per request, then decoder steps). Each trace is built by hand; the truth is worked
out in the docstrings."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List

from claims_support import finding_of, report_of
from synth import TraceBuilder

US = 1_000
MS = 1_000 * US
A100 = dict(name="NVIDIA A100-SXM4-80GB", sm_count=108, computeMajor=8, computeMinor=0)
CONV16 = ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_stage4_warpsize2x2x1_g1_"
          "tensor16x8x16_execute_kernel__5x_cudnn")
CONV32 = ("void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int, "
          "float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, "
          "float const*, float const*, bool, int, int)")
UP = ("void at::native::(anonymous namespace)::upsample_nearest2d_out_frame<c10::Half, at::native::nearest_idx>("
      "c10::Half const*, c10::Half*, unsigned long, unsigned long, unsigned long, unsigned long, unsigned long, float, "
      "float)")
FLASH = ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4, false, false, cutlass::half_t>"
         ", false, false, false, false, true, true, false, false>(Flash_fwd_params)")
GEMM = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn"
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::Half>, at::detail::Array<char*, 3>)")
ARGMAX = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
          "unsigned int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4>)")


class _Loop:
    """Thread 100 of pid 100 launches kernels in order on stream 7 of device 0: a 5 µs launch call, the next call 3 µs
    after it returns; each kernel starts 2 µs after its call returns or when the previous kernel ends, whichever is
    later."""

    def __init__(self, b: TraceBuilder) -> None:
        self.b, self.t, self.gpu = b, 1 * MS, 0
        self.g = b.thread(100, 100, "python3")

    def k(self, name: str, dur: int) -> None:
        ks = max(self.t + 7 * US, self.gpu)
        self.b.launch(self.t, self.t + 5 * US, ks, ks + dur, pid=100, tid=100, name=name)
        self.gpu, self.t = ks + dur, self.t + 8 * US

    def rng(self, name: str, body: Callable[[], None], nvtx: bool) -> None:
        """``body`` inside a push/pop range ``name`` that closes 1 µs after its last launch call (none when not
        ``nvtx``)."""
        s = self.t
        body()
        self.t += 1 * US
        if nvtx:
            self.b.nvtx_push_pop(s, self.t, name, tid_g=self.g)

    def sync(self) -> None:
        e = max(self.t + 2 * US, self.gpu + 2 * US)
        c = self.b.runtime(self.t, e, tid_g=self.g, name="cudaStreamSynchronize_v3020")
        self.b.sync(self.t + 1 * US, e - 1 * US, pid=100, corr=c)
        self.t = e + 1 * US


def _diffusion(nvtx: bool = True, conv: str = CONV16, conv_ns: int = 60 * US, images: int = 3,
               steps: int = 5) -> TraceBuilder:
    """A Stable-Diffusion loop on one A100: per image a `text_encoder` range (6 × [GEMM 30 µs, flash 15 µs]), then
    ``steps`` `unet` ranges (3 blocks of [conv, add 6 µs, flash 40 µs, upsample 12 µs]) each followed by the
    scheduler's add (5 µs), a `vae.decode` range (3 × [conv 150 µs, upsample 30 µs]), a stream sync and 5 ms of host
    work (saving the image). No kernel of it samples a token: the `upsample_nearest2d` kernels resize feature maps,
    3 per UNet step and 3 per VAE decode."""
    b = TraceBuilder()
    b.gpu(0, **A100)
    b.process(100, "python3")
    lp = _Loop(b)

    def text() -> None:
        for _ in range(6):
            lp.k(GEMM, 30 * US)
            lp.k(FLASH, 15 * US)

    def unet() -> None:
        for _ in range(3):
            lp.k(conv, conv_ns)
            lp.k(ADD, 6 * US)
            lp.k(FLASH, 40 * US)
            lp.k(UP, 12 * US)

    def vae() -> None:
        for _ in range(3):
            lp.k(conv, 150 * US)
            lp.k(UP, 30 * US)
    for _ in range(images):
        lp.rng("text_encoder", text, nvtx)
        for _ in range(steps):
            lp.rng("unet", unet, nvtx)
            lp.k(ADD, 5 * US)
        lp.rng("vae.decode", vae, nvtx)
        lp.sync()
        lp.t += 5 * MS
    return b


def test_vae_decode_is_no_decode_step(tmp_path: Path) -> None:
    """(trace: :func:`_diffusion`, 3 images × 5 UNet steps) The denoising steps are the 15 `unet` ranges; the 3
    `vae.decode` ranges (once per image, after the loop: 6 of the 246 kernels) are no LLM decode step. The report
    read "3 steps from NVTX range `vae.decode`" (confidence medium, "looks like a step": `decode` is a step keyword)
    with a phase table row "decode | 3" — an LLM word for a VAE. Now: no range name looks like a step, so the most
    frequent top-level range, `unet` (15 instances), is used at low confidence, and no range has a phase."""
    rep = report_of(_diffusion(), tmp_path)
    st = rep["steps"]
    assert (st["method"], st["step_ranges"], st["step_count"], st["confidence"]) == ("nvtx", ["unet"], 15, "low")
    assert [p["phase"] for p in rep["phases"]["phases"] if p["range_count"]] == [], rep["phases"]["phases"]


def test_upsample_kernels_are_no_step_markers(tmp_path: Path) -> None:
    """(trace: :func:`_diffusion` without NVTX) Nothing marks the steps: no NVTX, and no argmax / sampling / top-k
    kernel. The default step marker's `sampl` matched `upsample_nearest2d`: 3 × (5 × 3 + 3) = 54 markers gave 53
    "steps" of a third of a UNet forward each (or a VAE stage). Now the resampling kernels are left out (a note names
    them, 54 kernels) and no steps are claimed."""
    rep = report_of(_diffusion(nvtx=False), tmp_path)
    st = rep["steps"]
    assert st["method"] == "none" and not st.get("step_count"), (st["method"], st.get("step_count"))
    assert "Resampling kernels left out of the default step marker" in st["reason"] and "(54)" in st["reason"]


def test_upsample_kernels_are_not_the_sampling_category(tmp_path: Path) -> None:
    """(trace: :func:`_diffusion`) The generic preset's `sampling` rule (`sampl|top_?k|…`) put the 54
    `upsample_nearest2d` kernels (3 × (5 × 12 × 3 + 3 × 30) µs = 810 µs) in `sampling` ("sampling 6 %" in the
    GPU-bound finding of a diffusion model, which samples no token). Now `sampling` holds no kernel and the upsample
    kernels are `elementwise` (PyTorch's `at::native`), with the adds: 54 + 3 × (5 × 3 + 5) = 114 kernels."""
    rep = report_of(_diffusion(), tmp_path)
    cats = {c["category"]: c for c in rep["categories"]["overall"]}
    assert "sampling" not in cats or cats["sampling"]["count"] == 0, cats.get("sampling")
    assert cats["elementwise"]["count"] == 114


def test_fp32_convolutions_are_told_cudnn_settings(tmp_path: Path) -> None:
    """(trace: :func:`_diffusion` with FP32 convolutions `implicit_convolve_sgemm<float, …>` of 200 µs on an A100)
    Conv time 3 × (5 × 3 + 3) = 54 kernels: 45 × 200 + 9 × 150 µs = 10.350 ms of 3 × (6 × 45 + 5 × 3 × 58 + 5 × 5 +
    3 × 30) µs + 10.350 ms = 14.115 ms of kernel time (73.3 %), all of the FP32 SIMT time. The finding read "FP32
    GEMMs run on CUDA cores" and advised `torch.backends.cuda.matmul.allow_tf32 = True` /
    `set_float32_matmul_precision('high')`, which do not reach cuDNN's convolutions. Now it says "FP32 convolutions"
    and gives cuDNN's `torch.backends.cudnn.allow_tf32` instead of the matmul line."""
    rep = report_of(_diffusion(conv=CONV32, conv_ns=200 * US), tmp_path)
    tr = rep["kernel_traits"]["traits"]
    assert tr["fp32_conv_simt"]["total_ns"] == tr["fp32_gemm_simt"]["total_ns"] == 10_350 * US
    f = finding_of(rep, "fp32_gemm")
    assert f["title"] == "FP32 convolutions run on CUDA cores, not tensor cores: 73.3 % of kernel time"
    adv: List[str] = f["recommendation"]
    assert not any("matmul.allow_tf32" in a for a in adv), adv
    assert any("torch.backends.cudnn.allow_tf32 = True" in a for a in adv), adv


def _whisper(requests: int = 2, steps: int = 10) -> TraceBuilder:
    """Whisper on one A100: per request an `encoder` range (12 × [GEMM 120 µs, flash 150 µs]), then ``steps``
    `decoder_step` ranges (4 × [GEMM 15 µs, flash 10 µs], an argmax 4 µs, a stream sync: the token read back), then
    2 ms of host work."""
    b = TraceBuilder()
    b.gpu(0, **A100)
    b.process(100, "python3")
    lp = _Loop(b)

    def enc() -> None:
        for _ in range(12):
            lp.k(GEMM, 120 * US)
            lp.k(FLASH, 150 * US)

    def dec() -> None:
        for _ in range(4):
            lp.k(GEMM, 15 * US)
            lp.k(FLASH, 10 * US)
        lp.k(ARGMAX, 4 * US)
        lp.sync()
    for _ in range(requests):
        lp.rng("encoder", enc, True)
        for _ in range(steps):
            lp.rng("decoder_step", dec, True)
        lp.t += 2 * MS
    return b


def test_whisper_decoder_steps_are_the_steps(tmp_path: Path) -> None:
    """(trace: :func:`_whisper`) The 20 `decoder_step` ranges (step-like: `step`) are the steps, enclosing 180 of
    the 228 kernel launches (79 %: high); `decoder` is on the phase map's ignore list, so they have no phase (no
    "decode" phase claimed from a layer name, though here it would be true)."""
    rep = report_of(_whisper(), tmp_path)
    st = rep["steps"]
    assert (st["method"], st["step_ranges"], st["step_count"], st["confidence"]) == (
        "nvtx", ["decoder_step"], 20, "high")
