import os
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # reference.py and helpers.py, for bench/ too
from helpers import ROOT, tree_status  # noqa: E402 (found through the path above)


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
    for page, reason in (getattr(sys.modules.get("test_docs"), "NOT_RUN", None) or {}).items():
        lines.append(f"not run: {page} ({reason})")
    coverage = getattr(sys.modules.get("test_coverage"), "RESULT", None)
    if coverage:
        lines.append(", ".join(f"{k}: {v}" for k, v in coverage.items()))
    if lines:
        terminalreporter.write_sep("-", "reliability, and documentation blocks not run")
        for line in lines:
            terminalreporter.write_line(line)
    left = getattr(terminalreporter.config, "_tree_left", None)
    if left:
        terminalreporter.write_sep("!", "the tests left these in the working tree", red=True)
        for line in left:
            terminalreporter.write_line(line)


def pytest_sessionstart(session):
    session.config._tree_before = tree_status(ROOT)


def pytest_sessionfinish(session, exitstatus):
    """The suite leaves the working tree as it found it: a file a test wrote outside its
    ``tmp_path`` (x.png, 2/, report.html at the root were once committed) fails the run."""
    before = getattr(session.config, "_tree_before", None)
    if before is None:  # not a git checkout (an unpacked sdist): nothing to compare
        return
    after = tree_status(ROOT) or set()
    new = sorted(after - before)
    if new:
        session.config._tree_left = new
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
