"""GPU work: top kernels (analysis window, or whole capture), kernel traits, kernel categories (in HTML with a
chart of non-overlapped time), launch rate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Sequence

from ...vocabulary.units import fmt_count, fmt_dur, fmt_pct
from ..charts import hbar, plot_text
from ..document import (
    Chart,
    Code,
    Data,
    Figure,
    Omitted,
    Rich,
    Section,
    SectionResult,
    Strong,
    TablePart,
    inline,
    joined,
    para,
    parts,
)
from ..specs import CATEGORIES, KERNEL_TRAITS, KERNELS, LAUNCH
from .ctx import View

if TYPE_CHECKING:
    from ...analyses.kernels.categories import CategoryRow


def sec_kernels(v: View) -> SectionResult:
    """Top kernels of the analysis window when it was trimmed, else of the whole capture."""
    ks, st = v.r.kernels, v.r.steady_kernels
    rows = ks.by_name
    if not ks.available or not rows:
        return Omitted("Top kernels", ks.reason or "no kernels")
    if st.available and not v.r.window.is_full and st.by_name:
        rows = st.by_name
        scope = inline(Strong(("Analysis window",)), f", all devices (kernels clipped to it): "
                       f"{fmt_count(st.kernel_count, 'kernel')}, {fmt_dur(st.total_kernel_ns)} of summed "
                       f"kernel time; the whole capture ({fmt_count(ks.kernel_count, 'kernel')}) is in ",
                       Code(f"tables/{KERNELS.csv}"), ". ")
    else:
        scope = inline(Strong(("Whole capture",)), f", all devices: {fmt_count(ks.kernel_count, 'kernel')}, "
                       f"{fmt_dur(ks.total_kernel_ns)} of summed kernel time. ")
    shown = rows[: v.top]
    count = (f"Showing {len(shown)} of {len(rows)} names" if len(rows) > len(shown) else
             "One name" if len(rows) == 1 else f"All {len(rows)} names")
    note = inline(scope, count, "; per device in ", Code(f"tables/{KERNELS.csv}"), ".")
    return Section("kernels", "Top kernels", (para(note), TablePart(KERNELS.cols, shown, (), "top-kernels")),
                   "Top kernels")


def sec_traits(v: View) -> SectionResult:
    kt = v.r.traits
    if not kt.available:
        return Omitted("Kernel traits", kt.reason or "not in this report")
    facts: List[Any] = []
    if kt.workload:
        ev = kt.workload_evidence[0] if kt.workload_evidence else ""
        facts.append(inline(Strong(("Workload:",)), " ", Data(kt.workload), (" (", Rich(ev), ")") if ev else None))
    if kt.stack:
        facts.append(inline(Strong(("Stack:",)), " ", Data(kt.stack)))
    rows = sorted(KERNEL_TRAITS.rows(v.r), key=lambda r: -r.share_pct)
    note = (f"Kernel-name traits over the analysis window ({fmt_count(kt.kernel_count, 'kernel')}, "
            f"{fmt_dur(kt.total_kernel_ns)}); a kernel may have several traits.")
    return Section("traits", "Kernel traits", parts(
        para(note), para(joined(facts, " · ")) if facts else None,
        TablePart(KERNEL_TRAITS.cols, rows, (), "kernel-traits") if rows else para("No kernel matched a trait.")))


def _category_chart(rows: Sequence[CategoryRow]) -> Figure:
    labels = [plot_text(r.category, 40) for r in rows]
    hover = [f"{lab}<br>{fmt_dur(r.nonoverlap_ns)} not overlapped · {fmt_pct(r.nonoverlap_pct)} %"
             f" · {fmt_count(r.count, 'kernel')}" for lab, r in zip(labels, rows)]
    cap = inline("Non-overlapped kernel time per category, whole capture, all devices (the time no kernel of "
                 "another category overlaps). Text equivalent: report.json ", Code("categories.overall[]"), " (",
                 Code("nonoverlap_ns"), ", ", Code("nonoverlap_pct"), "), ", Code("tables/categories.csv"), ".")
    return hbar("categories-chart", labels, [r.nonoverlap_ns for r in rows], ["#1565c0"] * len(rows), hover,
                cap)


def sec_categories(v: View) -> SectionResult:
    cat = v.r.categories
    rows = cat.overall
    if not cat.available or not rows:
        return Omitted("Kernel categories", cat.reason or "no categories")
    note = inline(Strong(("Whole capture",)), ", all devices; preset ", Code(cat.preset),
                  (" — ", Rich(cat.preset_reason, lead=True)) if cat.preset_reason else None,
                  ". Per device and per phase in ", Code(f"tables/{CATEGORIES.csv}"), ".")
    return Section("categories", "Kernel categories",
                   (para(note), Chart(lambda: _category_chart(rows)),
                    TablePart(CATEGORIES.cols, rows[: v.top], (), "categories")), "Categories")


def sec_launch(v: View) -> SectionResult:
    la = v.r.launch
    rows = la.per_device
    if not la.available or not rows:
        return Omitted("Launch rate", la.reason or "no launches")
    note = inline("Kernels launched per second of the analysis window and their durations; per process in ",
                  Code(f"tables/{LAUNCH.csv}"), ".")
    return Section("launch", "Launch rate", (para(note), TablePart(LAUNCH.cols, rows, (), "launch")))
