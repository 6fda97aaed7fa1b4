"""Words of the findings: titles per idle-cause kind (the kinds' advice lines are in the kind table,
:data:`vocabulary.cause_kinds.CAUSE_KINDS`), and the titles and advice ids of two variants: back-to-back queued
kernels and Unified-Memory copies."""

from __future__ import annotations

from typing import Dict

CAUSE_TEXT: Dict[str, Dict] = {
    "copy": {
        "many": "Copies keep the kernels waiting: {share:.1f} % of the window",
        "title": "Copies keep the kernels waiting: `{what}` copies fill {share:.1f} % of the window",
        "by": "copy kind"},
    "copy_unified": {    # the copy finding when its largest copy kind is a Unified-Memory migration
        "many": "Unified-Memory migrations and copies keep the kernels waiting: {share:.1f} % of the window",
        "title": "Unified-Memory migrations (`{what}`) keep the kernels waiting: {share:.1f} % of the window",
        "by": "copy kind",
        "advice": ["um.see_finding", "um.prefetch", "um.advise"]},
    "queued_latency": {
        "title": "Per-kernel launch latency: idle between back-to-back queued kernels ({share:.1f} % of the "
                 "window)",
        "advice": ["queued_latency.fuse", "queued_latency.compile", "compiled.graph_breaks"]},
    "queued": {
        "title": "The GPU waits with work already queued ({share:.1f} % of the window): a stream/event dependency "
                 "or launch latency, not the host"},
    "sync": {
        "many": "Host blocks in synchronize calls while the GPU idles ({share:.1f} % of the window)",
        "title": "Host blocks in `{what}` while the GPU idles ({share:.1f} % of the window)",
        "by": "call"},
    "sync_memcpy": {
        "title": "Synchronous copies (`{what}`) stall the GPU ({share:.1f} % of the window)",
        "by": "call"},
    "pageable_memcpy": {
        "title": "`{what}` from pageable memory blocks the host ({share:.1f} % of the window)",
        "by": "call"},
    "alloc": {
        "many": "Allocation in the loop: the host is in alloc/free calls while the GPU idles "
                "({share:.1f} % of the window)",
        "title": "Allocation in the loop: the host is in `{what}` while the GPU idles ({share:.1f} % of the window)",
        "by": "call"},
    "module_load": {
        "title": "One-time cost: module loading / first launches (`{what}`) take {share:.1f} % of the window",
        "by": "call"},
    "launch": {
        "title": "Launch calls (`{what}`) hold the host while the GPU idles ({share:.1f} % of the window)",
        "by": "call"},
    "other_api": {
        "many": "The host is inside other CUDA calls while the GPU idles ({share:.1f} % of the window)",
        "title": "The host is inside `{what}` while the GPU idles ({share:.1f} % of the window)",
        "by": "call"},
    "nvtx": {
        "many": "The GPU idles while the host is in NVTX ranges ({share:.1f} % of the window)",
        "title": "The GPU idles while the host is in NVTX range `{what}` ({share:.1f} % of the window)",
        "by": "range"},
    "osrt": {
        "many": "The launching thread is blocked in OS calls while the GPU idles ({share:.1f} % of the window)",
        "title": "The launching thread is blocked in `{what}` (OS runtime) while the GPU idles "
                 "({share:.1f} % of the window)",
        "by": "call"},
    "host_cpu": {
        "title": "Host gaps: the launching thread works outside CUDA calls while the GPU idles "
                 "({share:.1f} % of the window)",
        "noun": "host work"},
    "unknown": {
        "title": "Idle with no linked host thread ({share:.1f} % of the window): its cause is unknown"},
}
