"""The typed :class:`report.Report` → the ``report.json`` dict, and back (:func:`report_values`, for
``Report.from_dict``): each result serialises itself (``to_dict()``, rebuilt by :func:`jsonable.from_json`); this
module only places the parts under their ``report.json`` keys (docs/DESIGN.md, "Loading a report").
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Tuple, get_type_hints

from .jsonable import check_schema, from_json, json_ready, need

if TYPE_CHECKING:
    from .report import Report

SCHEMA_VERSION = "2.1"
#: what :func:`report_values`' messages call the dict
JSON = "report.json"


#: the first ``report.json`` keys :func:`report_dict` writes, in order: a part it puts together, or a
#: :class:`report.Report` field of that name
ORDER = ("schema_version", "tool_version", "headline", "window", "window_repeats", "trace", "options", "warnings",
         "findings", "devices", "gpu_time", "idle_causes", "timeline", "kernel_traits", "facts", "kernels",
         "kernels_summary", "steady_kernels", "pids", "launch", "sync", "cuda_api", "memcpy", "nvtx", "phases",
         "categories", "steps", "graphs", "memory", "nccl", "timings_s", "unified_memory", "copy_engines",
         "host_samples", "step_sync")
SUMMARY_KEYS = ("available", "reason", "total_kernel_ns", "kernel_count", "by_name")


def report_dict(report: Report) -> Dict[str, Any]:
    """The ``report.json`` dict of ``report``: the keys of :data:`ORDER`, then every other field (but those
    :data:`MOVED` or :data:`NOT_CARRIED`) under its own name — so a new analysis needs no line here."""
    k, sk = report.kernels.to_dict(), report.steady_kernels.to_dict()
    gpu = json_ready(report.gpu_time)
    made = {
        "schema_version": SCHEMA_VERSION,
        "devices": gpu.pop("devices"),   # the rest of it is gpu_time
        "gpu_time": gpu,
        "timeline": {"bins": len(report.idle_causes.bins[0].busy_ns) if report.idle_causes.bins else 0,
                     "devices": [b.to_dict() for b in report.idle_causes.bins]},
        "kernel_traits": json_ready(report.traits),
        "kernels": k["by_name_device"],
        "kernels_summary": {key: k[key] for key in SUMMARY_KEYS},
        # kernels by name over the analysis window (clipped to it); no rows when it is the whole capture (then
        # kernels_summary holds the same numbers)
        "steady_kernels": {**{key: sk[key] for key in SUMMARY_KEYS}, **({"available": False, "by_name": [], "reason":
                           "the analysis window is the whole capture"} if report.window.is_full else {})},
        "pids": {"by_pid": k["by_pid"], "kernels_by_pid": k["by_pid_name"]},
        "nvtx": {**report.nvtx.to_dict(), "attribution": report.attribution.to_dict()},
    }
    rest = [f.name for f in fields(report) if f.name not in ORDER and f.name not in MOVED and f.name not in NOT_CARRIED]
    return {key: made[key] if key in made else json_ready(getattr(report, key)) for key in (*ORDER, *rest)}


# ------------------------------------------------------------------------------------------ and back
def _obj(d: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return from_json(Dict[str, Any], need(d, key, JSON), f"{JSON} {key}")


def _part(d: Mapping[str, Any], key: str, sub: str) -> Any:
    return need(_obj(d, key), sub, f"{JSON} {key}")


#: the :class:`report.Report` fields :func:`report_dict` does not write under their own name:
#: field → (the ``report.json`` key named in messages, the JSON of its value put back together from the dict);
#: every other field (:data:`NOT_CARRIED` and ``steady_kernels`` aside) is read from the key of its name
MOVED: Dict[str, Tuple[str, Callable[[Mapping[str, Any]], Any]]] = {
    "traits": ("kernel_traits", lambda d: need(d, "kernel_traits", JSON)),
    "gpu_time": ("gpu_time", lambda d: {**_obj(d, "gpu_time"), "devices": need(d, "devices", JSON)}),
    "idle_causes": ("idle_causes", lambda d: {**_obj(d, "idle_causes"), "bins": _part(d, "timeline", "devices")}),
    "kernels": ("kernels_summary", lambda d: {**_obj(d, "kernels_summary"), "by_name_device": need(d, "kernels", JSON),
                                              "by_pid": _part(d, "pids", "by_pid"),
                                              "by_pid_name": _part(d, "pids", "kernels_by_pid")}),
    "attribution": ("nvtx.attribution", lambda d: _part(d, "nvtx", "attribution")),
}
#: fields ``report.json`` does not carry: None in a report loaded from it
NOT_CARRIED = frozenset({"steady_kernel_starts", "steady_categories", "clock", "nccl_series", "period_parts",
                         "harness"})


def report_values(report_type: type, d: Any) -> Dict[str, Any]:
    """The field values of ``report_type`` (:class:`report.Report`) of the ``report.json`` dict ``d``: the inverse
    of :func:`report_dict`. ``model`` / ``steady`` are None; ``steady_kernels`` is ``kernels`` when the window is
    the whole capture (the dict then holds no rows of its own), else its by-name rows (its other tables are not
    in the dict: empty). :class:`errors.InputError` (one line naming the key) for another schema or a missing
    or malformed part."""
    check_schema(d, JSON, SCHEMA_VERSION, "schema", "analyze the trace again")
    hints = get_type_hints(report_type)
    out: Dict[str, Any] = {}
    for f in fields(report_type):
        name = f.name
        if name in NOT_CARRIED:
            out[name] = None
        elif name == "steady_kernels":   # its by-name rows only (None when the window is the whole capture)
            sk = {**_obj(d, name), "by_name_device": [], "by_pid": [], "by_pid_name": []}
            out[name] = out["kernels"] if out["window"].is_full else from_json(hints[name], sk, f"{JSON} {name}")
        else:
            moved = MOVED.get(name)
            value = moved[1](d) if moved else need(d, name, JSON)
            out[name] = from_json(hints[name], value, f"{JSON} {moved[0] if moved else name}")
    return out
