"""Hybrid sharding (HSDP, ``RunConfig.replicate``): ZeRO in ``replicate`` groups of
``d cp / replicate`` ranks, each rank's share of the reduced gradients all-reduced across the
groups once a step (torchtitan's ``data_parallel_replicate_degree``, Megatron's
``--num-distributed-optimizer-instances``)."""

import numpy as np
import pytest

from fastpp import ScheduleError
from fastpp.model import HARDWARE, RunConfig, device_bytes, from_megatron, plan, to_megatron
from fastpp.model.comm import all_reduce, data_parallel_per_node, reduce_scatter
from fastpp.model.stages import REDUCE_BYTES, step_terms

JOB = dict(model="llama3-70b", gpus=256, hardware="H100-80GB", seq=8192, global_batch=256,
           workers=1, schedules=["1f1b"], tp=[8], pp=[4], microbatch=[1], recompute=["full"])
PRICED = ["step_time", "gradient_sync", "optimizer_step", "parameter_bytes", "gradient_bytes",
          "optimizer_bytes", "peak_memory"]


def _row(**keywords):
    rows = plan(**{**JOB, **keywords})
    assert len(rows) == 1
    return rows.iloc[0]


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_one_rank_groups_are_data_parallelism_without_zero(zero):
    """``replicate = d cp``: each group is one rank, so nothing is sharded, and the
    reduction is the plain all-reduce over every replica: ZeRO-0's numbers, to the bit."""
    plain = _row(zero=[0])
    groups = _row(zero=[zero], replicate=8)
    assert plain["d"] == groups["d"] == 8
    for column in PRICED:
        assert groups[column] == plain[column], column


def test_groups_hold_replicate_times_the_state_of_zero_over_all():
    """ZeRO-1's optimizer state (and its step) over ``8 / replicate`` ranks: ``replicate``
    times that over all 8; the weights and gradients whole either way."""
    over_all = _row(zero=[1])
    for replicate in (2, 4, 8):
        groups = _row(zero=[1], replicate=replicate)
        assert groups["optimizer_bytes"] == pytest.approx(
            replicate * over_all["optimizer_bytes"], rel=1e-12)
        for column in ("parameter_bytes", "gradient_bytes"):
            assert groups[column] == over_all[column]


def test_the_reduction_is_a_group_reduce_scatter_and_an_all_reduce_across_groups():
    """The step's gradient reduction, written out from the collectives: a reduce-scatter
    over the group's ``s = d / replicate`` ranks ``t`` apart, then each rank's ``1/s`` share
    all-reduced over the ``replicate`` groups, ranks ``t s`` apart (Megatron's partial
    distributed optimizer; FSDP2's HSDP)."""
    hw, params, t, d = HARDWARE["H100-80GB"], 1.1e9, 2, 16
    for replicate in (1, 2, 4, 16):
        s = d // replicate
        want = reduce_scatter(hw, REDUCE_BYTES * params, s, data_parallel_per_node(hw, t, s))
        if replicate > 1:
            want = want + all_reduce(hw, REDUCE_BYTES * params / s, replicate,
                                     data_parallel_per_node(hw, t * s, replicate))
        got = step_terms(hw, params, t, d, 1, replicate=replicate)
        assert float(got["gradient_sync"]) == pytest.approx(float(want), rel=1e-12)


def test_rows_that_cannot_split_into_groups_say_why():
    rows = plan(**{**JOB, "pp": [4, 8], "tp": [8, 4]}, zero=[0, 1], replicate=16)
    reasons = set(rows["reason"])
    assert ("replicate=16 splits ZeRO's sharding into groups: zero must be 1, 2 or 3"
            in reasons)
    ok = rows[(rows["zero"] == 1) & (rows["d"] * rows["cp"] % 16 == 0)]
    assert len(ok) and not ok["reason"].str.contains("replicate").any()
    assert ok["peak_memory"].notna().all()  # priced (groups of one GPU: nothing sharded)
    assert ("replicate=16 must divide d * cp, the ranks ZeRO's groups split"
            in set(rows[rows["d"] * rows["cp"] % 16 != 0]["reason"]))


@pytest.mark.parametrize("fields, match", [
    (dict(d=4, zero=0, replicate=2), "replicate=2 splits ZeRO's sharding into groups: zero "
                                     "must be 1, 2 or 3 \\(got zero=0, d \\* cp = 4\\)"),
    (dict(d=6, zero=1, replicate=4), "replicate=4 must divide d \\* cp, the ranks ZeRO's "
                                     "groups split \\(got zero=1, d \\* cp = 6\\)"),
    (dict(d=4, zero=1, replicate=0), "replicate must be a positive integer"),
])
def test_run_config_refuses_groups_it_cannot_make(fields, match):
    with pytest.raises(ScheduleError, match=match):
        RunConfig(seq=2048, global_batch=48, **fields)


def test_expert_replicas_must_split_into_the_groups():
    """Each group holds its own copy of the experts: ``replicate`` must divide the
    expert-data-parallel replicas (8 GPUs, ep 8: one)."""
    config = RunConfig(seq=4096, global_batch=16, d=8, ep=8, zero=1, replicate=2)
    with pytest.raises(ScheduleError, match="replicate=2 must divide the expert-data-parallel "
                                            "replicas"):
        device_bytes("mixtral-8x7b", config=config)
    rows = plan("mixtral-8x7b", 8, "H100-80GB", seq=4096, global_batch=16, tp=[1], pp=[1],
                ep=[4, 8], zero=[1], replicate=2, schedules=["1f1b"], microbatch=[1],
                recompute=["full"], workers=1)
    assert set(rows[rows["ep"] == 8]["reason"]) == {
        "replicate=2 must divide the expert-data-parallel replicas (each group holds its own "
        "copy of the experts)"}
    assert rows[rows["ep"] == 4]["step_time"].notna().all()  # priced (if too large to fit)


def test_megatron_instances_read_and_written():
    """--num-distributed-optimizer-instances is ``replicate``; Megatron asserts the
    distributed optimizer with it."""
    base = ("--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 "
            "--vocab-size 1024 --bf16 --micro-batch-size 1 ")
    got = from_megatron(base + "--use-distributed-optimizer --num-distributed-optimizer-"
                        "instances 2", gpus=8)
    assert (got.config.zero, got.config.replicate, got.config.d) == (1, 2, 8)
    flags = to_megatron(got.config, got.model)
    assert flags[flags.index("--num-distributed-optimizer-instances") + 1] == "2"
    assert from_megatron(flags, gpus=8).config == got.config
    with pytest.raises(ScheduleError, match="--num-distributed-optimizer-instances 2 needs "
                                            "--use-distributed-optimizer"):
        from_megatron(base + "--num-distributed-optimizer-instances 2", gpus=8)
    with pytest.raises(ScheduleError, match="must divide the data- and context-parallel ranks "
                                            "d \\* cp = 8"):
        from_megatron(base + "--use-distributed-optimizer --num-distributed-optimizer-"
                      "instances 3", gpus=8)
    assert "--num-distributed-optimizer-instances" not in to_megatron(
        RunConfig(seq=512, global_batch=8, d=8, zero=1))


def test_the_command_line_takes_replicate(capsys, tmp_path):
    from fastpp.__main__ import main

    assert main(["plan", "--model", "llama3-8b", "--gpus", "16", "--seq", "4096",
                 "--global-batch", "32", "--tp", "2", "--pp", "2", "--schedules", "1f1b",
                 "--zero", "1", "--replicate", "2", "--no-plots", "--top", "1", "--out",
                 str(tmp_path)]) == 0
    import pandas as pd

    rows = pd.read_parquet(tmp_path / "plan.parquet")  # (d = 4 in every row)
    single = plan("llama3-8b", 16, seq=4096, global_batch=32, tp=[2], pp=[2],
                  schedules=["1f1b"], zero=[1], replicate=2, workers=1)
    np.testing.assert_array_equal(rows.sort_values(["microbatch"])["optimizer_bytes"],
                                  single.sort_values(["microbatch"])["optimizer_bytes"])
    whole = plan("llama3-8b", 16, seq=4096, global_batch=32, tp=[2], pp=[2],
                 schedules=["1f1b"], zero=[1], workers=1)
    assert (single["optimizer_bytes"].to_numpy() == 2 * whole["optimizer_bytes"].to_numpy()).all()
