"""Which pipeline schedule for LLaMA-2-70B on 8 or 16 GPUs of 80 GB?

    python scripts/llama70b.py [--hardware H100-80GB] [--link IB-400G] [--seq 4096]

A research script as users write them: LLaMA-2-70B's shapes (80 layers, hidden 8192, 64 heads,
vocabulary 32000, sequence 4096, one sequence per microbatch, FlashAttention), pure pipeline
parallelism over 8 or 16 GPUs, 8 data-parallel replicas sharing the optimizer states (ZeRO-1),
every training schedule with n in {1, 2, 4, 8} x p and m in {1, 2, 4}. Prints the
configurations that fit in the GPUs' memory, fastest first, and for each p the closest miss.
The layers are modelled as in fastpp.model (a GPT-style 4h MLP: an approximation of
LLaMA's SwiGLU and grouped-query attention).
"""

from __future__ import annotations

import argparse
import time

from fastpp.model import HARDWARE, LINKS, Transformer, model_sweep


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", choices=sorted(HARDWARE), default="H100-80GB")
    ap.add_argument("--link", choices=sorted(LINKS), default="IB-400G")
    ap.add_argument("--seq", type=int, default=4096, help="sequence length (4096)")
    ap.add_argument("--efficiency", type=float, default=0.5,
                    help="fraction of the peak FLOP/s reached (0.5)")
    ap.add_argument("--dp", type=int, default=8, help="data-parallel replicas for ZeRO-1 (8)")
    args = ap.parse_args(argv)
    hardware = HARDWARE[args.hardware]
    hardware = type(hardware)(hardware.name, hardware.peak_flops, hardware.memory_bytes,
                              args.efficiency)
    model = Transformer(layers=80, hidden=8192, heads=64, seq=args.seq, microbatch=1,
                        vocab=32000, flash_attention=True)
    start = time.perf_counter()
    df = model_sweep(model, hardware, LINKS[args.link], p=[8, 16],
                     n=sorted({k * p for p in (8, 16) for k in (1, 2, 4, 8)}), m=[1, 2, 4],
                     zero_shards=args.dp)
    df = df[df["n"] % df["p"] == 0]  # n in {1, 2, 4, 8} x p
    seconds = time.perf_counter() - start
    print(f"LLaMA-2-70B, seq {args.seq}, on {args.hardware} over {args.link}, "
          f"{args.efficiency:.0%} of peak, ZeRO-1 over {args.dp} replicas: {len(df)} "
          f"configurations simulated in {seconds:.2f} s\n")
    header = (f"{'schedule':<18}{'p':>3}{'n':>5}{'m':>3}{'tokens/s':>11}{'step s':>8}"
              f"{'bubble':>8}{'act GB':>8}{'total GB':>10}")
    fits = df[df["fits"]]
    print(f"{len(fits)} fit in {hardware.memory_bytes / 1e9:.0f} GB, fastest first:")
    print(header)
    for r in fits.head(15).itertuples():
        print(f"{r.schedule:<18}{r.p:>3}{r.n:>5}{r.m:>3}{r.tokens_per_s:>11,.0f}"
              f"{r.makespan:>8.2f}{r.bubble_ratio:>8.1%}{r.activation_gb:>8.1f}"
              f"{r.total_gb:>10.1f}")
    for p in (8, 16):
        miss = df[(df["p"] == p) & ~df["fits"]].sort_values("total_gb").head(1)
        for r in miss.itertuples():
            print(f"\np={p}: closest miss {r.schedule} n={r.n} m={r.m}: {r.reason}")


if __name__ == "__main__":
    main()
