"""A device's role in the analysis window (``devices[].role``; docs/MODEL.md, "Pooled over the devices that ran
kernels"): one table that the GPU-time analysis, the report's device lines and the JSON schema's enum read."""

from typing import Dict, Tuple

#: a device that ran a kernel (or a whole-graph execution of a graph-level trace) in the window: counted
ROLE_KERNELS = "kernels"
#: a device that ran kernels in the window, but under ``MIN_BUSY_NS`` busy and fewer than ``MIN_KERNELS`` or under
#: ``MIN_BUSY_SHARE`` of the busiest device's busy time (analyses/idle/gpu_time.py), while another device has a
#: workload: a GPU a library touched once, a monitor's probes
ROLE_FEW = "few kernels"
#: a device that ran no kernel in the window but has memcpy/memset rows there (e.g. it only received copies)
ROLE_COPIES = "copies only"
#: a device with neither in the window
ROLE_IDLE = "idle"

#: every role, in the schema's order, with what it means in the device's line of the report ("": counted, no note)
ROLE_NOTES: Dict[str, str] = {
    ROLE_KERNELS: "",
    ROLE_FEW: "few kernels: too few to be a workload while another device has one, not counted in the GPU busy %",
    ROLE_COPIES: "copies only: ran no kernel in the window, not counted in the GPU busy %",
    ROLE_IDLE: "idle: ran neither kernels nor copies in the window, not counted in the GPU busy %",
}
ROLES: Tuple[str, ...] = tuple(ROLE_NOTES)
