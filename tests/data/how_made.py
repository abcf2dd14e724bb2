"""How the traces beside this file were made (torch 2.13 CPU, gloo, 2 ranks as processes).

    python how_made.py <ScheduleClass> <m> <folder> [port]

An 8-layer MLP (Linear 256 + ReLU) split evenly over ``2 * m`` stages, 4 microbatches of 4
rows; one warm-up step, then one profiled step, each rank writing ``rank{r}_trace.json``.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.pipelining import PipelineStage, schedules
from torch.profiler import ProfilerActivity, profile

WIDTH, LAYERS, N = 256, 8, 4


def loss_fn(y, target):
    return ((y - target) ** 2).mean()


def worker(rank, world, name, m, out, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    layers = [torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)]
    V = world * m
    per = LAYERS // V
    if name in ("ScheduleZBVZeroBubble", "ScheduleDualPipeV"):
        stage_ids = [rank, 2 * world - 1 - rank]  # V placement
    else:
        stage_ids = [rank + world * k for k in range(m)]  # loop placement
    stages = []
    for s in stage_ids:
        body = [torch.nn.Sequential(layers[s * per + i], torch.nn.ReLU()) for i in range(per)]
        stages.append(PipelineStage(torch.nn.Sequential(*body), s, V, torch.device("cpu")))
    cls = getattr(schedules, name)
    single = m == 1 and name in ("ScheduleGPipe", "Schedule1F1B")
    sched = cls(stages[0] if single else stages, N, loss_fn=loss_fn)
    x, target = torch.randn(N * 4, WIDTH), torch.randn(N * 4, WIDTH)

    def step():
        args = (x,) if 0 in stage_ids else ()
        kwargs = {"target": target} if V - 1 in stage_ids else {}
        sched.step(*args, **kwargs)

    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    prof.export_chrome_trace(f"{out}/rank{rank}_trace.json")
    dist.destroy_process_group()


if __name__ == "__main__":
    name, m, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    port = int(sys.argv[4]) if len(sys.argv) > 4 else 29517
    os.makedirs(out, exist_ok=True)
    mp.spawn(worker, args=(2, name, m, out, port), nprocs=2)
