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

torch is imported inside the functions here: ``fastpp.measured`` imports without it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..checks import (
    ScheduleError,
    ScheduleTypeError,
    file_path,
    index,
    instance,
    number,
    one_of,
    positive_int,
    require,
)
from ..generators.registry import SCHEDULES, build_schedule
from ..io import write_torch_csv
from ..schedule import Schedule
from .run import read_torch_trace
from .steps import MeasuredSteps

# PyTorch's schedule classes and the fastpp schedule whose order each one runs (the registry's
# torch_class).
TORCH_CLASSES = {spec.torch_class: name for name, spec in SCHEDULES.items() if spec.torch_class}
SINGLE_STAGE = ("ScheduleGPipe",)  # classes built on one stage object, not a list
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Job:
    """One schedule to run and profile (picklable: it goes to every rank's process).

    ``runner`` is a PyTorch class name, or ``"csv"`` to load ``csv`` into
    ``_PipelineScheduleRuntime``; ``stages[r]`` are the virtual stages rank ``r`` holds.
    """

    runner: str
    csv: str
    p: int
    n: int
    stages: tuple[tuple[int, ...], ...]
    out: str


MAX_RANKS = 1024


@dataclass(frozen=True)
class Model:
    """The MLP every schedule runs, and the run's settings."""

    layers: int
    hidden: int
    microbatch: int
    device: str
    warmup: int
    realtime: bool = False
    # injected variability: (stage, kind, seconds, probability) per delay; (seconds, r1, r2)
    delays: tuple = ()
    link: tuple | None = None
    steps: int = 1


def measure(schedule, p: int | None = None, n: int | None = None, m: int | None = None, *,
            layers: int = 16, hidden: int = 256, microbatch: int = 256, out="measured",
            device: str = "cpu", warmup: int = 1, realtime: bool = False,
            timeout: float = 300.0, delay=(), link_delay=None, steps: int = 1):
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
        rank (a machine with ``p`` GPUs).
    warmup : int
        Unprofiled steps before the profiled one.
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
        the sleep lies inside the op the profiler labels. Each rank draws from its own
        seeded generator: the same run twice delays the same ops.
    link_delay : float or (seconds, r1, r2), optional
        A slow link: the rank sending over the link between ranks ``r1`` and ``r2``
        (default the middle link, ``p//2 - 1`` and ``p//2``) sleeps ``seconds`` before each
        send over it, either direction, as PipeMorph injects it (``fastpp.Noise(link_delay=
        {(r1, r2): seconds}, blocking=True)`` models it). The sleep falls between the ops.
    steps : int
        Profiled steps: 1 writes the traces to ``out``; more write step ``k``'s to
        ``out/step{k}`` and return one ``MeasuredRun`` per step.

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
    V = sum(len(x) for x in job.stages)
    model = dataclasses.replace(model, delays=_delays(delay, V),
                                link=_link(link_delay, job.p),
                                steps=positive_int(steps, "steps"))
    _torch()  # before out is touched: a run without torch must not delete the old traces
    _prepare(job, order)
    for k in range(model.steps if model.steps > 1 else 0):
        _prepare(dataclasses.replace(job, out=str(Path(job.out) / f"step{k}")), None)
    run_jobs([job], model, timeout)
    if model.steps == 1:
        return read_torch_trace(job.out)
    return MeasuredSteps(read_torch_trace(Path(job.out) / f"step{k}")
                         for k in range(model.steps))


def _delays(delay, V: int) -> tuple:
    """``delay`` checked: ``(stage, kind, seconds, probability)`` tuples."""
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


def _link(link_delay, p: int) -> tuple | None:
    """``link_delay`` checked: ``(seconds, r1, r2)`` or ``None``."""
    if link_delay is None:
        return None
    if isinstance(link_delay, int | float) and not isinstance(link_delay, bool):
        link_delay = (link_delay, p // 2 - 1, p // 2)
    if not isinstance(link_delay, tuple | list) or len(link_delay) != 3:
        raise ScheduleError(f"link_delay must be seconds or (seconds, r1, r2) (got "
                            f"{link_delay!r})")
    seconds = number(link_delay[0], "link_delay seconds")
    r1, r2 = (int(index(r, "link_delay rank", p)) for r in link_delay[1:])
    if r1 == r2:
        raise ScheduleError(f"link_delay must join two ranks (got {r1} and {r2})")
    return (seconds, r1, r2)


def measure_many(schedules, p: int | None = None, n: int | None = None, *, layers: int = 16,
                 hidden: int = 256, microbatch: int = 256, out="measured", device: str = "cpu",
                 warmup: int = 1, realtime: bool = False, timeout: float = 600.0,
                 steps: int = 1) -> dict:
    """``measure`` several schedules in one set of processes (they start once).

    ``schedules`` maps a label to what ``measure`` takes as ``schedule`` (each at its own
    default ``m``); the traces of each go to ``out/<label>`` (``out/<label>/step{k}`` with
    ``steps > 1``). Returns the ``MeasuredRun`` of each label, or its ``MeasuredSteps``
    (``steps > 1``). The jobs run in the dict's order: repeating labels in rounds (``"a@0", "b@0",
    "a@1", ...``) spreads the machine's drifting load over the schedules alike.
    """
    if not isinstance(schedules, dict) or not schedules:
        raise ScheduleTypeError(f"schedules must be a non-empty dict of label -> schedule "
                                f"(got {type(schedules).__name__})")
    timeout = _timeout(timeout)
    steps = positive_int(steps, "steps")
    jobs, orders = [], []
    for label, schedule in schedules.items():  # every job checked before any folder is touched
        job, model, order = _job(schedule, p, n, None, layers, hidden, microbatch,
                                 Path(out) / str(label), device, warmup, realtime)
        jobs.append(job)
        orders.append(order)
    model = dataclasses.replace(model, steps=steps)
    _torch()
    for job, order in zip(jobs, orders, strict=True):
        _prepare(job, order)
        for k in range(steps if steps > 1 else 0):
            _prepare(dataclasses.replace(job, out=str(Path(job.out) / f"step{k}")), None)
    run_jobs(jobs, model, timeout)
    if steps == 1:
        return {label: read_torch_trace(job.out)
                for label, job in zip(schedules, jobs, strict=True)}
    return {label: MeasuredSteps(read_torch_trace(Path(job.out) / f"step{k}")
                                 for k in range(steps))
            for label, job in zip(schedules, jobs, strict=True)}


def _timeout(timeout) -> float:
    """``timeout`` checked: a finite number of seconds above 0."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
            or not math.isfinite(timeout) or timeout <= 0:
        raise ScheduleError(f"timeout must be a finite number of seconds > 0 (got "
                            f"timeout={timeout!r})")
    return float(timeout)


def _job(schedule, p, n, m, layers, hidden, microbatch, out, device, warmup,
         realtime) -> tuple[Job, Model, Schedule | None]:
    """Validate ``measure``'s arguments into a ``Job``, a ``Model`` and the order to write as
    the job's CSV (``None`` for a PyTorch class); touches no file (``_prepare`` does)."""
    instance(schedule, str | Schedule, "schedule", "PyTorch class name, schedule name or "
             "fastpp.Schedule")
    if isinstance(schedule, Schedule):
        p = schedule.p if p is None else p
        n = schedule.n if n is None else n
    p = positive_int(2 if p is None else p, "p")
    n = positive_int(4 if n is None else n, "n")
    layers, hidden = positive_int(layers, "layers"), positive_int(hidden, "hidden")
    microbatch = positive_int(microbatch, "microbatch")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ScheduleError(f"warmup must be a non-negative integer (got warmup={warmup!r})")
    one_of(device, "device", DEVICES)
    if not isinstance(realtime, bool):
        raise ScheduleTypeError(f"realtime must be True or False (got {realtime!r})")
    if realtime and not hasattr(os, "SCHED_FIFO"):
        raise ScheduleError("realtime must be False here: this system has no SCHED_FIFO")
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
        name = TORCH_CLASSES[schedule]
        m = SCHEDULES[name].default_m if m is None else positive_int(m, "m")
        order = build_schedule(name, p, n, m)  # the class's constraints are the generator's
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
                raise ScheduleError(f"p, n, m must be the schedule's own p={order.p}, "
                                    f"n={order.n}, m={order.m} (got p={p}, n={n}, m={m})")
        else:
            raise ScheduleTypeError(f"schedule must be a str or a fastpp.Schedule (got "
                                    f"{type(schedule).__name__})")
        if order.stage_to_device.size != order.p * order.m or order.forward_only:
            raise ScheduleError(f"schedule must have one model copy and backwards to run in "
                                f"PyTorch (got {order.name!r})")
        csv = str(out / "schedule.csv")
        runner = "csv"
    V = order.p * order.m
    if layers % V:
        raise ScheduleError(f"layers must be a multiple of the {V} virtual stages of "
                            f"{order.name!r} (got layers={layers})")
    stages = tuple(tuple(int(s) for s in range(V) if order.stage_to_device[s] == r)
                   for r in range(p))
    return (Job(runner, csv, p, n, stages, str(out)),
            Model(layers, hidden, microbatch, device, warmup, realtime), order if csv else None)


def _prepare(job: Job, order: Schedule | None) -> None:
    """Make ``job.out`` hold this run only: created, its old traces gone, the CSV written."""
    out = Path(job.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # a file in the way, no permission
        raise ScheduleError(f"out must be a folder that can be made (got {str(out)!r}: "
                            f"{err.strerror})") from None
    for old in [*out.glob("rank*_trace.json"), *out.glob("rank*_trace.json.gz")]:
        old.unlink()  # a folder must hold one run only (the reader takes both)
    if order is not None:
        write_torch_csv(order, job.csv)


def run_jobs(jobs: list[Job], model: Model, timeout: float) -> None:
    """Run ``jobs`` in order in one process per rank; raise ``ScheduleError`` if a rank fails
    or the whole takes longer than ``timeout`` seconds (then every rank is killed)."""
    mp = _torch()
    p = jobs[0].p
    port = _free_port()
    ctx = mp.start_processes(_rank_main, args=(p, port, jobs, model), nprocs=p, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + timeout
    try:
        while not ctx.join(timeout=max(0.0, min(1.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                hung = [r for r, proc in enumerate(ctx.processes) if proc.is_alive()]
                raise ScheduleError(f"timeout: ranks {hung} were still running after "
                                    f"{timeout:g} s and were killed")
    except mp.ProcessRaisedException as err:
        raise ScheduleError(f"rank {err.error_index} failed: {err.msg.strip()}") from None
    except mp.ProcessExitedException as err:
        raise ScheduleError(f"rank {err.error_index} exited with code {err.exit_code}") \
            from None
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()
                proc.join()


def _torch():
    """``torch.multiprocessing``, or the ``ScheduleError`` saying which extra to install."""
    return require("torch.multiprocessing", "torch", "fastpp.measured.measure", "torch")


def _free_port() -> int:
    """A port free now (bound to 0 first), so that parallel runs do not collide."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rank_main(rank: int, p: int, port: int, jobs: list[Job], model: Model) -> None:
    """One rank's process: join the group, then run and profile each job."""
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    if model.realtime:  # threads started from here on (gloo's, the profiler's) inherit it
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(os.sched_get_priority_min(
            os.SCHED_FIFO)))
    if model.device == "cuda":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        dist.init_process_group("nccl", rank=rank, world_size=p, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", rank=rank, world_size=p)
    try:
        for job in jobs:
            _run_job(rank, job, model, device)
            dist.barrier()
    finally:
        dist.destroy_process_group()


def _run_job(rank: int, job: Job, model: Model, device) -> None:
    """Build this rank's stages and the schedule, warm up, profile one step, write the trace."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as torch_schedules
    from torch.profiler import ProfilerActivity, profile

    V = sum(len(s) for s in job.stages)
    per = model.layers // V
    torch.manual_seed(0)  # the same weights on every rank, for every schedule
    blocks = [torch.nn.Sequential(torch.nn.Linear(model.hidden, model.hidden), torch.nn.ReLU())
              for _ in range(model.layers)]
    mine = job.stages[rank]
    stages = [PipelineStage(_delayed(torch.nn.Sequential(*blocks[s * per:(s + 1) * per]),
                                     s, model.delays).to(device), s, V, device)
              for s in mine]
    if model.link is not None:
        _slow_link(stages, job.stages, rank, model.link)

    def loss_fn(y, target):
        return ((y - target) ** 2).mean()

    if job.runner == "csv":
        sched = torch_schedules._PipelineScheduleRuntime(stages, job.n, loss_fn=loss_fn)
        sched._load_csv(job.csv, format="compute_only")
    elif job.runner in SINGLE_STAGE:
        sched = getattr(torch_schedules, job.runner)(stages[0], job.n, loss_fn=loss_fn)
    else:
        sched = getattr(torch_schedules, job.runner)(stages, job.n, loss_fn=loss_fn)
    data = torch.Generator().manual_seed(1)
    x = torch.randn(job.n * model.microbatch, model.hidden, generator=data).to(device)
    target = torch.randn(job.n * model.microbatch, model.hidden, generator=data).to(device)
    args = (x,) if 0 in mine else ()
    kwargs = {"target": target} if V - 1 in mine else {}

    for _ in range(model.warmup):
        sched.step(*args, **kwargs)
    activities = [ProfilerActivity.CPU]
    if model.device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    for k in range(model.steps):
        with profile(activities=activities) as prof:
            # the ranks start the step together: a rank that came late would show as a wait
            dist.barrier()
            sched.step(*args, **kwargs)
            if model.device == "cuda":
                torch.cuda.synchronize(device)
        folder = Path(job.out) / (f"step{k}" if model.steps > 1 else "")
        # write to a temporary name first: a reader never sees half a trace
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp", delete=False) as tmp:
            pass
        prof.export_chrome_trace(tmp.name)
        os.replace(tmp.name, folder / f"rank{rank}_trace.json")


def _delayed(module, stage: int, delays: tuple):
    """``module`` with the injected delays of ``stage``: a forward sleep before it runs, a
    backward one in an identity on its output (the first node its backward reaches)."""
    import torch

    mine = [(kind, seconds, prob) for s, kind, seconds, prob in delays if s == stage]
    if not mine:
        return module
    draw = random.Random(stage)  # seeded: the same run delays the same ops

    def sleep(kind):
        for k, seconds, prob in mine:
            if k == kind and draw.random() < prob:
                time.sleep(seconds)

    class SleepInBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y):
            return y.view_as(y)

        @staticmethod
        def backward(ctx, grad):
            sleep("B")
            return grad

    class Delayed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = module

        def forward(self, x):
            sleep("F")
            return SleepInBackward.apply(self.inner(x))

    return Delayed()


def _slow_link(stages, held, rank: int, link: tuple) -> None:
    """Make each of ``stages`` sleep before preparing a send to a stage on the other end of
    the slow link (forward sends to the next stage, backward ones to the previous)."""
    seconds, r1, r2 = link
    if rank not in (r1, r2):
        return
    other = set(held[r2 if rank == r1 else r1])
    for stage in stages:
        for method, peer in (("get_fwd_send_ops", stage.stage_index + 1),
                             ("get_bwd_send_ops", stage.stage_index - 1)):
            if peer in other:
                plain = getattr(stage, method)

                def sending(*args, plain=plain, **kwargs):
                    time.sleep(seconds)
                    return plain(*args, **kwargs)

                setattr(stage, method, sending)
