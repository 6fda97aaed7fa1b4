"""The names of a multi-node job's ranks in the cluster outputs (docs/CLUSTER.md, "Per-rank view and claims"): 2 nodes
× 4 GPUs, one process per GPU (pids 4000–4003 on both hosts), one data-parallel all-reduce across the 8 ranks per step,
exported once per node (files node0, node1) or once per rank (rank0 … rank7); each export records its host
(``TARGET_INFO_SYSTEM_ENV`` ``Hostname``: gpu-a17, gpu-b03), except a 2021.5 one (the builder writes none there, as
2019.6 / 2020.3 captures have none).

Per step (2 ms apart, 10 steps): a 300 µs GEMM 10 µs in (node 1's 150 µs later: its input), the all-reduce 2 µs after
it (node 1's GPU 3 4 µs after), ending 60 µs after the latest start on every rank. Waits per collective (µs): node 0's
GPUs 152, node 1's GPUs 0–2 2, its GPU 3 0 (the last; its node-mates within a quarter of its 152 µs lateness: late
together, no rank claimed)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import List, Sequence

from synth import TraceBuilder
from synth.scenarios.cluster import AR, BASE_UTC, GEMM, MS

import nsys_llm_explainer as nle
from nsys_llm_explainer.cluster.summary import says_host
from nsys_llm_explainer.render.cluster import render_cluster_html, render_cluster_markdown
from nsys_llm_explainer.render.cluster.tables import CLUSTER_TABLES
from nsys_llm_explainer.render.csv_tables import write_tables

US = 1_000
NODE_GAP = 2_700 * MS
HOSTS = ("gpu-a17", "gpu-b03")


def _job(where: Path, per_node: bool, flavors: Sequence[str] = ("2022.4", "2026.2"),
         hosts: Sequence[str] = HOSTS) -> None:
    """The job above into ``where``; node n's session starts n · 2.7 s after node 0's (its clock on its own base)."""
    t0 = NODE_GAP + 50 * MS
    ks: List[list] = [[] for _ in range(8)]
    for s in range(10):
        st = t0 + s * 2 * MS
        ready = {}
        for r in range(8):
            a = st + (10 + (150 if r >= 4 else 0)) * US
            ks[r].append((GEMM, a, a + 300 * US, 7))
            ready[r] = a + (302 + (2 if r == 7 else 0)) * US
        z = max(ready.values()) + 60 * US
        for r in range(8):
            ks[r].append((AR, ready[r], z, 13))
    for grp in ([[0, 1, 2, 3], [4, 5, 6, 7]] if per_node else [[r] for r in range(8)]):
        n = grp[0] // 4
        b = TraceBuilder(flavors[n], seed=grp[0], utc_epoch_ns=BASE_UTC + n * NODE_GAP, host=hosts[n])
        for r in grp:
            pid, dev = 4000 + r % 4, r % 4
            b.process(pid, "python3")
            b.thread(pid, pid, "pt_main_thread")
            b.gpu(dev)
            for name, a, z, stream in ks[r]:
                sh = -n * NODE_GAP
                b.launch(a - 8 * US + sh, a - 4 * US + sh, a + sh, z + sh, pid=pid, tid=pid, device=dev,
                         stream=stream, name=name)
        b.write(str(where / (f"node{n}.sqlite" if per_node else f"rank{grp[0]}.sqlite")), overwrite=True)


def _csv_col(path: Path, key: str) -> List[str]:
    with open(path, newline="", encoding="utf-8") as f:
        return [row[key] for row in csv.DictReader(f)]


def test_ranks_of_node_exports_are_named_by_host_and_gpu_alike_in_every_output(tmp_path):
    """Before: the device table said "node0/GPU 0" and the NCCL table "node0/pid 4000/GPU 0" for one rank, and
    neither named the host (the labels do not). Now every output names it "gpu-a17:node0/GPU 0": ranks.csv,
    nccl_ranks.csv, cluster.json, cluster.md's and cluster.html's rank tables and the late-group warning; files.csv
    and the Files table give each file's host."""
    _job(tmp_path, per_node=True)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    names = [f"{h}:node{n}/GPU {g}" for n, h in enumerate(HOSTS) for g in range(4)]
    assert [d.rank for d in res.devices] == names
    assert {x.rank: (x.pid, x.device_id, x.wait_ns_total) for x in res.collectives.ranks} == {
        **{names[g]: (4000 + g, g, 1520 * US) for g in range(4)},
        **{names[4 + g]: (4000 + g, g, 20 * US) for g in range(3)}, names[7]: (4003, 3, 0)}
    assert res.late_group == (names[7], names[4], names[5], names[6])
    assert [f.clock.host for f in res.files] == list(HOSTS)
    d = res.to_dict()
    assert [x["rank"] for x in d["devices"]] == [x["rank"] for x in d["collectives"]["ranks"]] == names
    assert [f["clock"]["host"] for f in d["files"]] == list(HOSTS)
    assert type(res).from_dict(d) == res
    out = tmp_path / "out"
    write_tables(CLUSTER_TABLES, res, out)
    assert _csv_col(out / "tables" / "ranks.csv", "rank") == _csv_col(out / "tables" / "nccl_ranks.csv", "rank") \
        == names
    assert _csv_col(out / "tables" / "files.csv", "host") == list(HOSTS)
    md = render_cluster_markdown(res)
    assert md.count("| gpu-b03:node1/GPU 3 |") == 3     # the device and NCCL rank tables, "most often last"
    assert "| label | path | host |" in md and "| node0 | `" in md
    assert ("gpu-b03:node1/GPU 3 arrived last at 10 matched NCCL collectives, but at half or more of them 3 other "
            "rank(s) arrived within a quarter of its lateness (gpu-b03:node1/GPU 0, gpu-b03:node1/GPU 1, "
            "gpu-b03:node1/GPU 2)") in md
    assert "node0/pid" not in md
    page = render_cluster_html(res, js="")
    assert page.count(">gpu-b03:node1/GPU 3<") >= 2 and "/pid 400" not in page


def test_rank_exports_are_named_by_host_where_their_labels_do_not_say_it(tmp_path):
    """One export per rank, rank0 … rank7: "gpu-a17:rank0" … "gpu-b03:rank7" (before: "rank0", nothing said which
    ranks share a node)."""
    _job(tmp_path, per_node=False)
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    names = [f"{HOSTS[r // 4]}:rank{r}" for r in range(8)]
    assert [d.rank for d in res.devices] == [x.rank for x in res.collectives.ranks] == names
    assert res.late_group == ("gpu-b03:rank7", "gpu-b03:rank4", "gpu-b03:rank5", "gpu-b03:rank6")


def test_without_hosts_or_on_one_host_ranks_keep_their_file_names(tmp_path):
    """2021.5 exports record no host: "node0/GPU 0" (the device's name, now in the NCCL table too), no host column;
    one host for both files (nothing to tell apart) keeps the labels too."""
    _job(tmp_path, per_node=True, flavors=("2021.5", "2021.5"))
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    names = [f"node{n}/GPU {g}" for n in range(2) for g in range(4)]
    assert [d.rank for d in res.devices] == [x.rank for x in res.collectives.ranks] == names
    assert [f.clock.host for f in res.files] == [None, None] and "host" not in res.to_dict()["files"][0]["clock"]
    assert "| label | path | nsys |" in render_cluster_markdown(res)
    one = tmp_path / "one"
    one.mkdir()
    _job(one, per_node=True, hosts=("dgx", "dgx"))
    assert [d.rank for d in nle.analyze_cluster(str(one), jobs=1).devices] == names


def test_a_label_names_its_host_as_a_word():
    assert says_host("nodeA-gpu0", "nodeA") and says_host("NID001608_rank0", "nid001608.perlmutter.nersc.gov")
    assert not says_host("node10-gpu0", "node1") and not says_host("rank0", "gpu-a17")
    assert says_host("rank0", None)                                       # no host: nothing to add


def test_a_host_name_is_data_in_the_cluster_outputs(tmp_path):
    """A host name is the export's text: Markdown-escaped in cluster.md, kept verbatim in cluster.json."""
    _job(tmp_path, per_node=True, hosts=("a|<b>x</b>", "gpu-b03"))
    res = nle.analyze_cluster(str(tmp_path), jobs=1)
    assert res.devices[0].rank == "a|<b>x</b>:node0/GPU 0"
    md = render_cluster_markdown(res)
    assert "<b>x" not in md and "a\\|&lt;b&gt;x&lt;/b&gt;:node0/GPU 0" in md
