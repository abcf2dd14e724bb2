"""Plan a training run: the fastest way to train a model on N GPUs that fits in memory.

    python scripts/plan.py                                  # LLaMA-3-70B on 64 H100-80GB
    python scripts/plan.py --model llama3-405b --gpus 512 --seq 8192 --global-batch 1024
    python scripts/plan.py --model llama2-70b --gpus 16 --tp 1 --recompute none   # PP only

Every factorization t x p x d = GPUs (tensor parallelism inside a node), every training
schedule and chunk count, microbatch sizes 1, 2, 4 and every recomputation, each an exact
pipeline timeline. Prints the fastest configurations that fit and the faster ones that do not
with their reasons; writes results/plan.parquet, results/plan.png (tokens/s against
memory per GPU) and the interactive report results/plan.html.
"""

from __future__ import annotations

import sys

from fastpp.__main__ import main

if __name__ == "__main__":
    sys.exit(main(["plan", *sys.argv[1:]]))
