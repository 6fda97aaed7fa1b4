"""GPU work: top kernels (analysis window, or whole capture), kernel traits, kernel categories, launch rate."""

from __future__ import annotations

from typing import List

from ..base import available, fmt_dur, fmt_int, num
from ..escape import md_code, md_rich, md_text
from ..specs import CATEGORIES, KERNEL_TRAITS, KERNELS, LAUNCH
from ..table import md_table
from .ctx import Ctx, Omitted, Result, heading


def sec_kernels(ctx: Ctx) -> Result:
    """Top kernels of the analysis window when it was trimmed, else of the whole capture."""
    ks = ctx.sec("kernels_summary")
    rows = ctx.rows("kernels_summary", "by_name")
    if not available(ks) or not rows:
        return Omitted("Top kernels", str(ks.get("reason") or "no kernels"))
    st = ctx.sec("steady_kernels")
    if available(st) and ctx.rows("steady_kernels", "by_name"):
        rows = ctx.rows("steady_kernels", "by_name")
        scope = (f"**Analysis window**, all devices (kernels clipped to it): {fmt_int(st.get('kernel_count'))} "
                 f"kernels, {fmt_dur(st.get('total_kernel_ns'))} of summed kernel time; the whole capture "
                 f"({fmt_int(ks.get('kernel_count'))} kernels) is in `tables/{KERNELS.csv}`. ")
    else:
        scope = (f"**Whole capture**, all devices: {fmt_int(ks.get('kernel_count'))} kernels, "
                 f"{fmt_dur(ks.get('total_kernel_ns'))} of summed kernel time. ")
    shown = rows[: ctx.top]
    note = scope + (f"Showing {len(shown)} of {len(rows)} names" if len(rows) > len(shown)
                    else f"All {len(rows)} names") + f"; per device in `tables/{KERNELS.csv}`."
    return heading("Top kernels", note) + md_table(KERNELS.cols, shown)


def _evidence(items: object) -> str:
    first = items[0] if isinstance(items, list) and items else ""
    return f" ({md_rich(first, line_start=False)})" if first else ""


def sec_traits(ctx: Ctx) -> Result:
    kt = ctx.sec("kernel_traits")
    gone = ctx.unavailable("kernel_traits", "Kernel traits")
    if gone:
        return gone
    facts: List[str] = []
    if kt.get("workload"):
        why = _evidence(kt.get("workload_evidence"))
        facts.append(f"**Workload:** {md_text(kt['workload'], line_start=False)}{why}")
    if kt.get("stack"):
        facts.append(f"**Stack:** {md_text(kt['stack'], line_start=False)}")
    rows = sorted(KERNEL_TRAITS.rows(ctx.report), key=lambda r: -(num(r.get("share_pct")) or 0))
    note = (f"Kernel-name traits over the analysis window ({fmt_int(kt.get('kernel_count'))} kernels, "
            f"{fmt_dur(kt.get('total_kernel_ns'))}); a kernel may have several traits.")
    lines = heading("Kernel traits", note)
    if facts:
        lines += [" · ".join(facts), ""]
    if rows:
        lines += md_table(KERNEL_TRAITS.cols, rows)
    else:
        lines.append("No kernel matched a trait.")
    return lines if lines[-1] else lines[:-1]


def sec_categories(ctx: Ctx) -> Result:
    cat = ctx.sec("categories")
    rows = ctx.rows("categories", "overall")
    if not available(cat) or not rows:
        return Omitted("Kernel categories", str(cat.get("reason") or "no categories"))
    note = (f"**Whole capture**, all devices; preset {md_code(cat.get('preset'))}"
            f"{' — ' + md_rich(cat['preset_reason']) if cat.get('preset_reason') else ''}. "
            f"Per device and per phase in `tables/{CATEGORIES.csv}`.")
    return heading("Kernel categories", note) + md_table(CATEGORIES.cols, rows[: ctx.top])


def sec_launch(ctx: Ctx) -> Result:
    la = ctx.sec("launch")
    rows = ctx.rows("launch", "per_device")
    if not available(la) or not rows:
        return Omitted("Launch rate", str(la.get("reason") or "no launches"))
    note = (f"Kernels launched per second of the analysis window and their durations; per process in "
            f"`tables/{LAUNCH.csv}`.")
    return heading("Launch rate", note) + md_table(LAUNCH.cols, rows)
