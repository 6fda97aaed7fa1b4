"""Identities shared by the synthetic exporter: flavors, serialized global ids, kernel short names."""

from __future__ import annotations

from functools import lru_cache
from typing import Dict, List, Tuple

__all__ = [
    "FLAVORS",
    "KERNEL_TABLE",
    "NA_U32",
    "OLD_KERNEL_TABLE",
    "VM_GLOBAL",
    "VM_ID",
    "global_pid",
    "global_tid",
    "pid_of",
    "short_kernel_name",
]

VM_ID = 1
VM_GLOBAL = VM_ID << 48
NA_U32 = 4294967295

# flavor -> (product version, schema version, checksum text, order index)
FLAVORS: Dict[str, Tuple[str, str, str, int]] = {
    "2021.5": ("2021.5.1.117", "2.7.1", "2816540463 93867", 0),
    "2022.4": ("2022.4.2.1", "3.0.0", "4042420554 115894", 1),
    "2023.4": ("2023.4.4.54", "3.7.2", "2307844469 139029", 2),
    "2024.2": ("2024.2.3.38", "3.11.1", "1402331367 146290", 3),
    "2026.2": ("2026.2.1.210", "3.25.0", "306658267 182758", 4),
}

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
OLD_KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"


def global_pid(pid: int, vm: int = VM_ID, hw: int = 0) -> int:
    """Serialized globalPid: <HW:8><VM:8><PID:24><TID:24=0>."""
    return (hw << 56) | (vm << 48) | ((pid & 0xFFFFFF) << 24)


def global_tid(pid: int, tid: int, vm: int = VM_ID, hw: int = 0) -> int:
    """Serialized globalTid: <HW:8><VM:8><PID:24><TID:24>."""
    return global_pid(pid, vm, hw) | (tid & 0xFFFFFF)


def pid_of(g: int) -> int:
    """PID bits of a serialized globalPid / globalTid."""
    return (g >> 24) & 0xFFFFFF


@lru_cache(maxsize=4096)
def short_kernel_name(name: str) -> str:
    """Bare function name as nsys puts it in ``shortName`` (no namespace, templates or args); cached: a trace
    launches a few names thousands of times."""
    s = name.strip()
    if s.startswith("void "):
        s = s[5:]
    out: List[str] = []
    i = 0
    while i < len(s):
        if s.startswith("(anonymous namespace)", i):
            out.append("(anonymous namespace)")
            i += len("(anonymous namespace)")
            continue
        c = s[i]
        if c in "<(":
            break
        out.append(c)
        i += 1
    base = "".join(out).strip()
    if "::" in base:
        base = base.rsplit("::", 1)[1]
    return base or name
