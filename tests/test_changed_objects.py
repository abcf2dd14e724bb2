"""The error contract past the arguments of public functions (``test_fuzz_api`` covers those):
objects changed after they were built and checked, then used, and methods of returned objects
given bad arguments.

Each row of ``ROWS`` changes an object (or calls a method) and then uses it the way a user
would. It passes when the change is refused (a frozen object's ``FrozenInstanceError``, a
read-only array's ``ValueError``, a read-only mapping's ``TypeError``), does not reach the
object, or the use raises ``ScheduleError`` whose message holds the row's words. It fails on
any other error, a crash, a hang, or a result computed from the changed object (a silently
wrong number). Every row escaped before its fix: a segfault, a Numba ``TypingError``, NumPy's
``IndexError``, or negative or astronomical makespans.

The rows run in a fresh interpreter with a time limit (one of them used to segfault);
``python tests/test_changed_objects.py`` prints each row's outcome.
"""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import changed_run

import fastpp
from fastpp import Costs, Noise, ScheduleError, build_schedule, simulate

HERE = Path(__file__).resolve().parent
TRACE = HERE / "data" / "interleaved-1f1b"
S = None  # the rows' schedule, made in the child
KEPT = "the object kept what was checked"  # a row's result when a change did not reach it


def _noisy(noise):
    return simulate(S, Costs(1.0, 2.0), noise=noise, samples=4).makespan


def _run():
    return fastpp.read_torch_trace(TRACE)


def _job():
    """Two steps of the what-if trace ST (shared/data), written once to a temporary folder."""
    import tempfile

    from test_fuzz_api import _op_table

    return fastpp.read_op_table(_op_table(Path(tempfile.mkdtemp())))


def _set(obj, name, value):
    setattr(obj, name, value)
    return obj


def _write(arr, index, value):
    arr[index] = value


# label -> (the change and its use, words the ScheduleError must hold); None: only a refusal
ROWS = {
    # Noise: every field was writable, none checked again (TypingError, negative makespans)
    "Noise.cov replaced": (lambda: _noisy(_set(Noise(), "cov", -5.0)), None),
    "Noise.cov written": (lambda: _noisy(_write((n := Noise()).cov, 0, -5.0) or n), None),
    "Noise.spike replaced": (lambda: _noisy(_set(Noise(), "spike", (2.0, -1.0))), None),
    "Noise.dist replaced": (lambda: _noisy(_set(Noise(), "dist", "cauchy")), None),
    "Noise.step replaced": (lambda: _noisy(_set(Noise(), "step", -1.0)), None),
    "Noise.blocking replaced": (lambda: _noisy(_set(Noise(), "blocking", "yes")), None),
    "Noise.empirical replaced": (lambda: _noisy(_set(Noise(), "empirical", 3)), None),
    "Noise.slow_devices written": (
        lambda: _noisy(_write((n := Noise(slow_devices={0: 2.0})).slow_devices, 0, -3.0) or n),
        None),
    "Noise.slow_devices key added": (
        lambda: _noisy(_write((n := Noise()).slow_devices, -1, 2.0) or n), None),
    "Noise.link_delay written": (
        lambda: _noisy(_write((n := Noise(link_delay={(0, 1): 1.0})).link_delay, (0, 1),
                              float("nan")) or n), None),
    "Noise.with_link_delay stays frozen": (
        lambda: _noisy(_set(Noise().with_link_delay({(0, 1): 1.0}), "step", -1.0)), None),
    # a measured run: replaced arrays (IndexError), stale calibrations (silently wrong)
    "MeasuredRun.durations replaced": (lambda: _set(_run(), "durations", np.ones(3)).replay(),
                                       None),
    "MeasuredRun.durations written": (
        lambda: _write((r := _run()).durations, (0, 0), 1e3) or r.costs(), None),
    "MeasuredRun.schedule replaced": (lambda: _set(_run(), "schedule", S).costs(), None),
    "MeasuredRun.handed replaced": (
        lambda: _set(r := _run(), "handed", np.ones(2)).compare(r.replay()), None),
    "MeasuredRun negative durations, empirical noise": (
        lambda: simulate((r := _run()).schedule, Costs(1.0, 2.0), samples=4, noise=Noise(
            empirical=changed_run(r, durations=-r.durations))),
        "durations must be >= 0 at every op"),
    "MeasuredRun built with durations of another shape": (
        lambda: changed_run(r := _run(), durations=r.durations[:, :2]).costs(),
        "durations must have shape"),
    "MeasuredSteps of an int": (lambda: fastpp.MeasuredSteps(5), "runs must be"),
    "MeasuredSteps of None": (lambda: fastpp.MeasuredSteps(None), "runs must be"),
    # a measured job: a graph written into segfaulted the replay's kernel
    "MeasuredJob.graph written": (
        lambda: _write((j := _job()).graph.previous, 5, 10**6) or fastpp.whatif(j), None),
    "MeasuredJob.durations replaced": (lambda: fastpp.whatif(_set(_job(), "durations",
                                                                 np.ones(3))), None),
    "MeasuredJob.durations written": (
        lambda: _write((j := _job()).durations, (0, 0), np.nan) or fastpp.whatif(j), None),
    "MeasuredJob.ops replaced": (lambda: fastpp.whatif(_set(j := _job(), "ops", j.ops[:3])),
                                 None),
    "MeasuredJob.replay 1-D": (lambda: _job().replay(np.ones(3)), "durations must"),
    "MeasuredJob.replay a string": (lambda: _job().replay("x"), "durations must"),
    "MeasuredJob.replay wrong rows": (lambda: _job().replay(np.ones((3, 2))), "durations must"),
    "MeasuredJob.replay NaN": (lambda: (j := _job()).replay(np.full(j.durations.shape, np.nan)),
                               "durations must"),
    "MeasuredJob.replay negative": (lambda: (j := _job()).replay(-j.durations),
                                    "durations must"),
    # the chapter's Device: a time set later reached the schedule as costs.f, not fwd_time
    "Device.fwd_time replaced": (lambda: fastpp.gpipe_schedule(
        [_set(fastpp.Device("d0", ["l"]), "fwd_time", -1.0), fastpp.Device("d1", ["l"])], 4),
        "fwd_time"),
    # a grid of configurations kept the caller's arrays (a later write changed it)
    "RunGrid array written by its caller": (lambda: _grid_written(), None),
}


def _grid_written():
    from fastpp.model import RunGrid

    t = np.array([1, 2])
    grid = RunGrid(seq=512, microbatch=1, t=t, d=1, p=2, m=1, recompute=0)
    t[0] = -4
    return KEPT if grid.t.tolist() == [1, 2] else grid.t


def outcome(label: str) -> tuple[str, str]:
    """("ok" | an escape's kind, detail) of one row."""
    function, words = ROWS[label]
    try:
        value = function()
    except (dataclasses.FrozenInstanceError, ScheduleError) as err:
        if isinstance(err, ScheduleError) and words is not None and words not in str(err):
            return "unnamed", f"{type(err).__name__}: {err}"[:300]
        return "ok", ""
    except (ValueError, TypeError) as err:
        # a read-only array, a read-only mapping
        if "read-only" in str(err) or "does not support item assignment" in str(err):
            return "ok", ""
        return "escape", f"{type(err).__name__}: {err}"[:300]
    except BaseException as err:  # noqa: BLE001 - every other error is an escape
        if isinstance(err, KeyboardInterrupt):
            raise
        return "escape", f"{type(err).__name__}: {err}"[:300]
    if value is KEPT:
        return "ok", ""
    return "used", f"the changed object was used: {value!r}"[:300]


def test_changed_objects_are_refused_or_named(tmp_path):
    """The whole table in a fresh interpreter with a time limit (a crash fails the test instead
    of stopping the suite)."""
    env = dict(os.environ, PYTHONPATH=f"{HERE.parent}{os.pathsep}{HERE}")
    env.pop("NUMBA_DISABLE_JIT", None)
    run_ = subprocess.run([sys.executable, __file__, "--json"], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path, env=env)
    assert run_.returncode == 0, run_.stderr[-3000:]
    report = json.loads(run_.stdout.splitlines()[-1])
    assert len(report) == len(ROWS)
    escapes = [f"{label}: {kind}: {detail}" for label, (kind, detail) in report.items()
               if kind != "ok"]
    assert not escapes, "\n".join(escapes)


def main() -> None:
    global S
    S = build_schedule("1f1b", 4, 8)
    as_json = "--json" in sys.argv
    report = {}
    for label in [a for a in sys.argv[1:] if a != "--json"] or ROWS:  # rows named, or all
        print(label, file=sys.stderr, flush=True)  # a crash's last line names its row
        report[label] = outcome(label)
        if not as_json:
            print(f"{label:50s} {report[label][0]:8s} {report[label][1][:120]}", flush=True)
    if as_json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()


def test_a_measured_runs_costs_follow_its_schedule_written_into():
    """Its calibration was kept once made: a schedule written into since (a stage out of
    range) is checked when costs() is asked again, not answered from the old calibration."""
    run = fastpp.read_torch_trace(Path(__file__).parent / "data" / "gpipe")
    assert run.costs() is run.costs()
    run.schedule.stage[0, 0] = 99
    with pytest.raises(ScheduleError, match="stage must be in"):
        run.costs()
