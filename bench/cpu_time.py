"""CPU time of a process's threads so far, from /proc: how the bench
scripts tell what share of a CPU each program got."""

import os


def cpu_ns(pid, thread=None):
    """Nanoseconds of CPU the thread of `pid` named `thread` (its comm, e.g.
    'rte-worker-1') has used, or all of the process's threads when `thread`
    is None. None when the process, or the thread, is not there."""
    total = None
    try:
        for tid in os.listdir(f'/proc/{pid}/task'):
            if thread is not None:
                with open(f'/proc/{pid}/task/{tid}/comm') as f:
                    if f.read().strip() != thread:
                        continue
            with open(f'/proc/{pid}/task/{tid}/schedstat') as f:
                total = (total or 0) + int(f.read().split()[0])
            if thread is not None:
                return total
    except OSError:
        pass
    return total
