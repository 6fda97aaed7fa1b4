"""CUDA-graph rows: graph launches in node or graph trace mode, and graph/node creation rows."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .ids import global_pid, global_tid
from .rows_cuda import CudaRows

__all__ = ["GraphRows"]


class GraphRows(CudaRows):
    """``graph_launch`` plus the capture/instantiate rows it creates on first use of a graph exec."""

    def graph_launch(
        self,
        api_start: int,
        api_end: int,
        *,
        pid: int,
        tid: int,
        kernels: Sequence[Tuple[int, int, str]],
        device: int = 0,
        stream: int = 7,
        graph_id: int = 1,
        graph_exec_id: int = 1,
        node_mode: bool = True,
        api: str = "cudaGraphLaunch_v10000",
    ) -> int:
        """A graph launch API row plus node kernels (node mode) or one GRAPH_TRACE row (graph mode)."""
        g = global_tid(pid, tid)
        if g not in self._threads:
            self.thread(pid, tid)
        corr = self.runtime(api_start, api_end, tid_g=g, name=api, event_class=self._api_class(api))
        key = (pid, graph_exec_id)
        if key not in self._graph_nodes:
            self._create_graph(pid, g, api_start, graph_id, graph_exec_id, [k[2] for k in kernels])
        nodes = self._graph_nodes[key]
        if node_mode:
            for i, (ks, ke, kname) in enumerate(kernels):
                node = nodes[i] if i < len(nodes) else None
                self.kernel(
                    ks,
                    ke,
                    pid=pid,
                    device=device,
                    stream=stream,
                    name=kname,
                    corr=corr,
                    graph_node_id=node,
                    graph_id=graph_id,
                )
        elif self._flv >= 3 and kernels:
            self._rows["graph_trace"].append(
                {
                    "start": int(min(k[0] for k in kernels)),
                    "end": int(max(k[1] for k in kernels)),
                    "deviceId": device,
                    "contextId": 1,
                    "greenContextId": 0,
                    "streamId": stream,
                    "correlationId": corr,
                    "globalPid": global_pid(pid),
                    "graphId": graph_id,
                    "graphExecId": graph_exec_id,
                }
            )
        return corr

    def _new_node(self) -> int:
        node = self._next_node_id
        self._next_node_id += 1
        return node

    @staticmethod
    def _node_row(t: int, end: int, g: int, name_id: int, node: int, orig: Optional[int]) -> Dict[str, Any]:
        return {
            "start": t,
            "end": end,
            "eventClass": 77,
            "globalTid": g,
            "nameId": name_id,
            "graphNodeId": node,
            "originalGraphNodeId": orig,
        }

    def _create_graph(
        self, pid: int, g: int, before: int, graph_id: int, exec_id: int, names: Sequence[str]
    ) -> None:
        """Capture-time node rows + instantiation rows, placed just before the first launch."""
        n = len(names)
        t = max(0, int(before) - 2000 * (n + 2))
        node_rows = self._rows["graph_node_events"]
        cap = self.string("cudaLaunchKernel_v7000")
        inst = self.string("cudaGraphInstantiate_v12000")
        for _ in names:
            node_rows.append(self._node_row(t, t + 800, g, cap, self._new_node(), None))
            t += 1000
        exec_nodes: List[int] = []
        for _ in range(n):
            node = self._new_node()
            node_rows.append(self._node_row(t, t + 500, g, inst, node, node - n))
            exec_nodes.append(node)
        if self._flv >= 3:
            self._graph_level_rows(g, t + 500, graph_id, exec_id, inst)
        self._graph_nodes[(pid, exec_id)] = exec_nodes

    def _graph_level_rows(self, g: int, t: int, graph_id: int, exec_id: int, inst: int) -> None:
        """Graph creation (end of stream capture) and graph-exec creation rows (>= 2024.2 layout)."""
        common = {"globalTid": g, "graphId": graph_id, "originalGraphId": None}
        end_capture = self.string("cudaStreamEndCapture_v10000")
        ge = self._rows["graph_events"]
        ge.append(
            {
                "start": t,
                "end": t + 300,
                "eventClass": 95,
                "nameId": end_capture,
                "graphExecId": None,
                **common,
            }
        )
        ge.append(
            {
                "start": t + 400,
                "end": t + 900,
                "eventClass": 94,
                "nameId": inst,
                "graphExecId": exec_id,
                **common,
            }
        )
