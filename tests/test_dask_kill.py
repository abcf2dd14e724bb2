"""A Dask worker killed in the middle of a sweep: the sweep completes (Dask runs the lost
chunks again on the other worker), every point's row is there exactly once and equals a serial
sweep's, and resuming the finished folder changes nothing.

A real ``LocalCluster`` of worker processes; a thread kills one worker with SIGKILL once the
first chunks are on disk, while the others are in flight.
"""

import faulthandler
import os
import signal
import threading
import time

import pandas as pd
import pytest

import fastpp

distributed = pytest.importorskip("dask.distributed")

GRID = dict(schedules=["1f1b", "gpipe", "zb-h1", "interleaved-1f1b", "zbv"], p=[2, 3, 4, 6],
            n_per_p=[1, 2, 3, 4, 6, 8], f=[1.0, 1.5], b=[2.0, 3.0], w=[0.0, 0.5])
CHUNK = 8  # points per chunk: many chunks, so that the kill lands while some are in flight


def _killer(out, pids, state):
    """Once a few chunks are written, SIGKILL the first worker (its nanny starts another)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        written = len(list(out.glob("_fastpp/part-*.json"))) if out.exists() else 0
        if written >= 3:
            state["written_at_kill"] = written
            os.kill(pids[0], signal.SIGKILL)
            return
        time.sleep(0.005)


def test_sweep_survives_a_killed_worker(tmp_path):
    # a sweep that waits forever on a lost chunk is the failure this test is for: end the run
    # with every thread's stack rather than hang CI
    faulthandler.dump_traceback_later(180, exit=True)
    try:
        _survives(tmp_path)
    finally:
        faulthandler.cancel_dump_traceback_later()


def _survives(tmp_path):
    serial = fastpp.sweep(**GRID, progress=False, workers=1)
    total = len(serial) + serial.attrs["skipped"]
    chunks = -(-total // CHUNK)
    out = tmp_path / "sweep"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        client.run(fastpp.sweeps.warm_up)  # compiled before the clock of the kill starts
        pids = list(client.run(os.getpid).values())
        state = {}
        killer = threading.Thread(target=_killer, args=(out, pids, state))
        killer.start()
        # once failed with "bound to a different event loop" when the lost chunk came back
        df = fastpp.sweep(**GRID, progress=False, chunk_size=CHUNK, out=out, executor="dask",
                          scheduler=cluster.scheduler_address)
        killer.join()
    assert "written_at_kill" in state, "the worker was never killed"
    assert state["written_at_kill"] < chunks, "the kill came after the sweep had finished"
    # each point once, with the serial sweep's numbers, both returned and on disk
    pd.testing.assert_frame_equal(df, serial)
    stored = fastpp.sweeps.load(out)
    assert stored.attrs["complete"]
    assert stored["point"].is_unique and len(stored) == len(serial)
    pd.testing.assert_frame_equal(stored.reset_index(drop=True), serial)
    again = fastpp.sweep(**GRID, progress=False, chunk_size=CHUNK, out=out, resume=True)
    pd.testing.assert_frame_equal(again, serial)
