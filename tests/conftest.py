import contextlib
import fcntl
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


@contextlib.contextmanager
def _share_of_the_machine(config, alone: bool):
    """Under pytest-xdist, a test marked ``alone`` runs with no other worker's test beside it
    (its bounds are on real runs' timings); every other test shares the machine.

    A readers-writer lock over two files: each test passes the turnstile, then holds the room
    shared, or, marked ``alone``, exclusive; a test waiting to be alone holds the turnstile, so
    the others queue behind it instead of starving it.
    """
    if not hasattr(config, "workerinput"):  # one process: every test is alone
        yield
        return
    # the workers' temporary folders share this run's parent, which pytest cleans up itself
    base = config._tmp_path_factory.getbasetemp().parent / "machine"
    with open(f"{base}.turnstile", "a") as turnstile, open(f"{base}.room", "a") as room:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)
            fcntl.flock(turnstile, fcntl.LOCK_UN)


# the longest files first (each about a minute or more on 2 cores), so that under pytest-xdist
# the workers end together instead of one running the kernels' coverage rerun alone at the end;
# the files marked `alone` last: by then the other tests have compiled the kernels they use
# (on CI's cold cache, 60 s of compiling inside them left the other core idle)
FIRST = ("test_coverage.py", "test_reliability.py", "test_simulate.py", "test_docs.py",
         "test_fidelity.py", "test_sweep.py", "test_report.py", "test_fuzz_api.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: len(FIRST) + 1 if item.get_closest_marker("alone")
               else rank.get(item.path.name, len(FIRST)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup (module fixtures included), call and teardown under the test's share."""
    with _share_of_the_machine(item.config, item.get_closest_marker("alone") is not None):
        return (yield)


# what the fuzzing and malformed-input suites tried and found, the documentation blocks not run
# and the kernels' coverage: module-level tallies, read at the end of the session
SUMMARIES = (("test_fuzz", "COUNTS"), ("test_malformed", "COUNTS"), ("test_docs", "NOT_RUN"),
             ("test_coverage", "RESULT"))


def _tallies():
    return {module: dict(getattr(sys.modules.get(module), name, None) or {})
            for module, name in SUMMARIES}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Under pytest-xdist the tallies live in the workers: each report carries its worker's."""
    report = yield
    if call.when == "teardown" and hasattr(item.config, "workerinput"):
        report.user_properties.append(("fastpp_tallies", _tallies()))
    return report


def pytest_runtest_logreport(report):
    """The controller keeps each worker's latest tallies."""
    for key, value in report.user_properties:
        if key == "fastpp_tallies":
            _WORKER_TALLIES[getattr(report, "node", None) and report.node.gateway.id] = value


_WORKER_TALLIES = {}


def pytest_terminal_summary(terminalreporter):
    """Print what the fuzzing and malformed-input suites tried and found, and the coverage."""
    merged = {module: {} for module, _ in SUMMARIES}
    for tallies in [*_WORKER_TALLIES.values(), _tallies()]:
        for module, values in tallies.items():
            for key, value in values.items():
                counted = merged[module].get(key, 0) if isinstance(value, int) else None
                merged[module][key] = value + counted if counted is not None else value
    lines = []
    for module in ("test_fuzz", "test_malformed"):
        counts = merged[module]
        if counts and any(counts.values()):
            lines.append(f"{module}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    for page, reason in merged["test_docs"].items():
        lines.append(f"not run: {page} ({reason})")
    if merged["test_coverage"]:
        lines.append(", ".join(f"{k}: {v}" for k, v in merged["test_coverage"].items()))
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
    if not hasattr(session.config, "workerinput"):  # the controller checks for its workers
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
