"""Robust objectives: sweeps, budgets and the optimizer under ``fastpp.Noise``."""

import math

import numpy as np
import pytest

import fastpp
from fastpp import Costs, Noise, ScheduleError, best_within_budget, build_schedule, simulate

# the counter-based hashes (Philox, SplitMix64) wrap around uint64 by design: Numba wraps
# silently, NumPy warns in the pure-Python run of tests/test_coverage.py (NUMBA_DISABLE_JIT)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

SLOW = Noise(0.05, link_delay={(3, 4): 4.0}, blocking=True)


def test_sweep_without_noise_is_unchanged():
    plain = fastpp.sweep(["1f1b", "zb-h1"], p=4, n=8, w=1.0, progress=False)
    assert "makespan_p95" not in plain
    assert plain["makespan"].tolist() == [33.0, 27.0]  # closed forms: (n+p-1)(f+b), ZB-H1


def test_sweep_rows_match_simulate():
    df = fastpp.sweep(["1f1b", "zb-h1", "interleaved-1f1b"], p=4, n=8, w=[0.5, 1.0],
                      progress=False, noise=Noise(0.1), samples=50, seed=3)
    assert len(df) == 6
    for row in df.itertuples():
        m = 2 if row.schedule == "interleaved-1f1b" else 1
        mc = simulate(build_schedule(row.schedule, 4, 8, m), Costs(f=1.0, b=2.0, w=row.w),
                      noise=Noise(0.1), samples=50, seed=3)
        assert row.makespan_mean == mc.mean and row.makespan_std == mc.std
        assert row.makespan_p95 == mc.quantile(0.95)
        assert row.makespan_p50 == mc.quantile(0.5)
        assert row.makespan_p95 >= row.makespan_p50


def test_sweep_costs_objects_under_noise():
    costs = [Costs(f=1.0, b=2.0), Costs(f=[1.0, 1.0, 1.0, 2.0], b=2.0)]
    df = fastpp.sweep("1f1b", p=4, n=8, costs=costs, progress=False, noise=Noise(0.05),
                      samples=20)
    slow = df[df["costs"] == 1]["makespan_mean"].iloc[0]
    assert slow > df[df["costs"] == 0]["makespan_mean"].iloc[0] * 1.2  # a 2x-slow stage


def test_budget_ranks_by_p95_under_a_slow_link():
    # zero-bubble is fastest without noise, 1F1B under a blocking slow link (docs/variability)
    df = fastpp.sweep(["1f1b", "zb-h2"], p=8, n=32, w=1.0, progress=False, noise=SLOW,
                      samples=40)
    assert best_within_budget(df, math.inf)["schedule"].item() == "zb-h2"
    for objective in ("p95", "mean", "mean+std"):
        best = best_within_budget(df, math.inf, objective=objective)
        assert best["schedule"].item() == "1f1b", objective
    for lam in (0.0, 1.0, 1e4):  # the row minimizing mean + lam * std, whatever lam
        score = df["makespan_mean"] + lam * df["makespan_std"]
        best = best_within_budget(df, math.inf, objective="mean+std", lam=lam)
        assert best["schedule"].item() == df["schedule"][score.idxmin()]


@pytest.mark.parametrize("kwargs, word", [
    ({"samples": 0}, "samples"), ({"seed": -1}, "seed"), ({"noise": 0.1}, "noise")])
def test_sweep_bad_noise_input(kwargs, word):
    kwargs = {"noise": Noise(0.1), **kwargs}
    with pytest.raises(ScheduleError, match=word):
        fastpp.sweep("1f1b", p=2, n=4, progress=False, **kwargs)


def test_budget_bad_objective():
    df = fastpp.sweep("1f1b", p=2, n=4, progress=False)
    with pytest.raises(ScheduleError, match="objective"):
        best_within_budget(df, objective="p99")
    with pytest.raises(ScheduleError, match="makespan_p95"):
        best_within_budget(df, objective="p95")  # no noisy columns
    with pytest.raises(ScheduleError, match="lam"):
        best_within_budget(df, objective="makespan", lam=-1.0)
    assert np.isfinite(best_within_budget(df)["makespan"]).all()


PLAN = dict(seq=2048, global_batch=64, schedules=["1f1b", "zb-h1", "interleaved-1f1b"], tp=2,
            pp=[4, 8])


def test_plan_noise_keeps_the_rows_and_rebuilds_each_pipeline():
    from fastpp.model import plan

    plain = plan("llama2-7b", 16, **PLAN)
    # no jitter: each row's Monte Carlo is its deterministic pipeline (its stage costs rebuilt)
    still = plan("llama2-7b", 16, **PLAN, noise=Noise(0.0), samples=2)
    assert still[list(plain.columns)].equals(plain)
    ran = still["makespan"].notna()
    assert ran.sum() > 10
    np.testing.assert_allclose(still["makespan_mean"][ran], still["makespan"][ran], rtol=1e-12)
    assert (still["makespan_std"][ran] == 0).all()


def test_plan_orders_by_p95_under_a_straggler():
    from fastpp.model import plan

    df = plan("llama2-7b", 16, **PLAN, noise=Noise(0.1, slow_devices={3: 1.3}), samples=16,
              objective="p95")
    fits = df[df["fits"]]
    assert fits["step_time_p95"].is_monotonic_increasing
    assert not df["fits"].iloc[: len(fits)].eq(False).any()  # fitting rows first
    outside = fits["step_time"] - fits["makespan"]
    np.testing.assert_allclose(fits["step_time_p95"] - fits["makespan_p95"], outside,
                               rtol=1e-9, atol=1e-12)
    assert (fits["makespan_p95"] > fits["makespan"]).all()  # a 30% straggler only slows
    mixed = plan("llama2-7b", 16, **PLAN, noise=Noise(0.1), samples=8, objective="mean+std",
                 lam=2.0)
    score = (mixed["step_time_mean"] + 2.0 * mixed["makespan_std"])[mixed["fits"]]
    assert score.is_monotonic_increasing


def test_plan_noise_of_a_device_some_pipelines_lack():
    """A straggler on device 5 over pp = [4, 8] raised mid-plan ("the schedule has devices
    0..3"), the whole plan lost: the pipelines of 4 keep their rows and step times, their
    Monte Carlo columns empty and the reason said; ranked by p95 they come last."""
    from fastpp.model import plan

    df = plan("llama2-7b", 16, **PLAN, noise=Noise(0.1, slow_devices={5: 1.3}), samples=8,
              objective="p95")
    short, long = df[df["p"] == 4], df[df["p"] == 8]
    assert len(short) and len(long) and short["step_time"].notna().any()
    ran = short["step_time"].notna()
    assert short["step_time_p95"].isna().all() and short["makespan_std"].isna().all()
    assert short["reason"][ran].str.endswith("noise does not fit it: slow_devices names "
                                             "device 5, but the schedule has devices 0..3").all()
    assert long["step_time_p95"][long["step_time"].notna()].notna().all()
    fits = df[df["fits"]]
    first = fits["step_time_p95"].notna().to_numpy()
    assert first[: first.sum()].all()  # every fitting row with a p95 before those without


def test_plan_bad_objective():
    from fastpp.model import plan

    with pytest.raises(ScheduleError, match="noise"):
        plan("llama2-7b", 16, **PLAN, objective="p95")
    with pytest.raises(ScheduleError, match="objective"):
        plan("llama2-7b", 16, **PLAN, noise=Noise(0.1), samples=2, objective="worst")
    with pytest.raises(ScheduleError, match="samples"):
        plan("llama2-7b", 16, **PLAN, noise=Noise(0.1), samples=0)


def _link(delay):
    return Noise(0.05, link_delay={(1, 2): delay}, blocking=True)


def test_optimize_p95_picks_the_least_p95_candidate():
    costs = Costs(f=1.0, b=2.0, w=1.0)
    plain = fastpp.optimize(4, 12, costs, method="heuristic", progress=False)
    calm = fastpp.optimize(4, 12, costs, method="heuristic", progress=False, objective="p95",
                           noise=_link(0.0), samples=32)
    slow = fastpp.optimize(4, 12, costs, method="heuristic", progress=False, objective="p95",
                           noise=_link(2.0), samples=32)
    # no delay: no change, up to a tie (another schedule whose critical paths run the same ops,
    # the same draws, in another order has the greedy's p95 to an ulp and may win by it)
    greedy_p95 = simulate(plain.schedule, costs, noise=_link(0.0), samples=32).quantile(0.95)
    assert calm.schedule.ops.tobytes() == plain.schedule.ops.tobytes() or \
        calm.value == pytest.approx(greedy_p95, rel=1e-14)
    assert slow.method != plain.method  # a slow link makes another schedule the most robust
    for result, delay in ((calm, 0.0), (slow, 2.0)):
        assert result.value == result.robust.quantile(0.95)
        assert math.isnan(result.lower_bound) and not result.optimal
        for name in ("1f1b", "zb-h1", "zb-h2"):  # registered candidates, same draws
            mc = simulate(build_schedule(name, 4, 12), costs, noise=_link(delay), samples=32)
            assert result.value <= mc.quantile(0.95)
        greedy = simulate(plain.schedule, costs, noise=_link(delay), samples=32)
        assert result.value <= greedy.quantile(0.95)
    mixed = fastpp.optimize(4, 12, costs, method="heuristic", progress=False,
                            objective="mean+std", noise=_link(2.0), samples=16, lam=3.0)
    assert mixed.value == pytest.approx(mixed.robust.mean + 3.0 * mixed.robust.std, rel=1e-12)
    # the median too, as best_within_budget and plan take it (optimize refused it)
    median = fastpp.optimize(4, 12, costs, method="heuristic", progress=False,
                             objective="p50", noise=_link(2.0), samples=32)
    assert median.value == median.robust.quantile(0.5)
    for name in ("1f1b", "zb-h1", "zb-h2"):
        mc = simulate(build_schedule(name, 4, 12), costs, noise=_link(2.0), samples=32)
        assert median.value <= mc.quantile(0.5)


@pytest.mark.parametrize("kwargs, word", [
    ({"objective": "p95"}, "noise"), ({"noise": Noise(0.1)}, "objective"),
    ({"objective": "p99", "noise": Noise(0.1)}, "objective"),
    ({"objective": "p95", "noise": Noise(0.1), "samples": 0}, "samples")])
def test_optimize_bad_noise_input(kwargs, word):
    with pytest.raises(ScheduleError, match=word):
        fastpp.optimize(2, 4, method="heuristic", progress=False, **kwargs)
