"""Processes sharing a cold kernel cache, bounds-checked kernels, and identical bits run to run."""

import os
import subprocess
import sys

import pandas as pd

from fastpp import Costs, build_schedule, simulate

SWEEP = """
import sys, fastpp as s
from fastpp import batch, kernels
if sys.argv[2] == "every":  # first every generator and kernel, on small points
    for name, spec in s.SCHEDULES.items():
        for p, n in ((2, 4), (4, 8)):
            if not spec.reasons(p, n, spec.default_m, p)[0]:
                s.simulate(s.build_schedule(name, p, n, spec.default_m),
                           s.Costs(1.0, 2.0, w=0.5, comm=0.1, fb=2.0))
df = s.sweep(p=[2, 4], n_per_p=[1, 2], m=[1, 2], w=1.0, progress=False)
df.to_parquet(sys.argv[1])
# the warm-up compiled each function a sweep calls with the sweep's own types
callees = [v for module in (batch, kernels) for v in vars(module).values()
           if hasattr(v, "signatures") and v.signatures]
callees += [spec.generator for spec in s.SCHEDULES.values()
            if getattr(spec.generator, "signatures", None)]
print(len(callees), max(len(f.signatures) for f in callees))
"""


def test_two_processes_share_a_cold_cache_bounds_checked(tmp_path):
    """Two processes compile into the same empty cache at once, every array access
    bounds-checked (an out-of-range index raises instead of reading past an array). One runs
    a sweep (with its warm-up's helper process); the other every generator and kernel on
    small points, then the same sweep. Both finish with the same table, and in the first every
    function the sweep kernel calls was compiled once, with the sweep's types (a second
    signature would mean the warm-up compiled it in vain).

    One test for both, since each cold compile costs about a minute of CPU: the cache works
    the same with bounds checks, which change only the code generated."""
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", FASTPP_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", SWEEP, str(tmp_path / f"{what}.parquet"),
                               what], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for what in ("sweep", "every")]
    finished = [proc.communicate(timeout=900) for proc in procs]  # both, whatever happens
    for proc, (_, err) in zip(procs, finished, strict=True):
        assert proc.returncode == 0, err
    callees, most = (int(x) for x in finished[0][0].split())
    assert callees >= 15 and most == 1, finished[0][0]
    first, second = (pd.read_parquet(tmp_path / f"{what}.parquet") for what in ("sweep", "every"))
    pd.testing.assert_frame_equal(first, second)
    assert len(first) > 30
    assert list((tmp_path / "cache").glob("numba-*/sweep-kernel.ready"))


def test_same_bits_every_time():
    sched = build_schedule("v-half", 4, 12, 2)
    costs = Costs(1.3, 2.7, w=0.9, comm=0.11, gamma=0.4)
    a, b = simulate(sched, costs), simulate(build_schedule("v-half", 4, 12, 2), costs)
    assert a.start.tobytes() == b.start.tobytes() and a.end.tobytes() == b.end.tobytes()
    assert a.mem_start.tobytes() == b.mem_start.tobytes()


def test_a_command_says_once_that_kernels_compile(capsys):
    """A command's first run on a machine waited 10-30 s for Numba without a word: the command
    line says so when a kernel first compiles, once, and nothing where all load or are
    loaded."""
    import numba

    from fastpp.__main__ import main
    from fastpp._jit import announce_compiles

    assert main(["simulate", "-s", "1f1b", "-p", "2", "-n", "2"]) == 0  # (loaded, or compiled)
    capsys.readouterr()
    assert main(["simulate", "-s", "1f1b", "-p", "2", "-n", "2"]) == 0
    assert "compiling" not in capsys.readouterr().err  # this process has them
    if numba.config.DISABLE_JIT:
        return
    with announce_compiles("compiling now"):
        numba.njit(lambda x: x + 1)(1)  # two new functions: two compiles, one message
        numba.njit(lambda x: x * 2)(1.0)
    assert capsys.readouterr().err == "compiling now\n"
    numba.njit(lambda x: x - 1)(1)  # outside the block: nothing said
    assert capsys.readouterr().err == ""


def test_every_kernel_module_is_in_the_caches_fingerprint():
    """The kernel cache's folder is named by a hash of the jitted modules, so that an edit
    to a kernel compiles it again. The modules were found by their import line, and a
    change to ``from ._jit import ONE, U, jit`` had left kernels.py, compiled.py and
    vshape.py out: an edit to ``kernels.timeline`` kept the cached sweep kernels running the
    old code. Every module with a ``@jit`` counts now, and so do the modules whose constants
    they freeze."""
    import re
    from pathlib import Path

    import fastpp
    from fastpp._jit import _jitted_sources, jitted_modules

    package = Path(fastpp.__file__).parent
    decorated = {path for path in package.rglob("*.py")
                 if re.search(r"^\s*@jit\b", path.read_text(encoding="utf-8"), re.M)}
    assert decorated and decorated == set(jitted_modules())
    assert {package / "kernels.py", package / "compiled.py", package / "costs.py",
            package / "generators" / "registry.py"} <= set(_jitted_sources())
