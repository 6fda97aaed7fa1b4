"""Names built to make a backtracking regex slow (docs/SECURITY.md "Bounded matching"): 100 KB each — long templated C++
kernel names nested thousands deep, long digit runs, long runs of the characters patterns alternate on, and the literal
pieces of the built-in patterns repeated (``xmmaxmma…``, ``triton_fused_triton_fused_…``, ``sm90_xmma_…``)."""

from __future__ import annotations

from typing import Iterable, List

SIZE = 100_000


def fill(piece: str, size: int = SIZE) -> str:
    """``piece`` repeated to ``size`` characters."""
    return (piece * (size // max(1, len(piece)) + 1))[:size]


def nested_template(depth: int) -> str:
    """``void f<A<A<…x…>>>(int, float)``: a templated kernel name nested ``depth`` deep."""
    return "void f<" + "A<" * depth + "x" + ">" * depth + ">(int, float)"


#: pieces that the built-in kernel / NVTX / API patterns alternate on or scan between
PIECES = (
    "a", "_", "0_", "1", "a1", " ", ":", "::", "/a", "<", "<float", "\n", "gemv<", "gemmsn", "xmma", "xmma_gemm_",
    "sm90_xmma_", "bf16", "f32f32_", "cudnn", "transpose", "dse::", "oneshot", "two_shot", "allreduce",
    "all_reduce_", "triton_", "triton_fused_", "fused", "[kernel", "vmlinux", "_v1", "_v", "layer_", "nccl",
    "tensorrt:", "onnx::", "/Conv_", "/A/B", "sampl", "top_k", "ncclKernel_", "flash", "step_",
)


def adversarial(size: int = SIZE) -> List[str]:
    """The fixed set of hostile names (≈ 60, ``size`` characters or more each)."""
    depth = size // 3
    names = [
        fill("a", size) + "b", "a" + fill("1", size) + "a", "layer_" + fill("9", size) + "_attn",
        "x" + fill("1", size // 2) + "\u0663" + fill("1", size // 2) + "x",       # a non-ASCII digit inside a run
        nested_template(depth), "void gemv<" + "A<float, " * (size // 9) + ">(float)",
        "void xmma_gemm<" + "cutlass::gemm::GemmShape<128, 128, 64>, " * (size // 40) + ">()",
        "triton_" + fill("fused_", size) + "rsqr", "cudnn" + fill("x", size) + "ff",
    ]
    names += [fill(p, size) for p in PIECES]
    names += [fill(p + "_", size) for p in PIECES if p.isalnum()]
    return names


def literal_runs(pattern: str) -> Iterable[str]:
    """The literal words of a regex's text (letters, digits, ``_``, ``:``), for names that repeat them."""
    word = ""
    for c in pattern + "|":
        if c.isalnum() or c in "_:":
            word += c
        else:
            if len(word) >= 2:
                yield word
            word = ""
