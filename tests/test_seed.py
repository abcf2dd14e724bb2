"""The teaching chapter's API and demo, running on the engine."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from fastpp import (
    Device,
    ScheduleError,
    build_schedule,
    compute_theoretical_peak,
    gpipe_schedule,
    onef_oneb_schedule,
    simulate,
)
from fastpp.seed import run

ROOT = Path(__file__).resolve().parents[1]


def devices(p, **kw):
    return [Device(f"GPU{r}", layers=[r], **kw) for r in range(p)]


def test_device_defaults_match_the_chapter():
    d = Device("GPU0", layers=range(8))
    assert (d.comm_latency, d.fwd_time, d.bwd_time) == (0.01, 0.02, 0.04)
    assert d.layers == list(range(8))


@pytest.mark.parametrize("func", [gpipe_schedule, onef_oneb_schedule])
@pytest.mark.parametrize("p, n", [(1, 1), (4, 4), (3, 7)])
def test_serial_total_and_events(func, p, n):
    total, events = func(devices(p), n)
    f, b, c = 0.02, 0.04, 0.01
    assert total == pytest.approx(n * p * (f + b) + 2 * n * (p - 1) * c)
    assert len(events) == 2 * n * p
    assert [e.start for e in events] == sorted(e.start for e in events)
    assert events[-1].serial_time == pytest.approx(total)
    assert {e.op for e in events} == {"F", "B"}
    assert all(e.end - e.start == pytest.approx(f if e.op == "F" else b) for e in events)


def test_events_carry_the_engine_times():
    total, events, result = run("1f1b", devices(4), 8)
    assert max(e.end for e in events) == result.makespan
    direct = simulate(build_schedule("1f1b", 4, 8), result.costs)
    assert direct.makespan == result.makespan


def test_uneven_devices():
    devs = [Device("a", [0], fwd_time=0.01, bwd_time=0.02, comm_latency=0.0),
            Device("b", [1], fwd_time=0.03, bwd_time=0.06, comm_latency=0.0)]
    _, events = gpipe_schedule(devs, 2)
    # the slow second device sets the pace: F0 F1 end at 0.01, 0.02 on a; b runs 0.01..0.07
    b_fwd = [e for e in events if e.device == "b" and e.op == "F"]
    assert [round(e.end, 9) for e in b_fwd] == [0.04, 0.07]


def test_compute_theoretical_peak_is_corrected():
    assert compute_theoretical_peak("gpipe", 8, 4) == 8
    assert compute_theoretical_peak("1f1b", 8, 4) == 4  # the chapter said p-1 = 3
    assert compute_theoretical_peak("1F1B", 2, 4) == 2
    with pytest.raises(ScheduleError,
                       match=r"schedule_type must be 'gpipe' or '1f1b' \(got 'zb'\)"):
        compute_theoretical_peak("zb", 8, 4)
    with pytest.raises(ScheduleError, match="devices must be a non-empty list of Device"):
        gpipe_schedule([], 4)


def test_demo_passes():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "seed_demo.py")],
                         capture_output=True, text=True, check=True).stdout
    assert "stages=4, microbatches=4" in out
    assert "true peak is min(n, p) = 4" in out
    assert out.strip().endswith("adv06_pipeline_parallel passed")


def test_demo_withholds_its_pass_line_when_a_check_fails(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("seed_demo", ROOT / "scripts" / "seed_demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    # the chapter's wrong claim: 1F1B peak p-1
    monkeypatch.setattr(demo, "compute_theoretical_peak",
                        lambda kind, n, p: n if kind == "gpipe" else p - 1)
    assert demo.main(["--stages", "4", "--microbatches", "8"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "passed" not in out
