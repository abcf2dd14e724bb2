"""One rank's process of ``fastpp.measured.measure``, run as a script:
``python -P rank.py SPEC.json``.

As a script it imports torch and the standard library only: importing fastpp (NumPy, Numba,
pandas, the generators' compiled code) would cost every rank about 3.7 s of CPU before its
first op. ``-P`` keeps this folder, whose modules are fastpp's, off ``sys.path``. The spec is
written by ``runner.run_jobs``: this rank, ``p``, the port, the ``Model`` and the ``Job``s, as
JSON.
"""

import ctypes
import gc
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace


def die_with_parent() -> None:
    """Linux: have this rank sent SIGTERM when the runner that started it ends, however it
    ends (SIGKILL included), instead of running on re-parented, writing into its folder and
    holding the port; exit now if it has ended already. Elsewhere nothing."""
    parent = os.environ.get("FASTPP_RUNNER_PID")
    if not sys.platform.startswith("linux") or parent is None:
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # (it ended before the line above)
        sys.exit(1)


if __name__ == "__main__":  # before torch's import: seconds in which the runner may end
    die_with_parent()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.pipelining import PipelineStage  # noqa: E402
from torch.distributed.pipelining import schedules as torch_schedules  # noqa: E402
from torch.distributed.pipelining._backward import (  # noqa: E402
    stage_backward,
    stage_backward_input,
    stage_backward_weight,
)
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

SINGLE_STAGE = ("ScheduleGPipe",)  # classes built on one stage object, not a list
# glibc's mallopt parameters, and the largest mmap threshold it takes (HEAP_MAX_SIZE / 2)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_MOST = 32 << 20


def main(path: str) -> None:
    """One rank's process: join the group, then run and profile each job of the spec.

    Parameters
    ----------
    path : str
        The spec ``runner.run_jobs`` wrote: ``rank``, ``p``, ``port``, ``model`` (the
        ``Model``'s fields) and ``jobs`` (each ``Job``'s), as JSON.
    """
    with open(path) as f:
        spec = json.load(f)
    rank, p, model = spec["rank"], spec["p"], SimpleNamespace(**spec["model"])
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(spec["port"])
    torch.set_num_threads(1)
    _keep_freed_memory()
    # the imports' objects out of the collector's sight: each collection below then takes
    # well under a ms, not the 170 ms of a full one over torch's modules
    gc.freeze()
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
    jobs = [SimpleNamespace(**job) for job in spec["jobs"]]
    # in turn, every job is built and warmed up first and step k of each runs before step
    # k + 1 of any: the schedules meet the same moments of the machine's drifting load
    groups = [jobs] if model.round_robin else [[job] for job in jobs]
    try:
        for group in groups:
            built = [_build(rank, job, model, device) for job in group]
            for step, probe in built:
                _warm_up(step, probe, model)
            for k in range(model.steps):
                for job, (step, probe) in zip(group, built, strict=True):
                    _profile(rank, job, step, probe, model, device, k)
            del built, step, probe
            gc.collect()  # the jobs' cycles (stages, schedules, graphs) go before the next
            dist.barrier()
    finally:
        dist.destroy_process_group()


def _build(rank: int, job, model, device):
    """This rank's stages and schedule of ``job`` (``job``, ``model``: the spec's ``Job`` and
    ``Model`` as namespaces): a function that runs one step, and one that runs the probe
    (``_probe``) on this rank's stages."""
    V = sum(len(s) for s in job.stages)
    per = model.layers // V
    torch.manual_seed(0)  # the same weights on every rank, for every schedule
    blocks = [torch.nn.Sequential(torch.nn.Linear(model.hidden, model.hidden), torch.nn.ReLU())
              for _ in range(model.layers)]
    mine = job.stages[rank]
    plain = {s: torch.nn.Sequential(*blocks[s * per:(s + 1) * per]).to(device) for s in mine}
    stages = [PipelineStage(_delayed(plain[s], s, job.delays), s, V, device) for s in mine]
    if job.link is not None:
        _slow_link(stages, job.stages, rank, job.link)

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
    return (lambda: sched.step(*args, **kwargs)), (lambda: _probe(plain, model, device))


def _probe(plain: dict, model, device) -> None:
    """Each of this rank's stages (``plain``: stage -> its layers, without injected delays,
    whose draws the steps own), ``model.probe`` times on a fresh microbatch-shaped input and
    output gradient: a forward and a full backward (``PROBE:<stage>B``), and a forward and
    the split backward as PyTorch's zero-bubble schedules run it, ``stage_backward_input``
    (``PROBE:<stage>I``) then ``stage_backward_weight`` (``PROBE:<stage>W``). The two
    alternate which goes first, so that neither always meets a cache the other warmed. As
    in the run, stage 0's input takes no gradient, and its split runs nothing in ``I`` and
    a full backward in ``W`` (``PipelineStage.backward_weight_one_chunk``). No
    communication."""
    data = torch.Generator().manual_seed(2)
    x = torch.randn(model.microbatch, model.hidden, generator=data).to(device)
    grad = torch.randn(model.microbatch, model.hidden, generator=data).to(device)
    for k in range(model.probe):
        for s, module in plain.items():
            for split in ((False, True) if k % 2 == 0 else (True, False)):
                inputs = x.detach().requires_grad_(s > 0)
                y = module(inputs)
                if not split:
                    with record_function(f"PROBE:{s}B"):
                        stage_backward((y,), (grad,), (inputs,))
                elif s == 0:
                    with record_function(f"PROBE:{s}I"):
                        pass
                    with record_function(f"PROBE:{s}W"):
                        stage_backward((y,), (grad,), (inputs,))
                else:
                    with record_function(f"PROBE:{s}I"):
                        _, groups = stage_backward_input((y,), (grad,), (inputs,),
                                                         module.parameters())
                    with record_function(f"PROBE:{s}W"):
                        stage_backward_weight(module.parameters(), groups)


def _activities(model) -> list:
    """What the profiler records: the CPU, and the GPU on ``cuda``."""
    if model.device == "cuda":
        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    return [ProfilerActivity.CPU]


def _warm_up(step, probe, model) -> None:
    """``model.warmup`` steps and their probes, profiled too, nothing kept: the profiler's own
    memory is then in place before the steps it records (a session's first profiled steps
    faulted 3,800-7,400 fresh pages a rank without it, 600-2,400 with it)."""
    for _ in range(model.warmup):
        with profile(activities=_activities(model)):
            step()
            probe()


def _profile(rank: int, job, step, probe, model, device, k: int) -> None:
    """Profile step ``k`` of ``job`` and then its probe, and write this rank's trace of
    both."""
    gc.collect()  # not inside the profiled step
    with profile(activities=_activities(model)) as prof:
        # the ranks start the step together: a rank that came late would show as a wait
        dist.barrier()
        step()
        if model.probe:
            # every rank done with the step first: a probe would take a core from a rank
            # still in it
            dist.barrier()
            probe()
        if model.device == "cuda":
            torch.cuda.synchronize(device)
    folder = Path(job.out) / (f"step{k}" if model.steps > 1 else "")
    # write to a temporary name first: a reader never sees half a trace
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp", delete=False) as tmp:
        pass
    prof.export_chrome_trace(tmp.name)
    os.replace(tmp.name, folder / f"rank{rank}_trace.json")


def _keep_freed_memory() -> None:
    """Keep freed heap memory in the process (glibc: no trimming, tensors from the heap, not
    their own mappings), so that a step reuses pages a step before it touched. By default
    glibc returns freed memory to the system and a later step faults fresh pages back in:
    measured, 2,100-3,300 page faults (8-13 MB) in the profiled step of 1F1B after
    DualPipeV's in every repeat, and none with this; elsewhere (no glibc) nothing changes."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, TypeError):
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_MOST)
    mallopt(M_TRIM_THRESHOLD, 1 << 30)


def _hold(seconds: float) -> None:
    """An injected delay: a sleep in a ``DELAY`` range, so that the trace holds how long it
    took (``MeasuredRun.injected``). The sleep wakes late, a 3 ms one by 0.04-0.2 ms (95% of
    them) here, 3.06-3.12 ms on average, which the delay asked for does not say."""
    with record_function("DELAY"):
        time.sleep(seconds)


def _delayed(module, stage: int, delays: list):
    """``module`` with the injected delays of ``stage``: a forward sleep before it runs, a
    backward one in an identity on its output (the first node its backward reaches)."""
    mine = [(kind, seconds, prob) for s, kind, seconds, prob in delays if s == stage]
    if not mine:
        return module
    calls = {"F": 0, "B": 0}  # a stage runs its forwards, and its backwards, in microbatch order

    def sleep(kind):
        # each draw keyed by the op (stage, kind, its index over the run's steps) and the
        # delay: every schedule, and the same run twice, delays the same microbatches (common
        # random numbers, as fastpp.Noise draws them); one generator in call order had
        # delayed other microbatches under another order of forwards and backwards
        index, calls[kind] = calls[kind], calls[kind] + 1
        for j, (k, seconds, prob) in enumerate(mine):
            if k == kind and random.Random(f"{stage}:{kind}:{index}:{j}").random() < prob:
                _hold(seconds)

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


def _slow_link(stages, held, rank: int, link: list) -> None:
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
                    _hold(seconds)
                    return plain(*args, **kwargs)

                setattr(stage, method, sending)


if __name__ == "__main__":
    main(sys.argv[1])
