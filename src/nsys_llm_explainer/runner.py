"""A small runner for a declared graph of steps (:class:`Step`): each step names the values it reads and the
values it returns; the runner checks the declaration — every value is made before it is read, and a step's inputs
are exactly its function's parameters, by name — runs every step once its inputs exist, passing each value to the
parameter of the same name, and records the seconds each took.

``workers=1`` runs the steps one after another in declaration order on the calling thread (for debugging and
tests); ``workers=n`` lets ``n − 1`` extra threads take part: every thread takes the first step in declaration
order whose inputs are ready (numpy releases the GIL in its large loops, so two cores overlap). The results are
the same either way: steps are pure functions of their inputs. A value no later step reads and the caller
does not keep is dropped as soon as its last reader has finished (memory follows what is still needed).
"""

from __future__ import annotations

import inspect
import threading
import time
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


class GraphError(ValueError):
    """The declared graph is inconsistent (a value read before any step makes it, or made twice)."""


def parameter_mismatch(s: Step) -> Optional[str]:
    """Why ``s.inputs`` are not ``s.fn``'s parameters by name (None when they are): every input must name a
    parameter that can be passed by keyword, and every parameter without a default must be an input."""
    try:
        params = inspect.signature(s.fn).parameters
    except (TypeError, ValueError):                 # a callable without a signature: nothing to bind by name
        return f"{s.fn!r} has no signature to bind its inputs to"
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unknown = [i for i in s.inputs if i not in named]
    needed = [n for n in named if params[n].default is inspect.Parameter.empty and n not in s.inputs]
    positional = [n for n, p in params.items() if p.kind is p.POSITIONAL_ONLY and p.default is p.empty]
    if not (unknown or needed or positional):
        return None
    return (f"inputs {list(s.inputs)} do not match the parameters {list(params)} of {getattr(s.fn, '__name__', s.fn)}"
            + (f" (no parameter {unknown})" if unknown else "") + (f" (not given {needed + positional})"
                                                                   if needed or positional else ""))


def check_graph(steps: Sequence[Step], given: Collection[str]) -> None:
    """Raise :class:`GraphError` unless every input is given or made by an earlier step, each step's inputs are its
    function's parameters by name, no value is made twice and every window is ``full`` or ``steady``."""
    have: Set[str] = set(given)
    for s in steps:
        why = parameter_mismatch(s)
        if why:
            raise GraphError(f"step {s.label!r}: {why}")
        missing = [i for i in s.inputs if i not in have]
        if missing:
            raise GraphError(f"step {s.label!r} reads {missing} before any step makes them")
        twice = [o for o in s.outputs if o in have]
        if twice:
            raise GraphError(f"step {s.label!r} makes {twice}, already given or made")
        if s.window not in ("full", "steady"):
            raise GraphError(f"step {s.label!r}: window {s.window!r} is neither 'full' nor 'steady'")
        have.update(s.outputs)


def run_graph(steps: Sequence[Step], given: Mapping[str, Any], keep: Collection[str], workers: int = 1,
              progress: Optional[Progress] = None) -> Tuple[Dict[str, Any], Dict[str, float]]:
    """Run ``steps`` (see module docstring) from the ``given`` values; a step whose outputs are all given is
    skipped. Returns the values named in ``keep`` and the seconds per step label. The first exception a step
    raises is raised here once the running steps have finished."""
    todo = [s for s in steps if not all(o in given for o in s.outputs)]
    check_graph(todo, given)
    values: Dict[str, Any] = dict(given)
    readers: Dict[str, int] = {}
    for s in todo:
        for i in s.inputs:
            readers[i] = readers.get(i, 0) + 1
    timings: Dict[str, float] = {}
    lock = threading.Condition()
    pending: List[Step] = list(todo)
    running = [0]
    failed: List[BaseException] = []

    def ready(s: Step) -> bool:
        return all(i in values for i in s.inputs)

    def run_one(s: Step) -> None:
        if progress is not None:
            progress(s.label)
        t = time.perf_counter()
        out = s.fn(**{i: values[i] for i in s.inputs})
        seconds = round(time.perf_counter() - t, 4)
        outs = (out,) if len(s.outputs) == 1 else tuple(out)
        if len(outs) != len(s.outputs):
            raise GraphError(f"step {s.label!r} returned {len(outs)} values for {len(s.outputs)} outputs")
        with lock:
            values.update(zip(s.outputs, outs))
            timings[s.label] = seconds
            for i in s.inputs:             # drop what no later step reads and the caller does not keep
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
                    if running[0] == 0:     # nothing runs and nothing is ready: cannot happen after check_graph
                        failed.append(GraphError(f"no step is ready: {[p.label for p in pending]}"))
                        continue
                    lock.wait()
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
