"""Bad input to the readers, the hardware, the planner and sweeps (the tenth wave, a fuzz of 5
December 2026) ends in a ``ScheduleError`` naming what is wrong: never another library's
error, nor a number priced as given that no run has.

One test per defect; each input escaped or was priced before its fix (the docstring says how).
A measured run's own times are beside its tests (test_measured.py).
"""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import changed_run, needs_data

import fastpp
from fastpp import ScheduleError, batch
from fastpp.__main__ import main as cli
from fastpp.model import (
    HARDWARE,
    MODELS,
    RunConfig,
    device_bytes,
    from_hf,
    from_megatron,
    from_torchtitan,
)
from fastpp.model import plan as plan_configurations
from fastpp.model.explain import explain
from fastpp.model.published import DATA

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
QWEN_MOE = {"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
            "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632,
            "moe_intermediate_size": 1408, "num_experts": 60, "num_experts_per_tok": 4,
            "vocab_size": 151936}
MOE_SCRIPT = ("--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 "
              "--vocab-size 1000 --bf16 --num-experts 8 --moe-ffn-hidden-size 1024 ")


def test_torchtitan_hybrid_sharding_is_priced_not_as_full_sharding():
    """Replicate 8 x shard 8 on 64 GPUs was priced as ZeRO-3 over all 64 (1.1 GB of weights a
    GPU where hybrid sharding holds 8x as much), then refused; it is now hybrid sharding
    (``RunConfig.replicate``). Plain FSDP and plain replication read as before."""
    hybrid = from_torchtitan(TITAN.format(replicate=8, shard=8), gpus=64)[1]
    assert (hybrid.zero, hybrid.replicate, hybrid.d) == (3, 8, 64)
    full = dataclasses.replace(hybrid, replicate=1)
    weights = [device_bytes("llama3-8b", config=c)["parameter_bytes"][0] for c in (hybrid, full)]
    layers = 2 * MODELS["llama3-8b"].layer_params() * 2  # two layers whole, in bf16
    assert weights[0] - layers == pytest.approx(8 * (weights[1] - layers), rel=1e-12)
    for replicate, shard, zero in ((1, 64, 3), (1, -1, 3), (64, 1, 0), (64, -1, 0)):
        run = from_torchtitan(TITAN.format(replicate=replicate, shard=shard), gpus=64)[1]
        assert (run.zero, run.d, run.replicate) == (zero, 64, 1)


def test_a_shared_expert_width_that_is_no_whole_number_of_experts_is_refused():
    """``round(shared / width)`` dropped a shared expert narrower than half a routed one (512
    against 1,408 priced as none) and priced 2,048 as 1,408, in both readers."""
    assert from_hf({**QWEN_MOE, "shared_expert_intermediate_size": 5632}).shared_experts == 4
    with pytest.raises(ScheduleError, match="'shared_expert_intermediate_size' must be a "
                                            "multiple of 'moe_intermediate_size' = 1408 "
                                            r"\(got 512\)"):
        from_hf({**QWEN_MOE, "shared_expert_intermediate_size": 512})
    assert from_megatron(MOE_SCRIPT + "--moe-shared-expert-intermediate-size 2048",
                         gpus=1).model.shared_experts == 2
    with pytest.raises(ScheduleError, match="--moe-shared-expert-intermediate-size must be a "
                                            "multiple of --moe-ffn-hidden-size = 1024 "
                                            r"\(got 500\)"):
        from_megatron(MOE_SCRIPT + "--moe-shared-expert-intermediate-size 500", gpus=1)


@pytest.mark.parametrize("field", ["matmul_half", "efficiency"])
def test_a_hardware_curve_past_floats_is_refused(field):
    """An int of 400 digits raised OverflowError (``float(value)``)."""
    with pytest.raises(ScheduleError, match=f"{field} must be a number in"):
        dataclasses.replace(HARDWARE["H100-80GB"], **{field: 10**400})


@pytest.mark.parametrize("field", ["host_microbatch", "host_layer", "handoff", "op_overhead"])
def test_a_hardware_time_no_gpu_has_is_refused(field):
    """1.7e308 seconds of host time a microbatch (or a hand-off, or an op's overhead) gave an
    infinite step and a NaN bubble ratio."""
    with pytest.raises(ScheduleError, match=rf"{field} must be in \[0, 3600\]"):
        dataclasses.replace(HARDWARE["H100-80GB"], **{field: 1.7e308})
    longest = dataclasses.replace(HARDWARE["H100-80GB"], **{field: 3600.0})
    row = explain(MODELS["llama3-8b"], RunConfig(seq=4096, global_batch=32, t=2, p=2, d=2),
                  longest, neighbours=0, workers=1).row
    assert 0 < row["step_time"] < float("inf") and 0 <= row["bubble_ratio"] < 1


def test_sequence_parallel_needs_t_to_split_each_context_chunk():
    """Megatron splits each context-parallel rank's ``seq / cp`` tokens over the ``t`` ranks
    and asserts they divide (``_split_along_first_dim``); ``seq = 1023`` at ``t = 2`` was
    priced, from a launch script and in ``plan``."""
    with pytest.raises(ScheduleError, match=r"seq must be a multiple of t\*cp=8 \(got "
                                            r"seq=4095, t=4, cp=2\)"):
        RunConfig(seq=4095, global_batch=8, t=4, cp=2)
    assert RunConfig(seq=4095, global_batch=8, t=4, sequence_parallel=False).t == 4
    with pytest.raises(ScheduleError, match="sequence_parallel splits"):
        from_megatron("--num-layers 8 --hidden-size 512 --num-attention-heads 8 --seq-length "
                      "1023 --vocab-size 1000 --bf16 --tensor-model-parallel-size 2 "
                      "--sequence-parallel", gpus=8)
    rows = plan_configurations("llama3-8b", gpus=8, hardware="H100-80GB", seq=1020,
                               global_batch=32, schedules=["1f1b"], workers=1)
    split = rows["reason"].str.contains("sequence_parallel splits")
    assert split.any() and set(rows.loc[split, "t"]) == {8}
    assert not rows.loc[rows["t"] < 8, "reason"].str.contains("sequence_parallel").any()


def test_a_sweep_point_whose_sums_overflow_is_skipped_not_priced():
    """``b = 2e306`` on 8 devices: the makespan is finite, but ``p * makespan`` is not, and the
    row came back valid with a bubble ratio of exactly 1 (or NaN where the busy time overflowed
    too); ``simulate`` refuses such costs, and the sweep refuses them as it does, naming
    them."""
    rows = fastpp.sweep("1f1b", p=8, n=8, f=[1.0, 1e306], b=[2.0, 2e306], progress=False,
                        invalid="keep")
    over = (rows["b"] > 1e300) | (rows["f"] > 1e300)  # (f = 1e306 too, as simulate refuses)
    assert rows.loc[over, "reason"].str.contains(r"must be at most 1e\+290 an op").all()
    assert rows.loc[over, ["makespan", "bubble_ratio"]].isna().all(axis=None)
    fine = rows.loc[~over]
    assert (fine["reason"] == "").all() and fine["bubble_ratio"].between(0, 1).all()
    assert fine["bubble_ratio"].iloc[0] == pytest.approx(1 - 8 * 8 * 3 / (8 * 45))


def test_the_pareto_front_leaves_out_rows_kept_unsimulated():
    """A NaN kept by ``invalid="keep"`` reached ``np.minimum.accumulate`` and hid every later
    row of the front (interleaved 1F1B at ``n = 8`` dropped)."""
    rows = fastpp.sweep(["1f1b", "interleaved-1f1b"], p=4, n=[3, 8], invalid="keep",
                        progress=False)
    assert rows["bubble_ratio"].isna().any()
    front = fastpp.pareto_front(rows, x="n", y="bubble_ratio")
    expected = fastpp.pareto_front(rows.dropna(subset=["bubble_ratio"]), x="n",
                                   y="bubble_ratio")
    assert front.index.tolist() == expected.index.tolist()
    assert ("interleaved-1f1b", 8) in set(zip(front["schedule"], front["n"], strict=True))


@pytest.mark.parametrize("axes, name", [({"f": [[1.0]]}, "f"), ({"p": [[2]]}, "p"),
                                        ({"w": [[0.5, 1.0]]}, "w"),
                                        ({"f": [np.array([1.0, 2.0])]}, "f")])
def test_a_sweep_axis_of_lists_is_refused(axes, name):
    """A list of lists reached pandas ("Per-column arrays must each be 1-dimensional") or
    NumPy, or named a stage count of None."""
    grid = {"p": 2, "n": 4} | axes
    with pytest.raises(ScheduleError, match=f"{name} must be a value or a 1-D list of values"):
        fastpp.sweep("1f1b", progress=False, **grid)


def test_an_empty_points_table_is_named():
    """It was refused as "p must hold positive integers below 2**31 (got [])"."""
    empty = pd.DataFrame({"schedule": [], "p": [], "n": [], "m": []})
    with pytest.raises(ScheduleError, match="points must hold at least one row"):
        fastpp.sweep(points=empty, progress=False)


@pytest.mark.parametrize("gpus, global_batch, name", [(2**62, 32, "gpus"),
                                                      (8, 2**62, "global_batch")])
def test_plan_bounds_its_counts(gpus, global_batch, name):
    """``gpus = 2**62`` wrapped ``microbatch * d`` around (reasons of "a multiple of ... =
    -9223372036854775808" and a division by zero); ``global_batch = 2**62`` was named ``n``."""
    with pytest.raises(ScheduleError, match=f"{name} must be at most 2,147,483,647"):
        plan_configurations("llama3-8b", gpus, seq=2048, global_batch=global_batch,
                            schedules=["1f1b"], workers=1)


@pytest.mark.parametrize("limit", ["256MB", None, -5, float("nan")])
def test_a_plan_cache_bound_must_be_bytes(limit):
    """A string or None failed later inside a sweep (a TypeError); -5 and NaN were taken."""
    with pytest.raises(ScheduleError, match="limit must be an integer >= 0"):
        batch.PlanCache(limit)


def _trace(folder, events):
    """A one-rank Chrome trace of ``events`` in ``folder``."""
    folder.mkdir()
    path = folder / "rank0_trace.json"
    path.write_text(json.dumps({"distributedInfo": {"rank": 0, "world_size": 1},
                                "traceEvents": events}))
    return path


def _event(name, ts, dur, cat="user_annotation", tid=1):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid}


GPIPE_PAIR = [_event("Forward 0", 0.0, 10.0), _event("Backward 0", 20.0, 10.0)]


@pytest.mark.parametrize("label", ["PP:\u0660F0", "PP:0F\uff10"])
def test_a_label_with_another_scripts_digit_is_no_op(tmp_path, label):
    """``\\d`` matched Arabic-Indic and full-width digits: the labels' byte reader then raised
    UnicodeEncodeError; GPipe's ``Forward ١`` was read as microbatch 1, and is now an
    annotation like any other."""
    with pytest.raises(ScheduleError, match="not a pipeline action PyTorch writes"):
        fastpp.read_torch_trace(_trace(tmp_path / "pp", [_event(label, 0.0, 10.0)]))
    events = [GPIPE_PAIR[0], _event("Forward \u0661", 12.0, 5.0), GPIPE_PAIR[1]]
    run = fastpp.read_torch_trace(_trace(tmp_path / "gpipe", events))
    assert [run.schedule.token(0, k) for k in range(run.schedule.length[0])] == ["0F0", "0B0"]


@pytest.mark.parametrize("events, message", [
    ([*GPIPE_PAIR, _event("other", [1], 5.0)], "event 'other' has no numeric ts and dur"),
    ([_event("Forward 0", [0.0], [10.0]), _event("Backward 0", [20.0], [10.0])],
     "event 'Forward 0' has no numeric ts and dur"),
    ([*GPIPE_PAIR, _event("aten::mm", [1.0], 2.0, cat="cpu_op")],
     r"a cpu_op event has ts or dur \[1.0\], not a number"),
    ([*GPIPE_PAIR, _event("aten::mm", 1.0, 2.0, cat="cpu_op", tid=[1])],
     r"a cpu_op event's tid must be a number or a name \(got \[1\]\)"),
])
def test_a_trace_event_with_a_list_for_a_number_is_named(tmp_path, events, message):
    """A list for ``ts``, ``dur`` or ``tid`` escaped as NumPy's ValueError or IndexError."""
    with pytest.raises(ScheduleError, match=message):
        fastpp.read_torch_trace(_trace(tmp_path / "t", events))


@needs_data("whatif_st/trace-ST.parquet")
def test_the_op_tables_meta_takes_numpy_integers():
    """``dp_size = np.int64(2)`` was refused as "must be a positive integer (got
    np.int64(2))"."""
    table = DATA / "whatif_st" / "trace-ST.parquet"
    job = fastpp.read_op_table(table, {"dp_size": np.int64(2), "pp_size": np.int32(4),
                                       "world_size": np.int64(8)})
    assert (job.dp, job.pp) == (2, 4)


def test_a_robust_objectives_weight_is_bounded():
    """``lam = 1e308`` made ``mean + lam * std`` overflow for every candidate: a tie at inf,
    the first kept, reported as the value."""
    costs = fastpp.Costs(f=1.0, b=2.0, w=1.0)
    with pytest.raises(ScheduleError, match=r"lam must be in \[0, 1e\+06\]"):
        fastpp.optimize(4, 12, costs, method="heuristic", progress=False,
                        objective="mean+std", noise=fastpp.Noise(0.5), lam=1e308)
    rows = fastpp.sweep("1f1b", p=2, n=4, progress=False, noise=fastpp.Noise(0.1), samples=8)
    with pytest.raises(ScheduleError, match=r"lam must be in \[0, 1e\+06\]"):
        fastpp.best_within_budget(rows, objective="mean+std", lam=1e7)


def test_a_probe_whose_ratios_overflow_is_named():
    """A full backward of 1e-300 s against halves of 1e300 s made the split's share infinite,
    and ``costs()`` priced every ``I`` at 0 (``w = b``)."""
    run = fastpp.read_torch_trace(Path(__file__).parent / "data" / "gpipe")
    odd = changed_run(run, probe=np.array([[1e-300, 1e300, 1e300]] * run.schedule.V))
    with pytest.raises(ScheduleError, match="probe must time its split halves I, W within a "
                                            "finite ratio"):
        odd.costs()


def test_the_best_rows_of_an_empty_table_are_none():
    """An empty table (a sweep whose points were all skipped) was refused as "budget must be
    ... one of [] (got '1f1b')", naming a budget left at its default."""
    rows = fastpp.sweep("1f1b", p=2, n=4, progress=False)
    assert fastpp.best_within_budget(rows.iloc[:0]).empty
    assert len(fastpp.best_within_budget(rows)) == 1


def test_a_global_batch_the_ranks_cannot_split_is_named_as_written():
    """Refused in ``RunConfig``'s words ("global_batch must be a multiple of microbatch * d"),
    not the launch script's or the job config's."""
    with pytest.raises(ScheduleError, match=r"--global-batch-size must be a multiple of "
                                            r"--micro-batch-size x the 8 data-parallel ranks "
                                            r"= 8 \(got 7\)"):
        from_megatron("--num-layers 8 --hidden-size 512 --num-attention-heads 8 --seq-length "
                      "1024 --vocab-size 1000 --bf16 --global-batch-size 7", gpus=8)
    job = TITAN.format(replicate=1, shard=-1).replace("local_batch_size = 2",
                                                      "local_batch_size = 4\n"
                                                      "global_batch_size = 8")
    with pytest.raises(ScheduleError, match=r"\[training\] global_batch_size must be a multiple "
                                            r"of local_batch_size x the 4 data-parallel ranks "
                                            r"= 16 \(got 8\)"):
        from_torchtitan(job, gpus=4)


@pytest.mark.parametrize("argv, flag", [
    (["plan", "--tp", "0"], "--tp"), (["plan", "--gpus", "-8"], "--gpus"),
    (["explain", "--model", "llama3-8b", "--tp", "x"], "--tp"),
    (["simulate", "--schedule", "1f1b", "-p", "0", "-n", "4"], "-p"),
    (["optimize", "-p", "4", "-n", "0"], "-n")])
def test_a_count_given_on_the_command_line_is_named_by_its_flag(capsys, argv, flag):
    """``explain --tp 0`` said "t must be a positive integer (got t=0)", the library's
    parameter, not the flag the user typed."""
    with pytest.raises(SystemExit) as stop:
        cli(argv)
    assert stop.value.code == 2
    assert f"argument {flag}: must be a positive integer" in capsys.readouterr().err


def test_an_int_past_int64_is_a_number_too_large():
    """``time_scale=10**30`` was refused as "must be a number" (NumPy keeps such an int as an
    object); it is a number, and one past float64's range is refused as not finite."""
    result = fastpp.simulate(fastpp.build_schedule("1f1b", 2, 4), fastpp.Costs(1.0, 2.0))
    trace = fastpp.trace.chrome_trace(result, 10**30)
    stamps = [e["ts"] for e in trace["traceEvents"] if "ts" in e]
    assert max(stamps) == pytest.approx(result.makespan * 1e30) and np.isfinite(stamps).all()
    for value in (10**400, -(10**400)):
        with pytest.raises(ScheduleError, match="time_scale must be finite and > 0"):
            fastpp.trace.chrome_trace(result, value)
    with pytest.raises(ScheduleError, match="costs.f must be finite and > 0"):
        fastpp.Costs(f=10**400, b=2.0)


def test_a_sweep_of_subnormal_times_is_skipped_and_its_chunks_bounded():
    """``f = 1e-320`` with ``b = 2e-320`` gave a throughput of inf; ``chunk_size = 10**9``
    asked for gigabytes at once."""
    rows = fastpp.sweep("1f1b", p=2, n=4, f=[1.0, 1e-320], b=[2.0, 2e-320], progress=False,
                        invalid="keep")
    tiny = (rows["f"] < 1e-300) & (rows["b"] < 1e-300)
    assert rows.loc[tiny, "reason"].str.startswith("costs must keep the throughput").all()
    assert np.isfinite(rows.loc[~tiny, "throughput"]).all()
    with pytest.raises(ScheduleError, match="chunk_size must be at most 1,000,000"):
        fastpp.sweep("1f1b", p=2, n=4, chunk_size=10**9, progress=False)
