"""Where Numba's compile time goes: each jitted function's compile time (CPU, without its
callees'), how many times it compiled and with which argument types.

    FASTPP_CACHE_DIR=/tmp/cold python scripts/compile_profile.py job        # the main job
    FASTPP_CACHE_DIR=/tmp/cold python scripts/compile_profile.py simulate   # one simulate
    FASTPP_CACHE_DIR=/tmp/cold python scripts/compile_profile.py build zbv chimera

Point ``FASTPP_CACHE_DIR`` at an empty folder: a kernel loaded from the cache does not
compile. ``job`` runs ``scripts/sweep.py`` (without pictures) in this one process, so the
table holds what its two warm-up processes compile between them. Numba's compile events
(``numba.core.event``) nest, a caller's around its callees'; each row is the caller's own share.
The time in LLVM (optimization passes and machine code) is the part of it ``NUMBA_OPT`` acts
on; the rest is Numba's typing and lowering.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from numba.core import event

ROOT = Path(__file__).resolve().parents[1]


class Recorder(event.Listener):
    """Per function: compiles, own CPU seconds, seconds with callees, argument types."""

    def __init__(self):
        self.open = []  # [start, callees' seconds] per compile under way
        self.rows = defaultdict(lambda: {"count": 0, "own": 0.0, "total": 0.0, "types": set()})

    def on_start(self, ev):
        self.open.append([time.thread_time(), 0.0])

    def on_end(self, ev):
        start, inner = self.open.pop()
        seconds = time.thread_time() - start
        if self.open:
            self.open[-1][1] += seconds
        func = ev.data["dispatcher"].py_func
        name = f"{func.__module__}.{func.__qualname__}"
        if not func.__module__.startswith("fastpp"):  # NumPy's functions, by source line
            name += f":{func.__code__.co_firstlineno}"
        row = self.rows[name]
        row["count"] += 1
        row["own"] += seconds - inner
        row["total"] += seconds
        row["types"].add(", ".join(str(t) for t in ev.data["args"]))


class LLVMTime(event.Listener):
    """CPU seconds spent in LLVM: Numba holds its lock around every call into it (passes,
    machine code, the JIT's linking)."""

    def __init__(self):
        self.depth, self.seconds = 0, 0.0

    def on_start(self, ev):
        if self.depth == 0:
            self.start = time.thread_time()
        self.depth += 1

    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            self.seconds += time.thread_time() - self.start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("job", "simulate", "build"))
    ap.add_argument("names", nargs="*", help="schedules to build (with 'build')")
    ap.add_argument("--top", type=int, default=25, help="rows to print (default 25)")
    ap.add_argument("--types", action="store_true", help="print each row's argument types")
    args = ap.parse_args(argv)
    recorder = Recorder()
    event.register("numba:compile", recorder)
    llvm = LLVMTime()
    event.register("numba:llvm_lock", llvm)
    cpu = time.process_time()
    import fastpp

    if args.what == "job":
        sys.path.insert(0, str(ROOT / "scripts"))
        import sweep

        sys.executable = ""  # no second warm-up process: every compile lands in this one
        with tempfile.TemporaryDirectory() as out:
            sweep.main(["--out", out, "--no-progress", "--no-plots"])
    elif args.what == "simulate":
        fastpp.simulate(fastpp.build_schedule("1f1b", 4, 8), fastpp.Costs(1.0, 2.0, w=1.0))
    else:
        unknown = [name for name in args.names if name not in fastpp.SCHEDULES]
        if unknown:
            ap.error(f"names must be registered schedules {sorted(fastpp.SCHEDULES)} (got "
                     f"{unknown[0]!r})")
        for name in args.names or list(fastpp.SCHEDULES):
            fastpp.build_schedule(name, 4, 8, fastpp.SCHEDULES[name].default_m)
    rows = sorted(recorder.rows.items(), key=lambda kv: -kv[1]["own"])
    own = sum(row["own"] for _, row in rows)
    print(f"{time.process_time() - cpu:.1f} s CPU in all, {own:.1f} s compiling, "
          f"{sum(row['count'] for _, row in rows)} compiles of {len(rows)} functions; "
          f"{llvm.seconds:.1f} s in LLVM")
    print(f"{'own s':>6} {'total s':>7} {'count':>5}  function")
    for name, row in rows[:args.top]:
        print(f"{row['own']:6.2f} {row['total']:7.2f} {row['count']:5d}  {name}")
        if args.types:
            for types in sorted(row["types"]):
                print(f"{'':22}({types})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
