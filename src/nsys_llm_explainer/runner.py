"""A small runner for a declared graph of steps (:class:`Step`): checks the declaration (every value made before it
is read, a step's inputs exactly its function's parameters by name), runs every step once its inputs exist on
``workers`` threads, passing each value to the parameter of the same name, drops a value after its last reader, and
records the seconds each step took. A step with ``each`` steps runs them once per item it produces. How and why:
docs/DESIGN.md, "The analysis graph".
"""

from __future__ import annotations

import inspect
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Sequence, Set, Tuple

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Step:
    """``outputs = fn(**{name: value for name in inputs})``: ``inputs`` and ``outputs`` are value names, and
    ``inputs`` are the names of ``fn``'s parameters (:func:`check_graph` refuses a step whose are not); with several
    outputs ``fn`` returns a tuple of that length. ``label`` names the step in progress messages and timings."""

    label: str
    fn: Callable[..., Any]
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    #: which time span the step analyses: ``full`` (the whole capture) or ``steady`` (the analysis window)
    window: str = "full"
    #: steps run once per item this step produces (module docstring); each has one output
    each: Tuple[Step, ...] = ()
    #: the names of an item's values, given to the ``each`` steps
    item_values: Tuple[str, ...] = ()

    @property
    def reads(self) -> Tuple[str, ...]:
        """The graph values the step needs: its inputs and those its ``each`` steps read of the graph."""
        inner = [i for e in self.each for i in e.inputs if i not in self.item_values and i not in self.inputs]
        return self.inputs + tuple(dict.fromkeys(inner))

    @property
    def makes(self) -> Tuple[str, ...]:
        """The values the step makes: its outputs, then one per ``each`` step."""
        return self.outputs + tuple(o for e in self.each for o in e.outputs)


class GraphError(ValueError):
    """The declared graph is inconsistent (a value read before any step makes it, or made twice)."""


def parameter_mismatch(s: Step) -> Optional[str]:
    """Why ``s.inputs`` are not ``s.fn``'s parameters by name (None when they are): every input must name a
    parameter that can be passed by keyword, and every parameter without a default must be an input."""
    try:
        params = inspect.signature(s.fn).parameters
    except (TypeError, ValueError):                 # a callable without a signature: nothing to bind by name
        return f"{s.fn!r} has no signature to bind its inputs to"
    inputs = s.inputs + (("each",) if s.each else ())
    named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unknown = [i for i in inputs if i not in named]
    needed = [n for n in named if params[n].default is inspect.Parameter.empty and n not in inputs]
    positional = [n for n, p in params.items() if p.kind is p.POSITIONAL_ONLY and p.default is p.empty]
    if not (unknown or needed or positional):
        return None
    return (f"inputs {list(inputs)} do not match the parameters {list(params)} of {getattr(s.fn, '__name__', s.fn)}"
            + (f" (no parameter {unknown})" if unknown else "") + (f" (not given {needed + positional})"
                                                                   if needed or positional else ""))


def check_graph(steps: Sequence[Step], given: Collection[str]) -> None:
    """Raise :class:`GraphError` unless every input is given or made by an earlier step, each step's inputs are its
    function's parameters by name (``each`` steps' too: they read graph values and their item's), every ``each`` step
    has one output, no value is made twice and every window is ``full`` or ``steady``."""
    have: Set[str] = set(given)
    for s in steps:
        for e in (s,) + s.each:
            why = parameter_mismatch(e)
            if why:
                raise GraphError(f"step {e.label!r}: {why}")
            if e is not s and (len(e.outputs) != 1 or e.each):
                raise GraphError(f"step {e.label!r} (run for each item of {s.label!r}) must make one value, "
                                 "with no steps of its own")
        missing = [i for i in s.reads if i not in have]
        if missing:
            raise GraphError(f"step {s.label!r} reads {missing} before any step makes them")
        twice = [o for o in s.makes if o in have or s.makes.count(o) > 1]
        if twice:
            raise GraphError(f"step {s.label!r} makes {twice}, already given or made")
        if s.window not in ("full", "steady"):
            raise GraphError(f"step {s.label!r}: window {s.window!r} is neither 'full' nor 'steady'")
        have.update(s.makes)


def run_graph(steps: Sequence[Step], given: Mapping[str, Any], keep: Collection[str], workers: int = 1,
              progress: Optional[Progress] = None) -> Tuple[Dict[str, Any], Dict[str, float]]:
    """Run ``steps`` (see module docstring) from the ``given`` values; a step that makes nothing ``keep`` names or
    a step run reads is skipped. Returns the values named in ``keep`` and the seconds per step label. The first
    exception a step raises is raised here once the running steps have finished."""
    check_graph(steps, given)
    needed = set(keep)              # only the steps that make a kept value or one a needed step reads
    for s in reversed(steps):
        if needed.intersection(s.makes):
            needed.update(s.reads)
    todo = [s for s in steps if needed.intersection(s.makes)]
    values: Dict[str, Any] = dict(given)
    readers = Counter(i for s in todo for i in s.reads)   # steps still to read each value
    timings: Dict[str, float] = {}
    lock = threading.Condition()
    pending: List[Step] = list(todo)
    running = [0]
    failed: List[BaseException] = []

    def ready(s: Step) -> bool:
        return all(i in values for i in s.reads)

    def run_one(s: Step) -> None:
        if progress is not None:
            progress(s.label)
        t = time.perf_counter()
        args = {i: values[i] for i in s.inputs}
        per_item: Dict[str, List[Any]] = {e.outputs[0]: [] for e in s.each}
        inner: Dict[str, float] = {e.label: 0.0 for e in s.each}
        if s.each:
            shared = {i: values[i] for i in s.reads}

            def each(**item: Any) -> None:
                v = {**shared, **item}
                for e in s.each:
                    t0 = time.perf_counter()
                    per_item[e.outputs[0]].append(e.fn(**{i: v[i] for i in e.inputs}))
                    inner[e.label] += time.perf_counter() - t0

            args["each"] = each
        out = s.fn(**args)
        seconds = round(time.perf_counter() - t, 4)
        outs = (out,) if len(s.outputs) == 1 else tuple(out)
        if len(outs) != len(s.outputs):
            raise GraphError(f"step {s.label!r} returned {len(outs)} values for {len(s.outputs)} outputs")
        outs += tuple(tuple(per_item[e.outputs[0]]) for e in s.each)
        with lock:
            values.update(zip(s.makes, outs))
            timings[s.label] = seconds
            timings.update((k, round(v, 4)) for k, v in inner.items())
            for i in s.reads:              # drop what no later step reads and the caller does not keep
                readers[i] -= 1
                if readers[i] == 0 and i not in keep and i not in given:
                    values.pop(i, None)

    def work() -> None:
        while True:
            with lock:
                while True:
                    if failed or not pending:
                        lock.notify_all()
                        return
                    s = next((p for p in pending if ready(p)), None)
                    if s is not None:
                        pending.remove(s)
                        running[0] += 1
                        break
                    lock.wait()             # a running step makes the first pending one ready (check_graph)
            try:
                run_one(s)
            except BaseException as e:     # re-raised on the calling thread
                with lock:
                    failed.append(e)
            finally:
                with lock:
                    running[0] -= 1
                    lock.notify_all()

    threads = [threading.Thread(target=work, name=f"analysis-{n}", daemon=True) for n in range(max(1, workers) - 1)]
    for th in threads:
        th.start()
    try:
        work()
        with lock:                          # the other threads finish the steps they took
            while running[0]:
                lock.wait()
    except BaseException as e:              # e.g. KeyboardInterrupt while waiting: stop taking steps
        with lock:
            failed.append(e)
            lock.notify_all()
        raise
    finally:
        for th in threads:
            th.join()
    if failed:
        raise failed[0]
    return {k: values[k] for k in keep if k in values}, timings
