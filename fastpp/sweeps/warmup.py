"""Compiling the sweep kernel and a sweep's generators once per machine, in two processes
when the cache is empty."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from .. import engine
from .._jit import CACHE_DIR, disabled, say_compiling
from ..costs import Costs
from ..generators.registry import SCHEDULES, build_schedule, get_spec
from ..simulate import simulate
from .chunk import Chunk
from .points import as_list

# On an empty kernel cache a second process compiles these generators (the registry's
# compile_apart) while this one compiles the others, the simulation kernels and the sweep
# kernel: Numba compiles one function at a time per process.
SECOND_PROCESS = tuple(name for name, spec in SCHEDULES.items() if spec.compile_apart)
_warm: set[str] = set()  # the schedules this process has compiled or loaded
_LOCK = threading.Lock()


def _new_lock() -> None:
    global _LOCK
    _LOCK = threading.Lock()


# a child forked while another thread warmed up inherits the lock held, and no thread to free it
os.register_at_fork(after_in_child=_new_lock)


def warm_up(announce: bool = False, schedules=None, plans: bool = False) -> bool:
    """Compile the sweep kernel and the generators of ``schedules``, or load them from the
    kernel cache, in this process.

    Runs before a sweep's first chunk, once on every Dask worker, and (with ``plans``) before
    ``plan``. A marker in the cache folder per schedule (and ``sweep-kernel.ready`` for the
    kernel, ``plan-kernels.ready`` for the point plans' two) says what is compiled. What is
    not compiles here; when that includes generators of ``SECOND_PROCESS`` and others,
    a second process compiles the former while this one compiles the latter, the simulation
    kernels and then the sweep kernel, which finds its callees compiled: the same functions
    with the same types as ``build_schedule`` and ``simulate`` compile. Where the point plans'
    kernels are to compile beside other work, the second process compiles them instead (they
    take about as long as every generator) and this one every generator; alone, they compile
    here. Each process compiles a function at most once; both compile the NumPy allocations
    the kernels use. With Numba off (``NUMBA_DISABLE_JIT``) nothing compiles, nothing starts
    and no marker is written. Threads take turns.

    Parameters
    ----------
    announce : bool
        Say on stderr when the kernels compile (once per machine, about half a minute for
        every schedule).
    schedules : str or list of str, optional
        The registered schedules to compile (default: all); a sweep passes its own. A name
        that is not registered is a ``ScheduleError``.
    plans : bool
        Also compile the kernels that make and run a build's point plan
        (``fastpp.compiled.plan_schedule``, ``fastpp.batch.simulate_planned``), which
        ``plan`` runs and a sweep of few points a build does not.

    Returns
    -------
    bool
        True (a Dask task's result on each worker).
    """
    wanted = None if schedules is None else {get_spec(name, "schedules").name
                                             for name in as_list(schedules, "schedules")}
    names = [name for name in SCHEDULES if wanted is None or name in wanted]
    kernel = "plan" if plans else ""  # what this process loads ("": the sweep kernel)
    if kernel in _warm and all(name in _warm for name in names):  # (without the lock)
        return True
    # (the lock: threads warming up at once each started a second process)
    with _LOCK, _interrupts_kept() as interrupted:
        todo = [name for name in names if name not in _warm]
        if not todo and kernel in _warm:
            return True
        if disabled():  # nothing compiles: every kernel runs as Python
            _warm.update(todo, [kernel])
            return True
        folder = Path(CACHE_DIR)
        cold = [name for name in todo if not (folder / f"{name}.ready").exists()]
        sweep_cold = not (folder / "sweep-kernel.ready").exists()
        plans_cold = plans and not (folder / "plan-kernels.ready").exists()
        loaded = [kernel]
        if cold or sweep_cold or plans_cold:
            if announce:
                say_compiling("fastpp: compiling the kernels for this machine, once (about "
                              "half a minute for every schedule)")
            # the second process takes the point plans' kernels where this one has other work
            # to do meanwhile, else the generators of SECOND_PROCESS beside others
            helper, apart = None, []
            if plans_cold and (cold or sweep_cold) and sys.executable:
                helper = _helper([], plans=True)
            elif not plans_cold and sys.executable:
                apart = [name for name in cold if name in SECOND_PROCESS]
                if apart and len(apart) < len(cold):
                    helper = _helper(apart)
            here = cold if helper is None else [name for name in cold if name not in apart]
            if cold or sweep_cold:
                build_small(here, run=True)
                _sweep_kernel()  # before waiting: the helper's generators are not its callees
                loaded.append("")
            if helper is not None:
                try:  # whatever it did not finish compiles when it is first called
                    helper.wait(timeout=600)
                except subprocess.TimeoutExpired:
                    helper.kill()
                    helper.wait()
                if helper.returncode != 0:  # no marker for what it may not have compiled
                    cold = here
        # loaded here, from the cache where the helper compiled them (plan's builds of few
        # points load the sweep kernel when they first run, if any does)
        if plans:
            _plan_kernels()
        else:
            _sweep_kernel()
        if interrupted:  # before any marker or _warm entry: a kernel may be half loaded
            raise interrupted[0]
        folder.mkdir(parents=True, exist_ok=True)
        for name in [*cold, "sweep-kernel", *(["plan-kernels"] if plans else [])]:
            (folder / f"{name}.ready").touch()
        _warm.update(todo, loaded)
    return True


@contextlib.contextmanager
def _interrupts_kept():
    """The Ctrl-C (or the script's SIGTERM) that Numba's loading of a cached kernel
    swallowed, kept for the caller to raise: raised inside llvmlite's ctypes callback
    (``ExecutionEngine._raw_object_cache_notify``) it reached only ``sys.unraisablehook``,
    and a sweep ran on to its end. Other unraisable exceptions go to the hook as before."""
    seen, previous = [], sys.unraisablehook

    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            seen.append(unraisable.exc_value)
        else:
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield seen
    finally:
        sys.unraisablehook = previous


def _helper(names, plans: bool = False) -> subprocess.Popen:
    """A second process compiling the generators ``names`` and, with ``plans``, the point
    plans' kernels (the same fastpp, whatever the working folder)."""
    path = os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                            os.environ.get("PYTHONPATH", "")])
    # Linux: it ends with this process (PR_SET_PDEATHSIG, before fastpp's import), not
    # compiling on alone after a kill; exits at once if this one has ended already
    code = (f"import ctypes, os, signal, sys\n"
            f"if sys.platform.startswith('linux'):\n"
            f"    ctypes.CDLL(None).prctl(1, signal.SIGTERM)\n"
            f"    if os.getppid() != {os.getpid()}:\n"
            f"        sys.exit(1)\n"
            f"from fastpp.sweeps.warmup import build_small, _plan_kernels\n"
            f"build_small({tuple(names)!r}){'; _plan_kernels()' if plans else ''}")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=path))


def _sweep_kernel() -> None:
    """Run the sweep kernel on one point of the first schedule: compiles or loads it."""
    one = {"schedule": [0], "p": [1], "n": [1], "m": [1], "G": [1], "f": [1.0], "b": [2.0],
           "w": [0.0], "i": [np.nan], "comm": [0.0], "gamma": [1.0], "fb": [np.nan], "act": [1.0],
           "bandwidth": [np.nan], "message_bytes": [0.0], "overhead": [0.0], "send": [0.0],
           "point": [0]}
    Chunk({k: np.array(v) for k, v in one.items()})


def _plan_kernels() -> None:
    """Make and run the point plan of one build of one point (the first schedule): compiles or
    loads the kernels ``plan`` runs its shared builds with."""
    engine.run(*([x] for x in (0, 1, 1, 1, 1)), {"f": 1.0, "b": 2.0}, share=1)


def build_small(names, run: bool = False) -> None:
    """Build (and with ``run`` simulate) a small point of each schedule: compiles them."""
    for name in names:
        schedule = build_schedule(name, 4, 8, SCHEDULES[name].default_m)
        if run:
            # its own arrays: simulate then runs the per-op kernels the sweep kernel calls,
            # not a built schedule's compiled point plan, which only runs of
            # fastpp.batch.SHARE points of one build take (the main job's builds have 3; 2 s
            # of compiling that a cold main job would wait for)
            schedule._unshare()
            simulate(schedule, Costs(1.0, 2.0, w=1.0))
