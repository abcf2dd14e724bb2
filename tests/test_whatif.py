"""The what-if analysis of a real job (Lin et al., OSDI'25) against its authors' own results.

Trace ST of the artifact (ByteDance-Seed/StragglerAnalysis; /work/shared/data/whatif_st, a
Megatron job with DP2 PP4 and a long last stage) and the results its authors published with
it: the step times replayed and ideal, the slowdown S, its decompositions by DP rank, stage and
op type (overall and per step), M_S and M_W. Nothing is calibrated: the replay takes the
trace's times and the paper's dependency model. The issue's bound is 1%; fastpp agrees to
float32 rounding (the table's times are float32), so the tests hold it to 1e-5.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import needs_data

import fastpp
from fastpp import ScheduleError
from fastpp.model.validate import DATA as SHARED

pd = pytest.importorskip("pandas")
pytest.importorskip("yaml")
DATA = SHARED / "whatif_st"  # $FASTPP_DATA or shared/data beside the repository
TRACE, META = DATA / "trace-ST.parquet", DATA / "meta-ST.yaml"
TOL = 1e-5  # relative; the issue asks for 1%

pytestmark = needs_data(*(f"whatif_st/{name}" for name in (
    "trace-ST.parquet", "meta-ST.yaml", "result-ST.json", "ms-ST.json", "mw-ST.json")))


@pytest.fixture(scope="module")
def expected():
    return {name: json.loads((DATA / f"{name}-ST.json").read_text())
            for name in ("result", "ms", "mw")}


@pytest.fixture(scope="module")
def job():
    return fastpp.read_op_table(TRACE)


@pytest.fixture(scope="module")
def result(job):
    return fastpp.whatif(job)


def close(got, want, tol=TOL):
    assert got == pytest.approx(want, rel=tol), (got, want)


def test_reads_the_job(job):
    assert (job.dp, job.pp, job.tp, job.vpp) == (2, 4, 1, 1)
    assert len(job.steps) == 32
    assert job.durations.shape == (len(job.ops), 32)
    # every step runs the same 212 ops (2 replicas x 4 stages)
    assert len(job.ops) == len(job.table) // 32


def test_step_times_match_the_artifact(result, expected):
    want = expected["result"]
    steps = result.steps.set_index("step")
    for column, key in (("measured", "step_t_base"), ("replayed", "step_t_nodelay"),
                        ("ideal", "step_t_noblk")):
        got = steps[column].to_numpy()
        ref = np.array([want[key][str(s)] for s in steps.index])
        np.testing.assert_allclose(got, ref, rtol=TOL, err_msg=column)


def test_slowdown_and_its_decompositions(result, expected):
    want = expected["result"]
    close(result.slowdown, want["blocking_slowdown"])
    for name, key in (("by_dp_rank", "dp_rank"), ("by_stage", "stage"), ("by_op", "optype")):
        ref = want[f"blocking_decompose_by_{key}"]
        got = getattr(result, name)
        assert sorted(map(str, got)) == sorted(ref), name
        for label, value in got.items():
            close(value, ref[str(label)])
    # the long last stage is the straggler: it alone makes most of S
    assert max(result.by_stage, key=result.by_stage.get) == 3


def test_per_step_figures(result, expected):
    want = expected["result"]
    for step, value in want["blocking_step_slowdown"].items():
        close(result.steps.set_index("step").slowdown[int(step)], value)
    for name, key in (("by_dp_rank_per_step", "dp_rank"), ("by_stage_per_step", "stage"),
                      ("by_op_per_step", "optype")):
        table = getattr(result, name)
        for step, row in want[f"blocking_decompose_by_{key}_per_step"].items():
            for label, value in row.items():
                column = int(label) if key != "optype" else label
                close(table.loc[int(step), column], value)


def test_ms_and_mw(result, expected):
    close(result.ms, expected["ms"]["Ms"])
    assert result.ms > 1  # the artifact's readme: "M_S should be large (~120%)" for ST
    # M_W is a small difference of step times (3% of S - 1): float32 rounding weighs more
    close(result.mw, expected["mw"]["Mw"], 1e-4)
    assert result.worst_ranks == [7]  # DP rank 1's last stage


# -- bad input -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def table():
    return pd.read_parquet(TRACE)


def write(tmp_path, table, meta=None):
    path = tmp_path / "trace-X.parquet"
    table.to_parquet(path)
    (tmp_path / "meta-X.yaml").write_text(
        META.read_text() if meta is None else meta)
    return path


def test_missing_column(tmp_path, table):
    with pytest.raises(ScheduleError, match=r"missing \['mb_id'\]"):
        fastpp.read_op_table(write(tmp_path, table.drop(columns="mb_id")))


def test_duplicate_op(tmp_path, table):
    with pytest.raises(ScheduleError, match="duplicate op: dp_rank=0, stage=0, step=23"):
        fastpp.read_op_table(write(tmp_path, pd.concat([table, table.iloc[:1]])))


def test_steps_with_different_op_counts(tmp_path, table):
    odd = table.drop(index=table[(table.step == 25) & (table.optype == "gc")].index[:1])
    with pytest.raises(ScheduleError, match="every step must have the same ops: step 25"):
        fastpp.read_op_table(write(tmp_path, odd))


def test_steps_with_different_ops(tmp_path, table):
    odd = table.copy()
    row = odd[(odd.step == 25) & (odd.optype == "gc")].index[0]
    odd.loc[row, "seq_id"] = 7
    with pytest.raises(ScheduleError, match="step 25 and step 23 differ"):
        fastpp.read_op_table(write(tmp_path, odd))


@pytest.mark.parametrize("change, match", [
    (("dp_size: 2", "dp_size: 4"), "meta world_size must be"),
    (("pp_size: 4", "pp_size: 2"), "meta world_size must be"),
    (("vpp_size: 1", "vpp_size: 2"), "vpp_size must be 1"),
])
def test_meta_disagreeing_with_the_table(tmp_path, table, change, match):
    meta = META.read_text().replace(*change)
    with pytest.raises(ScheduleError, match=match):
        fastpp.read_op_table(write(tmp_path, table, meta))


def test_meta_sizes_disagreeing_with_the_table(tmp_path, table):
    meta = META.read_text().replace("dp_size: 2", "dp_size: 4").replace("world_size: 8",
                                                                       "world_size: 16")
    with pytest.raises(ScheduleError, match=r"meta dp_size=4 disagrees with the table"):
        fastpp.read_op_table(write(tmp_path, table, meta))
    with pytest.raises(ScheduleError, match=r"meta pp_size=3 disagrees"):
        fastpp.read_op_table(TRACE, {"dp_size": 2, "pp_size": 3})
    with pytest.raises(ScheduleError, match=r"meta dp_size=10+ disagrees"):  # no OverflowError
        fastpp.read_op_table(TRACE, {"dp_size": 10**30, "pp_size": 4})


@pytest.mark.parametrize("stage, kind, peer", [(1, "forward-send", 2), (3, "backward-send", 2)])
def test_receive_without_its_send(tmp_path, table, stage, kind, peer):
    """A receive whose send is missing would drop its stage's wait for the peer: the step's
    slowdown came out 1.29 where the trace gives 1.18."""
    odd = table[~((table.optype == kind) & (table.stage == stage))]
    direction = kind.split("-")[0]
    with pytest.raises(ScheduleError, match=rf"stage {peer}'s {direction}-recv op \d+ must have "
                                            rf"its {direction}-send op \d+ on stage {stage}"):
        fastpp.read_op_table(write(tmp_path, odd))


def test_not_a_job():
    with pytest.raises(fastpp.ScheduleTypeError, match="job must be a fastpp.MeasuredJob"):
        fastpp.whatif("trace-ST.parquet")


EQUAL = Path(__file__).parent / "data" / "whatif" / "trace-equal.parquet"


def test_a_job_without_stragglers_has_nothing_to_explain():
    """Every op of a type alike in every rank and step: S is 1 but for the replay's rounding,
    and M_S, M_W are 0, every rank tying (the lowest first). The rounding (1e-15) had been
    taken for a slowdown: M_S 0.29, M_W -0.5, worst rank 2."""
    result = fastpp.whatif(fastpp.read_op_table(EQUAL))
    assert result.slowdown == pytest.approx(1.0, abs=1e-12)
    assert (result.ms, result.mw, result.worst_ranks) == (0.0, 0.0, [0])


def test_ops_out_of_microbatch_order(tmp_path, table):
    """A rank's forwards out of seq_id order would pair computes with other microbatches'
    sends (the slowdown moved with the step that held them); refused, named."""
    odd = table.copy()
    first = odd[(odd.step == 23) & (odd.dp_rank == 0) & (odd.stage == 0)
                & (odd.optype == "forward-compute")].sort_values("seq_id").index[:2]
    odd.loc[first, "start_ts"] = odd.loc[first[::-1], "start_ts"].to_numpy()
    with pytest.raises(ScheduleError, match=r"a rank's forward-compute ops must start in "
                                            r"seq_id order \(step 23, dp_rank 0, stage 0: "
                                            r"seq_id \d+ starts after seq_id \d+\)"):
        fastpp.read_op_table(write(tmp_path, odd))


def test_ops_that_take_no_time(tmp_path, table):
    """Their start times give no order: the graph came out as a cycle."""
    with pytest.raises(ScheduleError, match="job must have ops that take time: every op's "
                                            "duration is 0"):
        fastpp.read_op_table(write(tmp_path, table.assign(duration=0.0)))


def test_empirical_job_noise_draws_each_op_from_its_model_block(job):
    """A two-direction schedule's device holds two model blocks (Chimera's device 0 runs
    block 0 of one pipeline and block p - 1 of the other): drawn by device, trace ST's
    second pipeline took the first's times, the long last stage's times on the short first
    block (a what-if reviewer's finding). Each forward now draws from its block's stage."""
    pools = job.op_times_by_kind()
    s = fastpp.build_schedule("chimera", job.pp, 8)
    mc = fastpp.simulate(s, fastpp.Costs(1, 2), noise=fastpp.Noise(empirical=job), samples=50)
    times = mc.op_times()
    routes = {(int(a), int(b)) for a, b in zip(s.route_first, s.route_last, strict=True)}
    block = {st: st - a for a, b in routes for st in range(a, b + 1)}
    checked = 0
    for r in range(s.p):
        for k in range(s.length[r]):
            if s.kind[r, k] == fastpp.Op.F:
                pool = set(pools[block[int(s.stage[r, k])]][0].tolist())
                assert set(times[r, k].tolist()) <= pool, (r, k)
                checked += 1
    assert checked == s.p * 8 and block[2 * job.pp - 1] == job.pp - 1


def test_the_first_forward_waits_for_every_all_gather(tmp_path, table, job):
    """A stage with two parameter all-gathers: its first forward had waited for the first
    alone (the artifact's ``setup_params_ag_deps`` waits for the last), so a slow second
    gather vanished from the replay and from the slowdown (a what-if reviewer's finding).
    Trace ST with a second gather on every rank, from the first's end to the first
    forward's start: each replayed step grows by at least the shortest such gap (16 ms)."""
    key = ["step", "dp_rank", "stage"]
    first = table[table.optype == "params-all-gather"].set_index(key)
    forward = table[(table.optype == "forward-compute") & (table.seq_id == 0)].set_index(key)
    second = first.assign(seq_id=1, start_ts=first.start_ts + first.duration)
    second["duration"] = forward.start_ts - second.start_ts
    assert second.duration.min() > 0.016
    both = write(tmp_path, pd.concat([table, second.reset_index()[table.columns]],
                                     ignore_index=True))
    grown = fastpp.whatif(fastpp.read_op_table(both)).steps.replayed.to_numpy()
    before = fastpp.whatif(job).steps.replayed.to_numpy()
    assert (grown - before > 0.016).all()


def test_model_chunks_the_meta_denies(tmp_path, table):
    """``mc`` 1 on some computes beside ``vpp_size: 1``: read as a plain pipeline without a
    word (the artifact infers vpp = max(mc) + 1)."""
    chunked = table.copy()
    chunked.loc[chunked.optype == "forward-compute", "mc"] = 1
    with pytest.raises(ScheduleError, match=r"mc must be 0 \(or -1 off the computes\) with "
                                            r"meta vpp_size 1: .* \(got mc up to 1\)"):
        fastpp.read_op_table(write(tmp_path, chunked))
