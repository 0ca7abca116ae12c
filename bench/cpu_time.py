"""CPU time of a process's threads so far, from /proc: how the bench
scripts tell what share of a CPU each program got."""

import os


def lcore_thread(lcore):
    """The names DPDK gives the thread of worker lcore `lcore`: rte-worker-N
    (22.11), dpdk-workerN (23.11 on), lcore-worker-N (before 22.11)."""
    return (f'rte-worker-{lcore}', f'dpdk-worker{lcore}', f'lcore-worker-{lcore}')


def cpu_ns(pid, thread=None):
    """Nanoseconds of CPU the thread of `pid` named `thread` (its comm, e.g.
    'rte-worker-1', or a tuple of names it may have: lcore_thread()) has
    used, or all of the process's threads when `thread` is None. None when
    the process, or the thread, is not there; ValueError when two threads
    have the name (which one is the lcore?)."""
    names = (thread,) if isinstance(thread, str) else thread
    total, found = None, 0
    try:
        for tid in os.listdir(f'/proc/{pid}/task'):
            if names is not None:
                with open(f'/proc/{pid}/task/{tid}/comm') as f:
                    if f.read().strip() not in names:
                        continue
                found += 1
            with open(f'/proc/{pid}/task/{tid}/schedstat') as f:
                total = (total or 0) + int(f.read().split()[0])
    except OSError:
        pass
    if found > 1:
        raise ValueError(f'process {pid} has {found} threads named {names}')
    return total
