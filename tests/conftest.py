import os
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # reference.py and helpers.py, for bench/ too


@pytest.fixture
def rng(request):
    """A generator seeded by the test's id: reproducible, different for every test."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def pytest_terminal_summary(terminalreporter):
    """Print what the fuzzing and malformed-input suites tried and found, and the coverage."""
    lines = []
    for module in ("test_fuzz", "test_malformed"):
        counts = getattr(sys.modules.get(module), "COUNTS", None)
        if counts and any(counts.values()):
            lines.append(f"{module}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    coverage = getattr(sys.modules.get("test_coverage"), "RESULT", None)
    if coverage:
        lines.append(", ".join(f"{k}: {v}" for k, v in coverage.items()))
    if lines:
        terminalreporter.write_sep("-", "reliability")
        for line in lines:
            terminalreporter.write_line(line)
