"""The examples of docs/plan.md's "Layers per stage" (under "Plan a training run"), with
their output.

    python scripts/layout_demo.py

Layout parsing and splits do not depend on the cost model; the times and bytes do, so this
reprints them whenever the model changes.
"""

import argparse

import fastpp
from fastpp.model import (
    Transformer,
    megatron_layers,
    parse_layout,
    plan,
    torchtitan_layers,
    transformer_costs,
)

argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()  # (--help: no run)
layout = parse_layout("Et*3|(tt|)*29,m|L")          # Megatron's DeepSeek-V3 example
print(layout.stages, sum(layout.layers), layout.layers[:4], layout.embedding[0], layout.loss[-1])
print(megatron_layers(80, p=4, m=2, first=14))       # --decoder-first-pipeline-num-layers 14
print(torchtitan_layers(80, 8))                      # first/last_stage_less_layers = 1
print(parse_layout("Et*1,2|L"), parse_layout("E|(|)*3|L"))

sched = fastpp.build_schedule("1f1b", p=8, n=64)
for lay in (None, "Et*9|(t*10|)*6,t*11L", "Et*11|(t*10|)*6,t*9L"):
    res = fastpp.simulate(sched, transformer_costs("llama3-70b", sched, seq=8192, tp=8, layout=lay))
    print(lay, f"{res.makespan:.2f} s", f"{res.bubble_ratio:.1%}")

# Korthikanti et al.'s 175B: t=8, p=8 on 64 GPUs, three virtual stages per device
gpt175 = Transformer(layers=96, hidden=12288, heads=96, vocab=51200, name="gpt-175b")
df = plan(gpt175, 64, "A100-80GB", seq=2048, global_batch=64, tp=8, pp=8, microbatch=1,
          recompute="selective", schedules=["1f1b", "interleaved-1f1b"], m=[1, 2, 3, 4])
print(df[df.step_time.notna()][["schedule", "m", "layout", "step_time", "bubble_ratio",
                                "peak_memory"]].to_string(index=False))

df = plan("llama3-70b", 64, seq=8192, global_batch=512, tp=8, pp=8, microbatch=1,
          recompute="none", schedules=["1f1b"], first_layers=[8, 9, 10], last_layers=[8, 9, 10])
print(df[["layout", "step_time", "peak_memory", "fits"]].head(4).to_string(index=False))

# without a pipeline each schedule keeps its own memory
df = plan("llama3-70b", 64, seq=8192, global_batch=512, schedules=["gpipe", "zb-h1"], tp=8,
          pp=1, microbatch=1, recompute=["none", "full"])
print(df[["schedule", "recompute", "peak_memory", "fits", "reason"]].to_string(index=False))
