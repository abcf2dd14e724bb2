"""Test helpers: the grid of valid points, random costs, random legal schedules, and the
error of a command or script run by a test (its one line, exit status 2)."""

import importlib
import inspect
import os
import sys
import time
from pathlib import Path

import numpy as np

import fastpp
from fastpp import Costs


def valid_points(max_p=8):
    """Every (name, p, n, m) with p 1..max_p, m 1..4 and n 1..4p (above p = 4, the n where a
    schedule's phases change shape: 1, 2, around p and 2p, 3p + 1 and 4p) that the registry
    accepts."""
    for name, spec in fastpp.SCHEDULES.items():
        for p in range(1, max_p + 1):
            every = range(1, 4 * p + 1)
            edges = sorted({1, 2, p - 1, p, p + 1, 2 * p - 1, 2 * p, 2 * p + 1, 3 * p + 1, 4 * p})
            for n in every if p <= 4 else edges:
                for m in range(1, 5):
                    if not spec.reasons(p, n, m, p)[0]:
                        yield name, p, n, m


def script(name: str):
    """A module of scripts/, imported as the scripts import each other."""
    folder = str(Path(__file__).resolve().parents[1] / "scripts")
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(folder)


# FASTPP_SMALL=1 (the coverage run, with Numba's JIT off) keeps the grid small
POINTS = list(valid_points(3 if os.environ.get("FASTPP_SMALL") else 8))


def random_costs(rng, schedule, split=False):
    """Uneven per-stage costs and latencies (or per-device ones, half of the time)."""
    size = schedule.V if rng.random() < 0.5 else schedule.p
    f = rng.uniform(0.5, 2.0, size)
    b = rng.uniform(0.5, 3.0, size)
    links = {}
    if rng.random() < 0.5:  # latency plus bytes over a bandwidth
        links = {"bandwidth": rng.uniform(1.0, 4.0, size), "message_bytes": rng.uniform(0, 2)}
    if split and rng.random() < 0.3:  # a split backward of its own time (PyTorch's costs more)
        links["i"] = b * rng.uniform(0.2, 1.5, size)
    return Costs(f=f, b=b, w=b * rng.uniform(0, 1, size) if split else 0.0,
                 comm=rng.uniform(0, 0.5, size), gamma=rng.uniform(0, 1),
                 act=rng.uniform(0.5, 2.0, size), **links)


def random_overhead(rng, schedule, kinds="FBIW"):
    """A random ``Costs.overhead`` (or ``send``, with ``kinds="FBI"``): one value, one per
    device or stage, or a mapping of some kinds (each a value or an array of one length)."""
    size = schedule.V if rng.random() < 0.5 else schedule.p
    pick = rng.integers(3)
    if pick == 0:
        return float(rng.uniform(0, 0.5))
    if pick == 1:
        return rng.uniform(0, 0.5, size)
    kinds = [k for k in kinds if rng.random() < 0.7]
    return {k: rng.uniform(0, 0.5, size) if rng.random() < 0.5 else float(rng.uniform(0, 0.5))
            for k in kinds}


def random_legal_rows(rng: np.random.Generator, p: int, n: int, m: int, *, vshape=False,
                      split=False, pairs=False):
    """Per-device token rows of a random schedule that cannot deadlock.

    Ops are picked one at a time, uniformly among those whose inputs are done (a random
    topological order of the whole dependency graph), and each device keeps the order in which
    its ops were picked. With ``pairs``, a device that has a ready F and a ready full B may run
    them as one overlapped pair.
    """
    V = p * m
    device = [(2 * p - 1 - s if vshape and s >= p else s % p) for s in range(V)]
    done = set()
    todo = {("F", s, j) for s in range(V) for j in range(n)}
    backward = ("I", "W") if split else ("B",)
    todo |= {(k, s, j) for s in range(V) for j in range(n) for k in backward}

    def ready(op):
        kind, s, j = op
        if kind == "F":
            return s == 0 or ("F", s - 1, j) in done
        if kind in ("B", "I"):
            up = ("B" if not split else "I", s + 1, j)
            return ("F", s, j) in done and (s == V - 1 or up in done)
        return ("I", s, j) in done

    rows = [[] for _ in range(p)]
    while todo:
        candidates = sorted(op for op in todo if ready(op))
        op = candidates[rng.integers(len(candidates))]
        kind, s, j = op
        r = device[s]
        want = {"F": "B", "B": "F"}.get(kind)
        mates = [c for c in candidates if c[0] == want and device[c[1]] == r] if pairs else []
        if mates and rng.random() < 0.5:
            other = mates[rng.integers(len(mates))]
            fwd, bwd = (op, other) if kind == "F" else (other, op)
            rows[r].append(f"({fwd[1]}F{fwd[2]};{bwd[1]}B{bwd[2]})OVERLAP_F_B")
            done |= {fwd, bwd}
            todo -= {fwd, bwd}
            continue
        rows[r].append(f"{s}{kind}{j}")
        done.add(op)
        todo.remove(op)
    return rows, device


def random_reorder(schedule, rng: np.random.Generator) -> list[list[str]]:
    """The same ops per device as ``schedule``, in a random order that cannot deadlock.

    Ops (an overlapped pair is one unit) are picked one at a time uniformly among those whose
    inputs are done, i.e. a random topological order of the whole dependency graph, and each
    device keeps the order in which its ops were picked.
    """
    F, B, I, W, FB = (int(op) for op in fastpp.Op)  # noqa: E741
    units = []  # (device, token, parts), a part being (kind, stage, mb)
    for r, row in enumerate(schedule.tokens()):
        for token in row:
            kind, s, j, s2, j2 = fastpp.ops.parse_op(token)
            units.append((r, token, [(F, s, j), (B, s2, j2)] if kind == FB else [(kind, s, j)]))
    first, last = schedule.route_first, schedule.route_last

    def needs(kind, s, j):
        if kind == F:
            return [("F", s - 1, j)] if s > first[j] else []
        if kind in (B, I):
            return [("G", s + 1, j)] if s < last[j] else [("F", s, j)]
        return [("G", s, j)]  # W after its own I

    done: set = set()
    rows = [[] for _ in range(schedule.p)]
    todo = list(range(len(units)))
    while todo:
        ready = [u for u in todo
                 if all(x in done for k, s, j in units[u][2] for x in needs(k, s, j))]
        pick = ready[rng.integers(len(ready))]
        r, token, parts = units[pick]
        rows[r].append(token)
        for k, s, j in parts:
            if k == F:
                done.add(("F", s, j))
            elif k in (B, I):
                done.add(("G", s, j))
        todo.remove(pick)
    return rows


def changed_run(run, **changes):
    """A measured run built again from ``run``'s fields with ``changes`` (a run is frozen)."""
    fields = inspect.signature(fastpp.MeasuredRun).parameters
    return fastpp.MeasuredRun(**{name: getattr(run, name) for name in fields} | changes)


def in_ci() -> bool:
    """Is this a CI run (``CI=true``, as .ci/run and every CI service set it)?"""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def needs_data(*names):
    """Skip a test whose published files (``shared/data`` beside the repository, or
    ``$FASTPP_DATA``) are missing, except in CI: there it runs, and fails on the missing file,
    so that the fidelity checks are never skipped silently where they must run."""
    import pytest

    from fastpp.model.validate import DATA

    missing = [name for name in names if not (DATA / name).exists()]
    return pytest.mark.skipif(bool(missing) and not in_ci(),
                              reason=f"{', '.join(missing)} not in {DATA} (shared/data beside "
                                     "the repository)")


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tree_status(root) -> set[str] | None:
    """``git status --porcelain`` of the checkout holding ``root`` (untracked files listed one
    by one; ignored ones left out), or ``None`` outside a git checkout."""
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                              "--untracked-files=all"], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError):  # no git here
        return None
    return set(out.stdout.splitlines()) if out.returncode == 0 else None


def recomputed_bytes(model, seq, microbatch, t, recompute, cp=1, sequence_parallel=True):
    """A dense layer's working set under ``recompute``, by the definition plan prices: its
    bytes without recomputation less those it keeps (``layer_costs`` on a rank's
    ``microbatch / cp`` sequences); plan adds it to every device holding a layer."""
    from fastpp.model import layer_costs
    from fastpp.model.transformer import RECOMPUTE

    none, kept = (float(layer_costs(model, seq, microbatch / cp, t, sequence_parallel,
                                    r)["activations"])
                  for r in (0, RECOMPUTE.index(recompute)))
    return none - kept


def held_bytes(costs, schedule, result):
    """Each device's activations at their peak as ``plan`` counts them: the engine's
    ``peak_activations`` and the largest ``working`` set (``ModelCosts.working``: a
    recomputed layer's with context parallelism's buffers, or on the loss's stage the loss's)
    of the stages it holds, at least what the training metrics hold (``ModelCosts.after``)."""
    from fastpp.model import device_held_bytes

    return device_held_bytes(result.peak_activations, costs.working, costs.after,
                             schedule.stage_to_device, schedule.p)


def cli_stderr(capsys) -> str:
    """What an in-process command wrote on stderr, less the line saying that kernels compile:
    on an empty kernel cache (CI's) a test's command may be its process's first to need one."""
    from fastpp._jit import COMPILING

    return capsys.readouterr().err.replace(COMPILING + "\n", "")


def cli_error(capsys, argv) -> str:
    """``main(argv)``'s message: exit status 2, no traceback."""
    from fastpp.__main__ import main

    assert main(argv) == 2
    err = cli_stderr(capsys)
    assert err.startswith("error: ") and "Traceback" not in err, err
    return err


def run_script(name, *argv, cwd):
    """``scripts/name argv``'s stderr: exit status 2, no traceback."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), MPLBACKEND="Agg")
    run = subprocess.run([sys.executable, str(root / "scripts" / name), *argv], cwd=cwd,
                         capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    return run.stderr


def env():
    """This process's environment, the checkout first on PYTHONPATH (for a child process)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT),
                                                          os.environ.get("PYTHONPATH", "")]))


def wait_for(path: Path, proc, seconds=180.0):
    """Wait until the child ``proc`` has written ``path`` (failing if it ends first). The
    bound only ends a child that hangs: a child compiling its kernels into an empty cache on
    a loaded machine took over 30 s to write its fourth part (the main job's Ctrl-C test)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, "the child ended before writing " + str(path)
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


# a torchtitan job of Llama 3 8B with hybrid sharding's two degrees to fill in
TITAN = """
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 2
seq_len = 4096
[parallelism]
data_parallel_replicate_degree = {replicate}
data_parallel_shard_degree = {shard}
"""
