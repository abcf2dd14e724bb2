"""Running real ``torch.distributed.pipelining`` schedules, profiled, one process per rank.

``measure`` runs one step of a schedule on a small MLP after a warm-up, profiles it with
``torch.profiler``, writes ``rank{r}_trace.json`` per rank and reads the traces back with
``fastpp.read_torch_trace``. The model is the same for every schedule: ``layers`` blocks of
``Linear(hidden, hidden)`` and ReLU, made from one seed and split evenly over the ``p * m``
virtual stages. The defaults (256 units, microbatches of 256) keep the weights in cache and
the backward about twice the forward, as in a real model; narrower microbatches of wider
layers are bound by memory bandwidth, which a busy neighbour core takes away.

A schedule is a PyTorch class (``"ScheduleInterleaved1F1B"``) or a fastpp
schedule (a registered name or a ``Schedule``, for example one from ``fastpp.optimize``), run
through PyTorch's ``_PipelineScheduleRuntime`` from the compute-only CSV that
``fastpp.io.write_torch_csv`` writes.

Each rank's process runs ``rank.py`` as a script, which imports torch and not fastpp; this
module never imports torch: ``fastpp.measured`` imports without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..checks import (
    ScheduleError,
    ScheduleTypeError,
    file_path,
    flag,
    index,
    instance,
    known_keywords,
    make_folder,
    missing_extra,
    nonnegative_int,
    number,
    one_of,
    positive_int,
)
from ..generators.registry import SCHEDULES, build_schedule
from ..io import in_loss_order, write_torch_csv
from ..schedule import Schedule
from .run import MeasuredRun, read_torch_trace
from .steps import MeasuredSteps

# PyTorch's schedule classes and the fastpp schedule whose order each one runs (the registry's
# torch_class).
TORCH_CLASSES = {spec.torch_class: name for name, spec in SCHEDULES.items() if spec.torch_class}
DEVICES = ("cpu", "cuda")
OUT = "measured"  # measure's and measure_many's folder for the traces when none is given
RANK_SCRIPT = Path(__file__).with_name("rank.py")  # each rank's process runs it


@dataclass(frozen=True)
class Job:
    """One schedule to run and profile (as JSON, it goes to every rank's process).

    ``runner`` is a PyTorch class name, or ``"csv"`` to load ``csv`` into
    ``_PipelineScheduleRuntime``; ``stages[r]`` are the virtual stages rank ``r`` holds.
    """

    runner: str
    csv: str
    p: int
    n: int
    stages: tuple[tuple[int, ...], ...]
    out: str
    # injected variability: (stage, kind, seconds, probability) per delay; (seconds, r1, r2)
    delays: tuple = ()
    link: tuple | None = None


MAX_RANKS = 1024
# the profiler's lines on each start and stop of a step (libkineto's STAGE and USDT levels, which
# no KINETO_LOG_LEVEL below its errors' silences): two a profiled step and rank, dropped from what
# the ranks print; its warnings and errors pass
PROFILER_CHATTER = re.compile(r"^(STAGE|USDT):\S+ \S+ \d+:\d+ \S+\.cpp:\d+\] .*\n?", re.MULTILINE)
PROBE = 5  # each stage's probes after a profiled step (measure's probe)


@dataclass(frozen=True)
class Model:
    """The MLP every schedule runs, and the run's settings."""

    layers: int
    hidden: int
    microbatch: int
    device: str
    warmup: int
    realtime: bool = False
    steps: int = 1
    round_robin: bool = False
    probe: int = 0


@known_keywords("measure")
def measure(schedule, p: int | None = None, n: int | None = None, m: int | None = None, *,
            layers: int = 16, hidden: int = 256, microbatch: int = 256, out=OUT,
            device: str = "cpu", warmup: int = 1, realtime: bool = False,
            timeout: float = 300.0, delay=(), link_delay=None, steps: int = 1,
            probe: int = PROBE):
    """Run one profiled step of ``schedule`` for real and read its traces back.

    Parameters
    ----------
    schedule : str or Schedule
        A PyTorch schedule class of ``TORCH_CLASSES`` (e.g. ``"ScheduleZBVZeroBubble"``), a
        registered fastpp name (e.g. ``"1f1b"``, built with ``p, n, m``) or a ``Schedule``
        (its own ``p, n, m``); fastpp schedules run through ``_PipelineScheduleRuntime``.
    p, n : int, optional
        Ranks (one process each) and microbatches (default: a ``Schedule``'s own, else 2
        and 4).
    m : int, optional
        Chunks per rank (default: the schedule's own, 2 for V classes and interleaving).
    layers, hidden, microbatch : int
        The MLP: ``layers`` blocks of ``hidden`` units, split evenly over the ``p*m`` stages;
        ``microbatch`` samples per microbatch.
    out : str or Path
        Folder for ``rank{r}_trace.json`` (created; existing traces there are replaced).
    device : {"cpu", "cuda"}
        ``"cpu"`` runs gloo with one thread per rank; ``"cuda"`` runs NCCL on GPU ``r`` per
        rank (a machine with ``p`` GPUs; with fewer, a ``ScheduleError`` before any rank starts).
    warmup : int
        Steps before the profiled ones, run under the profiler but not written (its memory
        is then in place before the steps it records).
    realtime : bool
        Run the ranks under Linux's real-time scheduler (``SCHED_FIFO``; needs root or
        ``CAP_SYS_NICE``), ahead of every other process: on a shared machine the others'
        load otherwise inflates waits and op times several-fold. The kernel still leaves
        other processes 5% of each second, and ``timeout`` holds.
    timeout : float
        Seconds before hung ranks are killed.
    delay : sequence of (stage, kind, seconds, probability)
        Injected stragglers: each op of ``kind`` (``"F"`` or ``"B"``) of virtual stage
        ``stage`` sleeps ``seconds`` with that probability (a ``str`` ``"STAGE:KIND:SECONDS[:
        PROB]"`` too, as ``--delay`` takes it). A forward sleeps before its module runs, a
        backward as it starts (an identity on the stage's output whose backward sleeps), so
        the sleep lies inside the op the profiler labels. Each stage draws from its own
        seeded generator: the same run twice delays the same ops.
    link_delay : float or (seconds, r1, r2), optional
        A slow link: the rank sending over the link between ranks ``r1`` and ``r2``
        (default the middle link, ``p//2 - 1`` and ``p//2``) sleeps ``seconds`` before each
        send over it, either direction, as PipeMorph injects it (``fastpp.Noise(link_delay=
        {(r1, r2): seconds}, blocking=True)`` models it). The sleep falls between the ops.
    steps : int
        Profiled steps: 1 writes the traces to ``out``; more write step ``k``'s to
        ``out/step{k}`` and return one ``MeasuredRun`` per step.
    probe : int
        After each profiled step, once every rank is done with it, each rank runs each of its
        stages ``probe`` times on a fresh microbatch, with a full backward and with
        PyTorch's split one (``stage_backward_input`` then ``stage_backward_weight``), in
        the same trace (``MeasuredRun.probe``: what a split backward costs against a full
        one, which ``costs()`` prices). 0: no probe.

    Returns
    -------
    fastpp.MeasuredRun, or ``fastpp.MeasuredSteps`` (a list of them, with the costs and
    empirical noise they calibrate) for ``steps > 1``

    Raises
    ------
    ScheduleError
        On bad arguments, a rank that fails (with its error) or a run past ``timeout``.
    """
    timeout = _timeout(timeout)
    job, model, order = _job(schedule, p, n, m, layers, hidden, microbatch, out, device, warmup,
                             realtime)
    job = _injected(job, delay, link_delay)
    model = dataclasses.replace(model, steps=positive_int(steps, "steps"),
                                probe=_probe(probe))
    return _run([job], [order], model, timeout)[0]


def _injected(job: Job, delay, link_delay) -> Job:
    """``job`` with its delays and slow link, checked."""
    V = sum(len(x) for x in job.stages)
    link = link_of(link_delay, job.p)
    if link is not None:  # a sleep before each send: only a pair that passes activations sends
        rank = {s: r for r, held in enumerate(job.stages) for s in held}
        pairs = sorted({(min(rank[s], rank[s + 1]), max(rank[s], rank[s + 1]))
                        for s in range(V - 1) if rank[s] != rank[s + 1]})
        if (min(link[1:]), max(link[1:])) not in pairs:
            raise ScheduleError(f"link_delay must join ranks that pass activations, one of "
                                f"{pairs} (got ranks {link[1]} and {link[2]})")
    return dataclasses.replace(job, delays=_delays(delay, V), link=link)


def _run(jobs: list[Job], orders: list, model: Model, timeout: float) -> list:
    """Prepare each job's folder, run the jobs in one set of processes and read them back:
    a ``MeasuredRun`` per job, or its ``MeasuredSteps`` (``model.steps > 1``). A schedule
    run through the CSV runtime runs with its microbatches named in its losses' order
    (``in_loss_order``) and is read back under its own names."""
    _torch()  # before out is touched: a run without torch must not delete the old traces
    shared = shared_cpus(jobs[0].p, model.device)
    if shared:
        warnings.warn(shared, RuntimeWarning, stacklevel=3)
    ran = [None if order is None else in_loss_order(order) for order in orders]
    for job, order in zip(jobs, ran, strict=True):
        _prepare(job, order)
        for k in range(model.steps if model.steps > 1 else 0):
            _prepare(dataclasses.replace(job, out=str(Path(job.out) / f"step{k}")), None)
    run_jobs(jobs, model, timeout)
    if model.steps == 1:
        read = [[read_torch_trace(_traces(job.out, job.p))] for job in jobs]
    else:
        read = [[read_torch_trace(_traces(Path(job.out) / f"step{k}", job.p))
                 for k in range(model.steps)] for job in jobs]
    runs = [[run if order is renamed else _named(run, order) for run in steps]
            for steps, order, renamed in zip(read, orders, ran, strict=True)]
    return [steps[0] if model.steps == 1 else MeasuredSteps(steps) for steps in runs]


def _traces(folder, p: int) -> list[Path]:
    """The files the ranks wrote in ``folder`` (``rank.py``'s names): another JSON file there
    (a note, a Perfetto trace) is no rank's, and reading the whole folder had refused the
    run after it ran."""
    return [Path(folder) / f"rank{r}_trace.json" for r in range(p)]


def shared_cpus(p: int, device: str) -> str:
    """What a CPU run of ``p`` ranks measures where this process may use fewer than ``p``
    CPUs ("" where it may use enough, and on GPUs): ranks that take turns on a CPU do not
    run side by side, so the run is no pipeline of ``p`` devices (``scripts/measure.py -p 4``
    on 2 CPUs: every class 18-45% off 1F1B's costs; at ``p = 2`` the classes' median error
    0.6-2.7%)."""
    cpus = usable_cpus()
    if device != "cpu" or not cpus or p <= cpus:
        return ""
    return (f"p={p} ranks on {cpus} CPUs: they take turns, so the run is not a pipeline of "
            f"{p} devices and its times measure the sharing"
            + (f" (use p <= {cpus} here)" if cpus >= 2 else ""))


def usable_cpus(cgroup: str = "/sys/fs/cgroup", own: str = "/proc/self/cgroup") -> int | None:
    """The CPUs this process may run on at once: its affinity, lowered to a container's CPU
    quota (cgroup v2's ``cpu.max`` or v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``,
    of its own group, rounded down, at least 1). ``None`` where neither is known."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        groups = Path(own).read_text().splitlines()
    except OSError:  # (no cgroups: not Linux, or no /proc)
        return cpus
    for line in groups:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one hierarchy
            files = [Path(cgroup, path.lstrip("/"), "cpu.max")]
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's own mount
            files = [Path(cgroup, "cpu", path.lstrip("/"), name)
                     for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us")]
        else:
            continue
        try:
            words = " ".join(f.read_text() for f in files).split()
            quota, period = int(words[0]), int(words[1])
        except (OSError, ValueError, IndexError):  # "max", unreadable: no quota here
            continue
        if quota > 0 and period > 0:
            cpus = max(1, min(cpus or quota // period, quota // period))
    return cpus


def _named(run: MeasuredRun, schedule: Schedule) -> MeasuredRun:
    """``run``, read from a run of ``in_loss_order(schedule)``, under ``schedule``'s names:
    every op keeps its place on its device. Its schedule is a copy as wide as the run's
    arrays (a caller's may have spare slots past ``length``), named as a read run's is."""
    width = run.schedule.ops.shape[2]
    own = Schedule(schedule.ops[:, :, :width], schedule.length, schedule.stage_to_device,
                   n=schedule.n, m=schedule.m, name=run.schedule.name,
                   routes=np.stack([schedule.route_first, schedule.route_last], axis=1),
                   forward_only=schedule.forward_only)
    return MeasuredRun(own, run.start, run.end, run.release, run.wait, run.compute,
                       run.overhead, run.stall, run.durations, run.handed, run.latency,
                       run.offsets, run.offset_residual, run.files, run.hosts, run.operators,
                       run.weight_operators, run.probe, run.probe_fixed, run.injected)


def _delays(delay, V: int) -> tuple:
    """``delay`` checked: ``(stage, kind, seconds, probability)`` tuples."""
    if delay is None:
        return ()
    if not isinstance(delay, str | tuple | list):
        raise ScheduleTypeError(f"delay must be STAGE:KIND:SECONDS[:PROB], a (stage, kind, "
                                f"seconds[, probability]) tuple or a list of them (got "
                                f"{type(delay).__name__})")
    if isinstance(delay, str) or (isinstance(delay, tuple) and delay
                                  and not isinstance(delay[0], tuple | list | str)):
        delay = [delay]  # one delay, not a list of them
    out = []
    for item in delay:
        if isinstance(item, str):
            parts = item.split(":")
            if len(parts) not in (3, 4):
                raise ScheduleError(f"delay must be STAGE:KIND:SECONDS[:PROB] (got {item!r})")
            try:
                item = (int(parts[0]), parts[1], *(float(x) for x in parts[2:]))
            except ValueError:
                raise ScheduleError(f"delay must be STAGE:KIND:SECONDS[:PROB] with an integer "
                                    f"stage and numbers (got {item!r})") from None
        if not isinstance(item, tuple | list) or len(item) not in (3, 4):
            raise ScheduleError(f"delay must be (stage, kind, seconds[, probability]) (got "
                                f"{item!r})")
        stage, kind, seconds, prob = (*item, 1.0) if len(item) == 3 else item
        stage = int(index(stage, "delay stage", V))
        one_of(kind, "delay kind", ("F", "B"))
        seconds = number(seconds, "delay seconds")
        prob = number(prob, "delay probability")
        if prob > 1:
            raise ScheduleError(f"delay probability must be in [0, 1] (got {prob!r})")
        out.append((stage, kind, seconds, prob))
    return tuple(out)


def link_of(link_delay, p: int) -> tuple | None:
    """``link_delay`` checked: ``(seconds, r1, r2)`` or ``None``."""
    if link_delay is None:
        return None
    # (NumPy's scalars too, as everywhere else: np.float32(0.05) was refused)
    if isinstance(link_delay, int | float | np.integer | np.floating) and not isinstance(
            link_delay, bool):
        link_delay = (link_delay, p // 2 - 1, p // 2)
    if not isinstance(link_delay, tuple | list) or len(link_delay) != 3:
        raise ScheduleError(f"link_delay must be seconds or (seconds, r1, r2) (got "
                            f"{link_delay!r})")
    seconds = number(link_delay[0], "link_delay seconds")
    r1, r2 = (int(index(r, "link_delay rank", p)) for r in link_delay[1:])
    if r1 == r2:
        raise ScheduleError(f"link_delay must join two ranks (got {r1} and {r2})")
    return (seconds, r1, r2)


@known_keywords("measure_many")
def measure_many(schedules, p: int | None = None, n: int | None = None, *, layers: int = 16,
                 hidden: int = 256, microbatch: int = 256, out=OUT, device: str = "cpu",
                 warmup: int = 1, realtime: bool = False, timeout: float = 600.0,
                 delay=(), link_delay=None, steps: int = 1,
                 round_robin: bool = False, probe: int = PROBE) -> dict:
    """``measure`` several schedules in one set of processes (they start once).

    Parameters
    ----------
    schedules : dict
        Label -> what ``measure`` takes as ``schedule`` (each at its own default ``m``). The
        jobs run in the dict's order.
    p, n, layers, hidden, microbatch, device, warmup, realtime, timeout, steps, probe
        As for ``measure``, for every job.
    round_robin : bool
        Run the jobs' steps in turn: every job is built and warmed up first, then step 0 of
        each job in the dict's order, step 1 of each, and so on. The schedules then meet the
        same moments of the machine's drifting load, which a job's steps run back to back
        do not (one round of 5 steps took up to 0.95 of the variance of 1F1B's log step
        time in one session here). The ranks hold every job's stages at once.
    out : str or Path
        The traces of each job go to ``out/<label>`` (``out/<label>/step{k}`` with
        ``steps > 1``).
    delay, link_delay
        ``measure``'s, for every job, or a dict of them by label (the labels it leaves out
        run without).

    Returns
    -------
    dict
        Label -> its ``MeasuredRun``, or its ``MeasuredSteps`` (``steps > 1``).

    Raises
    ------
    ScheduleError
        As ``measure``; also if ``schedules`` is not a non-empty dict, or a per-label
        argument names a label that is not one of its keys.
    """
    if not isinstance(schedules, dict) or not schedules:
        raise ScheduleTypeError(f"schedules must be a non-empty dict of label -> schedule "
                                f"(got {type(schedules).__name__})")
    timeout = _timeout(timeout)
    steps = positive_int(steps, "steps")
    _folders(schedules)
    jobs, orders = [], []
    for label, schedule in schedules.items():  # every job checked before any folder is touched
        job, model, order = _job(schedule, p, n, None, layers, hidden, microbatch,
                                 Path(out) / str(label), device, warmup, realtime)
        jobs.append(_injected(job, _of_label(delay, label, schedules, "delay", ()),
                              _of_label(link_delay, label, schedules, "link_delay", None)))
        orders.append(order)
    model = dataclasses.replace(model, steps=steps, round_robin=flag(round_robin, "round_robin"),
                                probe=_probe(probe))
    return dict(zip(schedules, _run(jobs, orders, model, timeout), strict=True))


def _folders(schedules: dict) -> None:
    """Each label names its own folder under ``out``: a plain name (no separator, not ``.``
    or ``..``, which would write elsewhere), and no two labels one folder (``1`` and
    ``"1"``: the second job's schedule replaced the first's, and both read its traces)."""
    seen = {}
    for label in schedules:
        folder = str(label)
        if not folder or folder in (".", "..") or "/" in folder or os.sep in folder:
            raise ScheduleError(f"schedules' labels must be plain folder names, each run's "
                                f"folder under out (got {label!r})")
        if folder in seen:
            raise ScheduleError(f"schedules' labels must name different folders (got "
                                f"{seen[folder]!r} and {label!r}, both {folder!r})")
        seen[folder] = label


def _of_label(value, label, schedules: dict, name: str, none):
    """``value`` for ``label``: the dict's entry (``none`` if it has none), else ``value``."""
    if not isinstance(value, dict):
        return value
    unknown = [key for key in value if key not in schedules]
    if unknown:
        raise ScheduleError(f"{name} must be keyed by the labels of schedules "
                            f"{list(schedules)} (got {unknown[0]!r})")
    return value.get(label, none)


def _probe(probe) -> int:
    """``probe`` checked: an integer >= 0 (a NumPy one too)."""
    return nonnegative_int(probe, "probe")


def _timeout(timeout) -> float:
    """``timeout`` checked: a finite number of seconds above 0."""
    if isinstance(timeout, bool | np.bool_) or not isinstance(timeout, int | float | np.integer
                                                             | np.floating) \
            or not math.isfinite(timeout) or timeout <= 0:
        raise ScheduleError(f"timeout must be a finite number of seconds > 0 (got "
                            f"timeout={timeout!r})")
    return float(timeout)


def realtime_denied() -> str:
    """Why the ranks could not run under ``SCHED_FIFO`` here, or ``""`` if they can: tried on
    this thread and undone at once (root or ``CAP_SYS_NICE`` may, yet a container may still
    refuse; macOS has ``os.SCHED_FIFO`` but no ``os.sched_setscheduler``)."""
    if not hasattr(os, "sched_setscheduler"):
        return "this system has no SCHED_FIFO"
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(os.sched_get_priority_min(
            os.SCHED_FIFO)))
    except PermissionError:
        return "this process may not take SCHED_FIFO, which needs root or CAP_SYS_NICE"
    except OSError as err:
        return f"SCHED_FIFO fails here: {err.strerror or err}"
    os.sched_setscheduler(0, policy, param)
    return ""


def _job(schedule, p, n, m, layers, hidden, microbatch, out, device, warmup,
         realtime) -> tuple[Job, Model, Schedule | None]:
    """Validate ``measure``'s arguments into a ``Job``, a ``Model`` and the order to write as
    the job's CSV (``None`` for a PyTorch class); touches no file (``_prepare`` does)."""
    instance(schedule, str | Schedule, "schedule", "PyTorch class name, schedule name or "
             "fastpp.Schedule")
    given = {"p": p, "n": n, "m": m}  # (a message names these, not the schedule's filled in)
    if isinstance(schedule, Schedule):
        p = schedule.p if p is None else p
        n = schedule.n if n is None else n
    p = positive_int(2 if p is None else p, "p")
    n = positive_int(4 if n is None else n, "n")
    layers, hidden = positive_int(layers, "layers"), positive_int(hidden, "hidden")
    microbatch = positive_int(microbatch, "microbatch")
    warmup = nonnegative_int(warmup, "warmup")
    one_of(device, "device", DEVICES)
    if device == "cuda":  # (each rank would fail in torch with a traceback)
        count = _cuda_devices()
        if count < p:
            raise ScheduleError(f"device must be 'cpu' here: 'cuda' needs a GPU for each of "
                                f"the p={p} ranks (got device='cuda'; torch sees {count} CUDA "
                                f"devices)")
    if not isinstance(realtime, bool):
        raise ScheduleTypeError(f"realtime must be True or False (got {realtime!r})")
    denied = realtime and realtime_denied()
    if denied:  # (each rank would fail in os.sched_setscheduler with a traceback)
        raise ScheduleError(f"realtime must be False here: {denied} (got realtime=True)")
    if not 2 <= p <= MAX_RANKS:  # one process per rank
        raise ScheduleError(f"p must be in 2..{MAX_RANKS} for a real pipeline run, one process "
                            f"per rank (got p={p})")
    out = file_path(out, "out")
    if out.exists() and not out.is_dir():
        raise ScheduleError(f"out must be a folder for the traces (got {str(out)!r}, a file)")
    csv = ""
    if schedule == "Schedule1F1B":
        raise ScheduleError("schedule 'Schedule1F1B' labels none of its ops in the profiler; "
                            "measure '1f1b' instead, the same order through the CSV runtime")
    if isinstance(schedule, str) and schedule in TORCH_CLASSES:
        order = torch_order(schedule, p, n, m)
        runner = schedule
    else:
        if isinstance(schedule, str):
            if schedule not in SCHEDULES:
                raise ScheduleError(f"schedule must be a PyTorch class of "
                                    f"{sorted(TORCH_CLASSES)}, a fastpp schedule of "
                                    f"{sorted(SCHEDULES)} or a Schedule (got {schedule!r})")
            m = SCHEDULES[schedule].default_m if m is None else positive_int(m, "m")
            order = build_schedule(schedule, p, n, m)
        elif isinstance(schedule, Schedule):
            order = schedule
            if (order.p, order.n) != (p, n) or (m is not None and m != order.m):
                # (it had listed the schedule's own n as given: "got -n=8" after -p 3 alone)
                got = ", ".join(f"{k}={v}" for k, v in given.items() if v is not None)
                raise ScheduleError(f"p, n, m must be the schedule's own p={order.p}, "
                                    f"n={order.n}, m={order.m} (got {got})")
        else:
            raise ScheduleTypeError(f"schedule must be a str or a fastpp.Schedule (got "
                                    f"{type(schedule).__name__})")
        if order.stage_to_device.size != order.p * order.m or order.forward_only:
            raise ScheduleError(f"schedule must have one model copy and backwards to run in "
                                f"PyTorch (got {order.name!r})")
        csv = str(out / "schedule.csv")
        runner = "csv"
    V = order.p * order.m
    partial = np.flatnonzero((order.route_first != 0) | (order.route_last != V - 1))
    if partial.size:  # (each rank would fail in PyTorch's _validate_schedule)
        j = int(partial[0])
        raise ScheduleError(f"routes must take every microbatch through all {V} stages to run "
                            f"in PyTorch (got microbatch {j} on stages {order.route_first[j]}.."
                            f"{order.route_last[j]})")
    if layers % V:
        raise ScheduleError(f"layers must be a multiple of the {V} virtual stages of "
                            f"{order.name!r} (got layers={layers})")
    stages = tuple(tuple(int(s) for s in range(V) if order.stage_to_device[s] == r)
                   for r in range(p))
    return (Job(runner, csv, p, n, stages, str(out)),
            Model(layers, hidden, microbatch, device, warmup, realtime), order if csv else None)


def torch_order(schedule: str, p: int, n: int, m: int | None = None) -> Schedule:
    """The order PyTorch's class ``schedule`` (of ``TORCH_CLASSES``) runs, as fastpp builds it
    (``m``: the schedule's default). The class's constraints are the generator's; PyTorch's
    interleaved 1F1B runs rounds of ``n // max(1, n // p)`` microbatches, Megatron's groups
    of that ``G``."""
    name = TORCH_CLASSES[schedule]
    m = SCHEDULES[name].default_m if m is None else positive_int(m, "m")
    G = n // max(1, n // p) if schedule == "ScheduleInterleaved1F1B" else None
    return build_schedule(name, p, n, m, G=G)


def _prepare(job: Job, order: Schedule | None) -> None:
    """Make ``job.out`` hold this run only: created, its old traces gone, the CSV written."""
    out = make_folder(job.out, "out")
    steps = [d for d in out.glob("step*") if d.is_dir() and d.name[4:].isdigit()]
    for folder in (out, *steps):  # a folder holds one run only (the reader takes both kinds),
        traces = [*folder.glob("rank*_trace.json"), *folder.glob("rank*_trace.json.gz")]
        for old in traces:        # and an earlier run's step beyond this one's count would
            old.unlink()          # be read as its own
        if folder is not out and traces and not any(folder.iterdir()):
            folder.rmdir()
    if order is not None:
        write_torch_csv(order, job.csv)


def run_jobs(jobs: list[Job], model: Model, timeout: float) -> None:
    """Run ``jobs`` in order in one process per rank; raise ``ScheduleError`` if a rank fails
    or the whole takes longer than ``timeout`` seconds (then every rank is killed). What the
    ranks print on standard error reaches this process's after they finish."""
    p = jobs[0].p
    port = _free_port()
    # (each rank ends with this process: see rank.die_with_parent)
    env = dict(os.environ, FASTPP_RUNNER_PID=str(os.getpid()))
    with _terminate_as_exit(), tempfile.TemporaryDirectory(prefix="fastpp-ranks-") as folder:
        errs = [Path(folder) / f"rank{rank}.err" for rank in range(p)]
        procs = []
        try:
            for rank in range(p):
                spec = Path(folder) / f"rank{rank}.json"
                spec.write_text(json.dumps({
                    "rank": rank, "p": p, "port": port, "model": dataclasses.asdict(model),
                    "jobs": [dataclasses.asdict(job) for job in jobs]}))
                with open(errs[rank], "w") as err:
                    procs.append(subprocess.Popen(
                        [sys.executable, "-P", str(RANK_SCRIPT), str(spec)],
                        stdin=subprocess.DEVNULL, stderr=err, env=env))
            _wait(procs, errs, timeout)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            for err in errs:
                if err.exists():
                    sys.stderr.write(PROFILER_CHATTER.sub("", err.read_text(errors="replace")))


@contextlib.contextmanager
def _terminate_as_exit():
    """SIGTERM (a job scheduler's stop, ``kill``) raises ``SystemExit`` meanwhile, as Ctrl-C
    raises KeyboardInterrupt: the ranks are then killed and their folder removed, not left
    running on. The main thread only (the one Python signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _wait(procs: list, errs: list[Path], timeout: float) -> None:
    """Wait for every rank. A rank that fails raises, with the exit code and last lines of
    every rank failed by then (one cause, and its peers' lost connections: each says which);
    so does the timeout, with what the hung ranks printed."""
    deadline = time.monotonic() + timeout
    while True:
        codes = [proc.poll() for proc in procs]
        failed = [r for r, code in enumerate(codes) if code]
        if failed:  # the ranks left would wait for it forever
            raise ScheduleError("; ".join(
                f"rank {r} failed (exit code {codes[r]}): {_last_lines(errs[r])}"
                for r in failed))
        if all(code == 0 for code in codes):
            return
        if time.monotonic() >= deadline:
            hung = [r for r, code in enumerate(codes) if code is None]
            printed = "".join(f"\nrank {r} printed: {_last_lines(errs[r])}" for r in hung
                              if errs[r].stat().st_size)
            raise ScheduleError(f"timeout: ranks {hung} were still running after "
                                f"{timeout:g} s and were killed{printed}")
        time.sleep(0.05)


def _last_lines(path: Path) -> str:
    """The end of a rank's standard error: its traceback's last lines."""
    lines = path.read_text(errors="replace").strip().splitlines()
    return "\n".join(lines[-12:]) or "nothing printed (killed by a signal?)"


def _torch() -> None:
    """Raise the ``ScheduleError`` saying which extra to install if torch is missing (the
    ranks import it; this process need not)."""
    if importlib.util.find_spec("torch") is None:
        raise missing_extra("fastpp.measured.measure", "torch", "torch")


def _cuda_devices() -> int:
    """The CUDA devices torch sees, asked of a child process (this one imports no torch)."""
    _torch()
    try:
        probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda."
                                "device_count() if torch.cuda.is_available() else 0)"],
                               capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:  # (a torch that hangs on import sees no device)
        return 0
    return int(probe.stdout.strip() or 0) if probe.returncode == 0 else 0


def _free_port() -> int:
    """A port free now (bound to 0 first), so that parallel runs do not collide."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
