"""Work on the second core: a task queued on a one-thread pool that the calling thread takes back (runs
itself) when it has not started yet — so neither thread sits idle while the other has queued work. Used for
pure functions only: the result is the same whichever thread runs it."""

from __future__ import annotations

from concurrent.futures import Executor, Future
from typing import Any, Callable, List, Optional, Sequence


class Task:
    """``fn(*args)`` queued on ``pool`` (None: run when asked); :meth:`result` runs it on the calling thread
    instead when it has not started yet."""

    def __init__(self, pool: Optional[Executor], fn: Callable[..., Any], *args: Any) -> None:
        self.fn, self.args = fn, args
        self.future: Optional[Future] = pool.submit(fn, *args) if pool is not None else None

    def result(self) -> Any:
        if self.future is None or self.future.cancel():
            return self.fn(*self.args)
        return self.future.result()


def gather(tasks: Sequence[Task]) -> List[Any]:
    """The results of ``tasks``, in order: those not started yet are taken back from the end of the queue (the
    other thread keeps taking from its front), then the running ones are waited for. An exception of a task is
    raised here (the first met, taken-back tasks first)."""
    out: List[Any] = [None] * len(tasks)
    running = []
    for i in range(len(tasks) - 1, -1, -1):
        t = tasks[i]
        if t.future is None or t.future.cancel():
            out[i] = t.fn(*t.args)
        else:
            running.append(i)
    for i in running:
        out[i] = tasks[i].future.result()
    return out
