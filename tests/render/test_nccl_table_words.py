"""The report's NCCL table names its count column by what it counts: a rank's NCCL kernels, which are not its
collectives when a kernel of that rank was matched with no other rank's (a name run on one rank only)."""

from __future__ import annotations

from pathlib import Path

from synth import TraceBuilder

from nsys_llm_explainer.options import options_from_kwargs
from nsys_llm_explainer.pipeline import analyze_path
from nsys_llm_explainer.render.markdown import render_markdown

US = 1_000
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
BC = "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _two_ranks(path: Path) -> None:
    """Two processes (pid 100 on GPU 0, pid 101 on GPU 1) running 3 all-reduces together; pid 100 also runs one
    broadcast kernel no other rank runs: 4 NCCL kernels on rank 0, 3 matched collectives."""
    b = TraceBuilder("2024.2", seed=1)
    for r, pid in enumerate((100, 101)):
        b.process(pid, "python3")
        b.thread(pid, pid, f"w{r}")
        b.gpu(r)
        for s in range(3):
            t = 1_000 * US + s * 1_000 * US
            b.launch(t, t + 5 * US, t + 10 * US + r * 30 * US, t + 100 * US, pid=pid, tid=pid, device=r, name=AR)
    b.launch(5_000 * US, 5_005 * US, 5_010 * US, 5_050 * US, pid=100, tid=100, device=0, name=BC)
    b.write(str(path), overwrite=True)


def test_nccl_rank_table_counts_kernels_not_collectives(tmp_path: Path) -> None:
    p = tmp_path / "t.sqlite"
    _two_ranks(p)
    rep = analyze_path(str(p), options_from_kwargs())
    ranks = {r.rank: r for r in rep.nccl.ranks}
    assert (ranks["pid 100 / GPU 0"].nccl_count, ranks["pid 100 / GPU 0"].matched) == (4, 3)
    md = render_markdown(rep)
    head = next(line for line in md.splitlines() if line.startswith("| rank |") and "last to arrive" in line)
    cols = [c.strip() for c in head.strip("|").split("|")]
    row = next(line for line in md.splitlines() if line.startswith("| pid 100 / GPU 0 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert "collectives" not in cols           # 4 is not rank 0's collectives (3 matched, 1 broadcast alone)
    assert cells[cols.index("NCCL kernels")] == "4"
