"""Where the per-file analyses of a cluster run execute — a local process pool or a Dask cluster — and how every
fault ends: one line naming what failed and the files not analysed (:class:`errors.WorkerError`, exit 2), within
the bounds of the constants below (docs/CLUSTER.md, "Faults and interrupts")."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import threading
import time
import warnings
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar

from ..errors import InputError, OptionalDependencyError, WorkerError
from ..terminal import warning_line
from .summary import FileSummary, analyze_file

T = TypeVar("T")
#: seconds a terminated pool worker gets to exit before it is killed
STOP_GRACE_S = 0.5
#: seconds to connect to ``--scheduler ADDRESS`` (TCP connect and Dask handshake)
DASK_CONNECT_TIMEOUT_S = 10.0
#: seconds a Dask run may have no worker at all before it fails
DASK_NO_WORKER_S = 30.0
#: seconds for one call to the scheduler (worker count, cancel, close)
DASK_CALL_TIMEOUT_S = 10.0
#: seconds for cancelling what is left and closing the client (and a local cluster) at the end, in all
DASK_CLOSE_TIMEOUT_S = 3.0
#: seconds to stop a Dask run after an interrupt (Ctrl-C, SIGTERM, SIGHUP): queued work cancelled, a local
#: cluster's worker processes killed (their running analyses are not waited for), the client closed
DASK_INTERRUPT_STOP_S = 1.0
#: seconds to start a ``--scheduler local`` cluster (its worker processes up and registered)
DASK_LOCAL_START_S = 60.0
#: seconds to fetch one finished file's result from its worker
DASK_RESULT_TIMEOUT_S = 60.0
#: seconds between two looks at the Dask futures (and between two worker counts: :data:`WORKER_CHECK_S`)
POLL_S = 0.1
WORKER_CHECK_S = 1.0
#: files named in a message before "and N more"
NAMED = 8

Args = Tuple[str, str, Any, Optional[str], int]   # analyze_file's (path, label, options, rank_dir, rank_index)


def files_text(paths: Sequence[str]) -> str:
    """``a.sqlite, b.sqlite`` (at most :data:`NAMED`, then ``and N more``)."""
    shown = ", ".join(paths[:NAMED])
    return shown + (f" and {len(paths) - NAMED} more" if len(paths) > NAMED else "")


# ------------------------------------------------------------------------------------------ local pool
@contextlib.contextmanager
def spawnable_cwd() -> Iterator[None]:
    """Worker processes can start even when the working directory was deleted: ``multiprocessing`` (``spawn``)
    asks for it (``os.getcwd()``) to start each worker there, which fails. Then, while the workers start, the
    process stands in ``/`` and comes back to the deleted directory after (through a descriptor). Every path a
    worker is given is absolute (:func:`run.run_files`), so where it starts changes nothing."""
    try:
        os.getcwd()
    except FileNotFoundError:
        back = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        os.chdir("/")
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.fchdir(back)
            os.close(back)
        return
    yield


def _worker_init() -> None:
    """Pool worker start-up: Ctrl-C reaches the whole process group; the parent decides and stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    warnings.showwarning = warning_line   # a library's warning: one line on the shared stderr


def _stop_pool(ex: ProcessPoolExecutor) -> None:
    """Cancel the queued work and end the running workers now (terminate, then kill after the grace)."""
    procs = list((getattr(ex, "_processes", None) or {}).values())   # the live workers (no public accessor)
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(STOP_GRACE_S)
    # let the pool's manager thread see its workers gone and close its wake-up pipe now: Python 3.11's exit hook
    # (concurrent.futures.process._python_exit) otherwise may write to that pipe while the thread closes it, and
    # prints an "Exception ignored … Bad file descriptor" traceback after our one error line
    manager = getattr(ex, "_executor_manager_thread", None)
    if manager is not None and manager.is_alive():
        manager.join(STOP_GRACE_S)


def run_pool(args: Sequence[Args], jobs: int) -> List[FileSummary]:
    """Each file on a process pool of ``jobs`` workers; results in input order (see module docstring)."""
    import multiprocessing as mp

    ex = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"), initializer=_worker_init)
    futs: List[Future] = []
    try:
        with spawnable_cwd():   # the workers start in submit()
            futs = [ex.submit(analyze_file, *a) for a in args]
        wait(futs, return_when=FIRST_EXCEPTION)   # a failing file ends the run now, not after the queue
        for f in futs:
            if f.done() and not f.cancelled() and f.exception() is not None:
                f.result()   # the first failure in input order among those that ended
        out = [f.result() for f in futs]
    except BrokenProcessPool:
        _stop_pool(ex)
        lost = [a[0] for a, f in zip(args, futs) if not f.done() or f.cancelled() or f.exception() is not None]
        raise WorkerError(f"a worker process died before it finished (killed by a signal, as the out-of-memory "
                          f"killer does); not analysed: {files_text(lost or [a[0] for a in args])} (try fewer "
                          "--jobs)") from None
    except BaseException:   # an error in one file, an interrupt: stop the rest now
        _stop_pool(ex)
        raise
    ex.shutdown(wait=True)
    return out


# ------------------------------------------------------------------------------------------ Dask
def bounded(fn: Callable[[], T], timeout: float, what: str, grace: float = 0.0, verb: str = "answer") -> T:
    """``fn()`` on a daemon thread, waited for at most ``timeout`` (+ ``grace``: for a call with its own
    ``timeout``, whose error is better) s, the wait interruptible; a call still running then raises
    :class:`WorkerError` ``what did not <verb> within <timeout> s``."""
    box: Dict[str, Any] = {}

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:   # handed to the caller's thread
            box["error"] = exc

    t = threading.Thread(target=call, name="nsys-llm-explain-dask-call", daemon=True)
    t.start()
    t.join(timeout + grace)
    if t.is_alive():
        raise WorkerError(f"{what} did not {verb} within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


#: the module each local Dask worker imports first: it keeps the worker's log lines off the terminal
QUIET_WORKER = "nsys_llm_explainer.cluster.dask_quiet"


def dask_client(scheduler: str, jobs: int) -> Tuple[Any, Any]:
    """(a ``dask.distributed.Client``, the ``LocalCluster`` it runs on or None); one line when the scheduler
    cannot be reached or does not answer within :data:`DASK_CONNECT_TIMEOUT_S` s."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise OptionalDependencyError("scheduler needs Dask: pip install 'nsys-llm-explainer[dask]'") from None
    # an earlier Client left unreferenced (one whose start failed) must not be collected while this one starts its
    # event loop: distributed's Client.__del__, run by the GC inside the new client's LoopRunner.start, waits on the
    # lock that start holds (a hang seen in CI); collect such garbage first
    gc.collect()
    if scheduler == "local":
        return _local_cluster(Client, LocalCluster, jobs)
    t = DASK_CONNECT_TIMEOUT_S
    try:
        return bounded(lambda: Client(scheduler, timeout=f"{t:g}s"), t, f"the Dask scheduler {scheduler}",
                       grace=2.0), None
    except WorkerError:
        raise
    except Exception as exc:   # OSError, TimeoutError, ValueError (bad address), garbage answers (MemoryError…)
        raise InputError(f"cannot connect to the Dask scheduler {scheduler}: {type(exc).__name__}: {exc}") from None


def _local_cluster(client_class: Any, cluster_class: Any, jobs: int) -> Tuple[Any, Any]:
    """A ``LocalCluster`` of ``jobs`` worker processes and its client, started within :data:`DASK_LOCAL_START_S`
    s; a start that fails or takes longer is one line. Everything listens on 127.0.0.1 only; the scheduler's
    HTTP endpoint (no dashboard) takes a free port, so another cluster on Dask's default 8787 changes nothing."""
    def start() -> Tuple[Any, Any]:
        cluster = cluster_class(n_workers=jobs, threads_per_worker=1, processes=True,
                                dashboard_address="127.0.0.1:0", scheduler_kwargs={"dashboard": False},
                                silence_logs=logging.CRITICAL + 1, preload=[QUIET_WORKER])
        try:
            return client_class(cluster), cluster
        except BaseException:
            cluster.close(timeout=DASK_CLOSE_TIMEOUT_S)
            raise

    what = f"the local Dask cluster ({jobs} worker process{'es' if jobs > 1 else ''})"
    try:
        with spawnable_cwd():
            return bounded(start, DASK_LOCAL_START_S, what, verb="start")
    except WorkerError:
        raise
    except Exception as exc:   # a worker process that cannot start (Nanny failed to start), no free port…
        raise WorkerError(f"{what} did not start: {type(exc).__name__}: {exc}") from None


def _close(client: Any, cluster: Any, futs: Sequence[Any]) -> None:
    """Cancel what is left and close the client (and the local cluster) within :data:`DASK_CLOSE_TIMEOUT_S` s
    in all (a scheduler that is gone is not waited for); never raises."""
    def close() -> None:   # cleanup: the run's own outcome (or interrupt) is what is reported
        _quietly(lambda: client.cancel(list(futs)) if futs else None)
        _quietly(lambda: client.close(timeout=DASK_CLOSE_TIMEOUT_S))
        _quietly(lambda: cluster.close(timeout=DASK_CLOSE_TIMEOUT_S) if cluster is not None else None)

    with contextlib.suppress(BaseException):
        bounded(close, DASK_CLOSE_TIMEOUT_S, "closing the Dask client")


def _abort(client: Any, cluster: Any, futs: Sequence[Any]) -> None:
    """After an interrupt: cancel what is left, kill a local cluster's worker processes while it closes (once its
    workers stop restarting what dies), close the client — within :data:`DASK_INTERRUPT_STOP_S` s in all; never
    raises. (Dask's own exit hook would otherwise wait up to 10 s for the running analyses.)"""
    limit = DASK_INTERRUPT_STOP_S
    closing = None
    if cluster is not None:
        closing = threading.Thread(target=_quietly, args=(lambda: cluster.close(timeout=limit),), daemon=True,
                                   name="nsys-llm-explain-dask-close")
        closing.start()
        _kill_local_workers(cluster, time.monotonic() + limit / 4)
    def close_client() -> None:
        _quietly(lambda: client.cancel(list(futs)) if futs else None)
        _quietly(lambda: client.close(timeout=limit))

    with contextlib.suppress(BaseException):
        bounded(close_client, limit / 2, "closing the Dask client")
    if closing is not None:
        closing.join(limit / 4)


def _quietly(step: Callable[[], Any]) -> None:
    try:
        step()
    except Exception:   # cleanup after an interrupt: the interrupt is what is reported
        pass


def _kill_local_workers(cluster: Any, wait_until: float) -> None:
    """SIGKILL the worker processes of a ``LocalCluster`` (Dask's ``Nanny.process.process.pid``), after waiting
    until ``wait_until`` for each nanny to leave the running state (so none restarts its worker)."""
    try:
        nannies = list(cluster.workers.values())
        while any(getattr(getattr(n, "status", None), "name", "") == "running" for n in nannies) \
                and time.monotonic() < wait_until:
            time.sleep(0.01)
        for n in nannies:
            pid = getattr(getattr(getattr(n, "process", None), "process", None), "pid", None)
            if isinstance(pid, int) and pid > 0:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    except Exception:   # Dask's internals differ: the close still runs, bounded
        pass


def run_dask(args: Sequence[Args], jobs: int, scheduler: str) -> List[FileSummary]:
    """Each file as a Dask task; results in input order (see module docstring)."""
    client, cluster = dask_client(scheduler, jobs)
    futs: List[Any] = []
    try:
        futs = [client.submit(analyze_file, *a, pure=False) for a in args]
        return _poll(client, futs, [a[0] for a in args], scheduler)
    except KeyboardInterrupt:
        _abort(client, cluster, [f for f in futs if f.status == "pending"])
        raise
    finally:
        if client.status not in ("closing", "closed"):
            _close(client, cluster, [f for f in futs if f.status == "pending"])


def _poll(client: Any, futs: Sequence[Any], paths: Sequence[str], scheduler: str) -> List[FileSummary]:
    results: Dict[int, FileSummary] = {}
    no_worker_since: Optional[float] = None
    next_check = time.monotonic() + WORKER_CHECK_S

    def left() -> str:
        return files_text([p for i, p in enumerate(paths) if i not in results])

    while len(results) < len(futs):
        for i, f in enumerate(futs):
            if i in results:
                continue
            status = f.status
            if status == "finished":
                try:
                    results[i] = bounded(f.result, DASK_RESULT_TIMEOUT_S, f"the result of {paths[i]}")
                except WorkerError as exc:
                    raise WorkerError(f"{exc}; not analysed: {left()}") from None
            elif status == "error":
                err: BaseException = bounded(f.exception, DASK_CALL_TIMEOUT_S, f"the Dask scheduler {scheduler}")
                if type(err).__name__ == "KilledWorker":
                    raise WorkerError(f"Dask workers died repeatedly (KilledWorker after Dask's retries: the "
                                      f"out-of-memory killer, a crash) with {paths[i]} in progress; not analysed: "
                                      f"{left()}")
                raise err
            elif status == "cancelled":   # ("lost": its result died with a worker; Dask computes it again)
                if getattr(client, "status", "running") != "running":
                    raise WorkerError(f"lost the connection to the Dask scheduler {scheduler}; not analysed: "
                                      f"{left()}")
                raise WorkerError(f"the Dask scheduler {scheduler} cancelled the task of {paths[i]}; not analysed: "
                                  f"{left()}")
        now = time.monotonic()
        if len(results) < len(futs) and now >= next_check:
            next_check = now + WORKER_CHECK_S
            try:
                n = len(bounded(lambda: client.scheduler_info(), DASK_CALL_TIMEOUT_S,
                                f"the Dask scheduler {scheduler}").get("workers") or {})
            except WorkerError as exc:
                raise WorkerError(f"{exc}; not analysed: {left()}") from None
            except Exception as exc:   # the connection to the scheduler is gone
                raise WorkerError(f"lost the Dask scheduler {scheduler} ({type(exc).__name__}: {exc}); "
                                  f"not analysed: {left()}") from None
            if n:
                no_worker_since = None
            elif no_worker_since is None:
                no_worker_since = now
            elif now - no_worker_since >= DASK_NO_WORKER_S:
                raise WorkerError(f"no Dask worker on {scheduler} for {DASK_NO_WORKER_S:g} s (lost mid-run, none "
                                  f"joined); not analysed: {left()}")
        time.sleep(POLL_S)
    return [results[i] for i in range(len(futs))]
