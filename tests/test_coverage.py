"""Line coverage of the package, >= 90%, the jitted kernels' lines included.

With Numba's JIT on, coverage sees no line of a jitted function: Numba runs its own machine
code. So the floor is measured in two parts over the same package and combined:

- the suite itself, under ``pytest --cov`` (``.ci/run``; the source and the floor are in
  pyproject.toml), measures every line that runs as Python;
- this test reruns the tests that drive the kernels with ``NUMBA_DISABLE_JIT=1`` (the kernels
  run as Python, on small cases) under coverage, and leaves its data beside the suite's, which
  pytest-cov combines before it applies the floor.

The test itself asserts the part it owns: the modules that hold jitted code, measured without
the JIT, at >= 90% of their lines (in any run, with or without ``--cov``).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fastpp._jit import jitted_modules

ROOT = Path(__file__).resolve().parents[1]
RESULT = {}
# the tests that drive the kernels (generators, timelines, memory, batches, search, noise,
# the trace scan)
KERNEL_TESTS = ("test_compiled.py", "test_engine.py", "test_generators.py", "test_noise.py",
                "test_placement.py", "test_read_scan.py", "test_schedule.py", "test_search.py",
                "test_simulate.py", "test_vshape.py")
# checks whose size is the point (closed forms over thousands of Monte Carlo samples, the
# published tables, brute force, the CLI's search, every schedule's search result, thread and
# fork equivalence, pictures, every generator through the batch kernel, tens of thousands
# of samples across chunks and bounds, a Ctrl-C into millions, ZB-V at p = 1000): the suite
# makes them with the JIT. Each adds a handful of lines at most, measured per test with coverage's
# dynamic contexts: without them the jitted modules are covered at 94.9% without the JIT
# (95.3% with them), in 80 s of CPU instead of 150 s
SLOW_WITHOUT_JIT = ("deterministic or johansson or gamma_sum or table5 or authors or brute or "
                    "fixed_schedules or exact_proves or cli_optimize or absorption_threshold or "
                    "samples_on_threads or pictures or every_returned_schedule_checks_out or "
                    "forked_child or generators_agree_with_simulate or chunk_boundaries or "
                    "ctrl_c_stops or too_large_to_hold or outgrows")


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="this is that run")
def test_kernels_covered_without_jit(tmp_path):
    coverage = pytest.importorskip("coverage")
    data = tmp_path / ".coverage"  # not in the work tree
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", FASTPP_SMALL="1", COVERAGE_FILE=str(data))
    run = subprocess.run(
        [sys.executable, "-m", "coverage", "run", "--parallel-mode", "--source=fastpp",
         "-m", "pytest", *(f"tests/{name}" for name in KERNEL_TESTS), "-q",
         "-p", "no:cacheprovider", "-n", "0", "-k", f"not ({SLOW_WITHOUT_JIT})"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    combined = coverage.Coverage(data_file=str(data), source=["fastpp"])
    combined.combine(strict=True)
    combined.save()
    with open(os.devnull, "w") as quiet:
        kernels = combined.report(include=[str(p) for p in jitted_modules()],
                                  file=quiet)
    RESULT["line coverage of the jitted modules without JIT"] = f"{kernels:.1f}%"
    # the suite's own coverage run (pytest --cov) combines every data file beside its own
    suite = coverage.Coverage.current()
    if suite is not None:
        shutil.copy(data, f"{os.path.abspath(suite.config.data_file)}.nojit.{os.getpid()}")
    assert kernels >= 90
