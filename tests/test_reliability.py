"""Sweeps sharing a kernel cache, bounds-checked kernels, and identical bits run to run."""

import os
import subprocess
import sys

import pandas as pd

from fastpp import Costs, build_schedule, simulate

SWEEP = """
import sys, fastpp as s
from fastpp import batch, kernels
df = s.sweep(p=[2, 4], n_per_p=[1, 2], m=[1, 2], w=1.0, progress=False)
df.to_parquet(sys.argv[1])
# the warm-up compiled each function a sweep calls with the sweep's own types
callees = [v for module in (batch, kernels) for v in vars(module).values()
           if hasattr(v, "signatures") and v.signatures]
callees += [spec.generator for spec in s.SCHEDULES.values()
            if getattr(spec.generator, "signatures", None)]
print(len(callees), max(len(f.signatures) for f in callees))
"""


def test_two_sweeps_sharing_a_cold_cache(tmp_path):
    """Both compile into the same empty cache at once (each with its helper process); both
    finish with the same table, and in both every function the sweep kernel calls was
    compiled once, with the types the sweep uses (a second signature would mean the warm-up
    compiled it in vain)."""
    env = dict(os.environ, FASTPP_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", SWEEP, str(tmp_path / f"{i}.parquet")],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(2)]
    finished = [proc.communicate(timeout=600) for proc in procs]  # both, whatever happens
    for proc, (out, err) in zip(procs, finished, strict=True):
        assert proc.returncode == 0, err
        callees, most = (int(x) for x in out.split())
        assert callees >= 15 and most == 1, out
    first, second = (pd.read_parquet(tmp_path / f"{i}.parquet") for i in range(2))
    pd.testing.assert_frame_equal(first, second)
    assert len(first) > 30
    assert list((tmp_path / "cache").glob("numba-*/sweep-kernel.ready"))


BOUNDS = """
import numpy as np, fastpp
from fastpp import sweep
from fastpp import Costs, build_schedule, simulate
for name, spec in fastpp.SCHEDULES.items():
    m = spec.default_m
    for p, n in ((2, 4), (4, 8)):
        if not spec.reasons(p, n, m, p)[0]:
            simulate(build_schedule(name, p, n, m), Costs(1.0, 2.0, w=0.5, comm=0.1, fb=2.0))
print(len(sweep(p=[2, 4], n_per_p=[1, 2], m=[1, 2], w=1.0, progress=False)))
"""


def test_kernels_under_numba_boundscheck(tmp_path):
    """Every generator and kernel on a small set with every array access bounds-checked (an
    out-of-range index raises instead of reading past an array)."""
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", FASTPP_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-c", BOUNDS], env=env, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout.split()[-1]) > 30


def test_same_bits_every_time():
    sched = build_schedule("v-half", 4, 12, 2)
    costs = Costs(1.3, 2.7, w=0.9, comm=0.11, gamma=0.4)
    a, b = simulate(sched, costs), simulate(build_schedule("v-half", 4, 12, 2), costs)
    assert a.start.tobytes() == b.start.tobytes() and a.end.tobytes() == b.end.tobytes()
    assert a.mem_start.tobytes() == b.mem_start.tobytes()
