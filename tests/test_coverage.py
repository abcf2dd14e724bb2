"""Line coverage of the package with Numba's JIT off (the kernels run as Python), >= 90%.

Runs the suite on small cases in a subprocess with ``NUMBA_DISABLE_JIT=1``; the subprocesses
the suite starts itself (scripts, kills, Dask, bounds checks, real PyTorch ranks: timed under
coverage's tracing, their predictions drift past the real-run test's bound) are left out there.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULT = {}
SLOW_WITHOUT_JIT = ("killed or dask or main_job or demo or p16 or damaged or "
                    "csv_when_pyarrow or cli_optimize or table5 or authors or deterministic or "
                    "brute or fixed_schedules or exact_proves")


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="this is that run")
def test_coverage_without_jit(tmp_path):
    pytest.importorskip("pytest_cov")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", FASTPP_SMALL="1", FASTPP_FUZZ="40",
               COVERAGE_FILE=str(tmp_path / ".coverage"))  # not in the work tree
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider",
         "--cov=fastpp", "--cov-report=term", f"--cov-report=json:{tmp_path / 'cov.json'}",
         "--ignore=tests/test_reliability.py", "--ignore=tests/test_malformed.py",
         "--ignore=tests/test_coverage.py", "--ignore=tests/test_measured_real.py",
         "--ignore=tests/test_variability_real.py",
         "-k", f"not ({SLOW_WITHOUT_JIT})"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    total = float(re.search(r"^TOTAL.*?(\d+(?:\.\d+)?)%$", run.stdout, re.M).group(1))
    RESULT["line coverage without JIT"] = f"{total:g}%"
    assert total >= 90, run.stdout[-3000:]
