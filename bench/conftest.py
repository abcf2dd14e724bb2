import os
import sys

import pytest

# the reference simulator and the test helpers
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))


def pytest_configure(config):
    # under pytest-xdist pytest-benchmark turns itself off in the workers: each benchmark ran
    # once and no ratio was measured, yet the run passed
    workers = config.getoption("numprocesses", None)
    if config.getoption("benchmark_enable", False) and workers not in (None, 0):
        raise pytest.UsageError(f"--benchmark-enable times in one process: add -n 0 (got "
                                f"-n {workers}; under pytest-xdist no ratio is measured)")
