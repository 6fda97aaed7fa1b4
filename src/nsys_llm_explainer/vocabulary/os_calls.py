"""What an OS-runtime call (``OSRT_API``) does — ``wait`` (blocked until something else happens), ``file_io``
(its own I/O), ``other``: one table that the idle charging, the wait analysis and their findings read
(docs/MODEL.md, "OS calls that wait").
"""

from __future__ import annotations

from typing import FrozenSet, Sequence

import numpy as np

#: calls that block the thread until another thread, process, device or timer acts
WAIT_CALLS: FrozenSet[str] = frozenset((
    # semaphores, conditions, locks, barriers, joins
    "sem_wait", "sem_timedwait", "sem_clockwait", "semop", "semtimedop",
    "pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait",
    "pthread_mutex_lock", "pthread_mutex_timedlock", "pthread_mutex_clocklock",
    "pthread_rwlock_rdlock", "pthread_rwlock_wrlock", "pthread_rwlock_timedrdlock", "pthread_rwlock_timedwrlock",
    "pthread_rwlock_clockrdlock", "pthread_rwlock_clockwrlock", "pthread_barrier_wait", "pthread_spin_lock",
    "pthread_join", "pthread_timedjoin_np", "pthread_clockjoin_np", "futex",
    # readiness of descriptors
    "poll", "ppoll", "select", "pselect", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2",
    # sleeps and signals
    "sleep", "usleep", "nanosleep", "clock_nanosleep", "pause", "sigwait", "sigwaitinfo", "sigtimedwait",
    "sigsuspend",
    # children
    "wait", "waitpid", "waitid", "wait3", "wait4",
    # messages, sockets, queues
    "recv", "recvfrom", "recvmsg", "recvmmsg", "accept", "accept4", "msgrcv", "mq_receive", "mq_timedreceive",
    "io_uring_enter",
))

#: calls that read, write, open, map or sync files: the thread's own I/O
FILE_IO_CALLS: FrozenSet[str] = frozenset((
    "read", "pread", "readv", "preadv", "preadv2", "write", "pwrite", "writev", "pwritev", "pwritev2",
    "open", "openat", "creat", "close", "fopen", "fdopen", "freopen", "fclose", "fread", "fwrite", "fgets", "fputs",
    "fflush", "getline", "getdelim", "mmap", "munmap", "mremap", "msync", "madvise", "fsync", "fdatasync",
    "sync_file_range", "lseek", "stat", "lstat", "fstat", "fstatat", "newfstatat", "statx", "access", "faccessat",
    "readlink", "opendir", "readdir", "closedir", "getdents", "sendfile", "copy_file_range", "splice",
    "fallocate", "posix_fadvise", "truncate", "ftruncate", "unlink", "rename", "mkdir",
    # Linux AIO (libaio: DeepSpeed's NVMe offload) reads and writes files only: waiting for its completions is the
    # thread's own file I/O, as a blocking ``pread`` is (``io_uring_enter`` serves sockets too: it stays a wait)
    "io_submit", "io_getevents",
))


def base_name(name: str) -> str:
    """``open64`` → ``open``; ``__poll`` → ``poll``."""
    n = name.strip().lstrip("_")
    return n.removesuffix("64") if n not in WAIT_CALLS and n not in FILE_IO_CALLS else n


def os_call_class(name: str) -> str:
    """``wait``, ``file_io`` or ``other`` for an OS-runtime call name."""
    b = base_name(name)
    if b in WAIT_CALLS:
        return "wait"
    if b in FILE_IO_CALLS:
        return "file_io"
    return "other"


def is_wait(name: str) -> bool:
    """True when the call blocks the thread until another thread, process, device or timer acts."""
    return os_call_class(name) == "wait"


def waits_of(names: Sequence[str]) -> np.ndarray:
    """Per name (plus a trailing False for an unknown name, index -1): whether the call waits (:func:`is_wait`)."""
    return np.array([is_wait(n) for n in names] + [False], bool)
