"""Independent jobs side by side, reported in their own order.

The replay build executes its step notebooks this way (:mod:`tunepath.publish.build`):
each job runs in a thread, and the heavy work happens in the kernel the thread drives, a
process of its own, so threads are enough to keep several CPUs busy. Whatever the order in
which jobs finish, the caller hears of them in the order they were given, and a failure
is the failure of the first job (in that order) that failed, as if they had run one after
the other: once a job has failed, the jobs after it that have not started are dropped (they
cannot change the outcome), those running are waited for, so nothing runs on once the call
has returned or raised.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

__all__ = ["ENV", "workers", "run_in_order"]

ENV = "TUNEPATH_BUILD_JOBS"
T = TypeVar("T")


def workers(jobs: int | None, count: int) -> int:
    """How many jobs run at once: ``jobs`` if given, else ``$TUNEPATH_BUILD_JOBS``, else one more
    than the CPUs this process may use (a notebook's kernel spends a few tenths of a second
    starting and stopping with its CPU idle: measured on 2 CPUs, 3 notebooks at once beat 2, and
    4 did no better than 3); never more than ``count`` jobs, never fewer than one."""
    if jobs is None:
        given = os.environ.get(ENV, "").strip()
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        jobs = int(given) if given.isdigit() else cpus + 1
    return max(1, min(int(jobs), count))


def _drop_after(futures: list, k: int):
    """Once job ``k`` has failed, the jobs after it cannot change the outcome: drop those not started."""
    def done(future) -> None:
        if not future.cancelled() and future.exception() is not None:
            for later in futures[k + 1:]:
                later.cancel()
    return done


def run_in_order(jobs: Sequence[Callable[[], T]], n_workers: int,
                 before: Callable[[int], None] = lambda i: None,
                 after: Callable[[int, T], None] = lambda i, result: None,
                 on_interrupt: Callable[[], None] = lambda: None) -> list[T]:
    """Run ``jobs`` on ``n_workers`` threads, started in order; for each job in order,
    ``before(i)`` once the jobs before it have been reported, then ``after(i, result)`` when
    it has finished. Returns the results in order; raises what the first failing job raised.
    A Ctrl-C calls ``on_interrupt()`` (it ends the running jobs' work) before the running jobs
    are waited for."""
    if n_workers <= 1:
        results = []
        for i, job in enumerate(jobs):
            before(i)
            results.append(job())
            after(i, results[-1])
        return results
    results = []
    with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="tunepath-job") as pool:
        futures = [pool.submit(job) for job in jobs]
        for k, future in enumerate(futures):
            future.add_done_callback(_drop_after(futures, k))
        try:
            for i, future in enumerate(futures):
                before(i)
                results.append(future.result())
                after(i, results[-1])
        except BaseException as exc:
            for future in futures:
                future.cancel()          # not started: dropped; running: waited for when the pool closes
            if isinstance(exc, KeyboardInterrupt):
                on_interrupt()
            raise
    return results
