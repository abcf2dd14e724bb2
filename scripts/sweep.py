"""The main job: compare pipeline schedules (a fixed comparison until the sweep engine lands).

    python scripts/sweep.py [-p 8] [-n 32]
"""

from __future__ import annotations

import argparse

import fastpp


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", type=int, default=8, help="devices (default 8)")
    parser.add_argument("-n", type=int, default=32, help="microbatches (default 32)")
    args = parser.parse_args(argv)
    costs = fastpp.Costs(f=1.0, b=2.0, w=1.0, comm=0.05)
    print(f"p={args.p}, n={args.n}, f=1, b=2, comm=0.05")
    print(f"{'schedule':<18}{'m':>3}{'makespan':>10}{'bubble':>9}{'peak':>7}")
    for name, spec in fastpp.SCHEDULES.items():
        for m in (1, 2, 4):
            if spec.reasons(args.p, args.n, m, args.p)[0]:
                continue
            res = fastpp.simulate(fastpp.build_schedule(name, args.p, args.n, m), costs)
            print(f"{name:<18}{m:>3}{res.makespan:>10.2f}{res.bubble_ratio:>9.1%}"
                  f"{res.peak_activations.max():>7.2f}")


if __name__ == "__main__":
    main()
