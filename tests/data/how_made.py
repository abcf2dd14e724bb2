import os, sys, json, time
import torch, torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S

def worker(rank, world, clsname, m, out):
    os.environ["MASTER_ADDR"]="127.0.0.1"; os.environ["MASTER_PORT"]="29517"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    d=256; L=8
    layers=[torch.nn.Linear(d,d) for _ in range(L)]
    V=world*m
    per=L//V
    cls=getattr(S,clsname)
    if clsname in ("ScheduleZBVZeroBubble","ScheduleDualPipeV"):
        stage_ids=[rank, 2*world-1-rank]
    else:
        stage_ids=[rank+world*k for k in range(m)]
    stages=[]
    for s in stage_ids:
        mod=torch.nn.Sequential(*[torch.nn.Sequential(layers[s*per+i], torch.nn.ReLU()) for i in range(per)])
        stages.append(PipelineStage(mod, s, V, torch.device("cpu")))
    n=4
    loss=lambda y,t: ((y-t)**2).mean()
    if m==1 and clsname in ("ScheduleGPipe","Schedule1F1B"):
        sched=cls(stages[0], n, loss_fn=loss)
    else:
        sched=cls(stages, n, loss_fn=loss)
    x=torch.randn(n*4,d); tgt=torch.randn(n*4,d)
    def step():
        if rank==0: sched.step(x, target=tgt if V==1 or (stage_ids[-1]==V-1) else None) if False else None
        kw={}
        args=()
        if 0 in stage_ids: args=(x,)
        if V-1 in stage_ids: kw["target"]=tgt
        sched.step(*args, **kw)
    step()
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    prof.export_chrome_trace(f"{out}/rank{rank}_trace.json")
    dist.destroy_process_group()

if __name__=="__main__":
    clsname=sys.argv[1]; m=int(sys.argv[2]); out=sys.argv[3]
    os.makedirs(out, exist_ok=True)
    mp.spawn(worker, args=(2, clsname, m, out), nprocs=2)
