"""Running a sweep's chunks on a Dask cluster."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from ..checks import ScheduleError
from .chunk import Chunk
from .warmup import warm_up


def _task(cols, objects, invalid):
    return Chunk(cols, objects).result(invalid)


def run_on_dask(plan, todo, chunk_size, invalid, workers, scheduler,
                announce: bool = False) -> Iterator:
    """Yield ``(chunk, frame, reasons)`` as the cluster finishes them, a few in flight;
    with ``announce``, say on stderr when the kernels compile here (a local cluster's)."""
    from dask.distributed import Client, LocalCluster, wait

    cluster = None
    if scheduler is None:
        try:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, host="127.0.0.1",
                                   dashboard_address=None, processes=True)
        except RuntimeError as error:
            said = str(error).rstrip(".")
            if "failed to start" not in said:  # (not the workers' start: Dask's own error)
                raise
            raise ScheduleError(
                f"executor='dask' could not start its local workers ({said}). They start as "
                f"new processes, which import the calling script again: a script must call "
                f"sweep under `if __name__ == \"__main__\":`, or give scheduler= the address "
                f"of a running cluster") from None
    try:
        client = Client(scheduler if scheduler is not None else cluster)
    except (OSError, ValueError, TypeError) as error:  # no port, nobody listening, a timeout
        if cluster is not None:
            cluster.close()
        raise ScheduleError(f"scheduler must be the address of a running Dask scheduler (got "
                            f"{scheduler!r}: {error})") from None
    try:
        if cluster is not None:
            # compiled here once, the local workers load the kernels from the cache (a cold
            # one: half a minute that the sweep's bar had sat at 0% without a word)
            warm_up(announce=announce)
        # every worker compiles or loads the kernels once, as a task of its own: client.run
        # would call warm_up on the worker's event loop, which a cold compile (half a minute
        # and more) blocks, heartbeats and all
        # (nthreads lists every worker; scheduler_info() listed 5 at most in some releases;
        # a worker that leaves meanwhile hands its warm-up to another rather than hang it)
        client.gather([client.submit(warm_up, workers=[worker], allow_other_workers=True,
                                     pure=False)
                       for worker in client.nthreads()])
        pending = iter(todo)
        window = {_submit(client, plan, c, chunk_size, invalid) for c in itertools.islice(
            pending, 2 * max(1, len(client.nthreads())))}
        while window:
            # on this client's loop: wait() takes the process's default client, and a sweep
            # inside a caller's own Client to another cluster would wait on that one's loop
            # ("bound to a different event loop"; as_completed could hang there)
            with client.as_current():
                done, window = wait(window, return_when="FIRST_COMPLETED")
            for future in done:
                # a result lost with a killed worker is computed again before gather returns
                frame, reasons = client.gather(future)
                yield future.key_chunk, frame, reasons
                nxt = next(pending, None)
                if nxt is not None:
                    window.add(_submit(client, plan, nxt, chunk_size, invalid))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _submit(client, plan, c, chunk_size, invalid):
    future = client.submit(_task, plan.chunk(c, chunk_size), plan.objects, invalid, pure=False)
    future.key_chunk = c
    return future
