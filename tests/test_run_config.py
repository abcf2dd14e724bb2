"""``RunConfig``: one object through the cost model, named as plan's rows are."""

import inspect

import numpy as np
import pandas as pd
import pytest

from fastpp import ScheduleError
from fastpp.model import (
    HARDWARE,
    PLAN_COLUMNS,
    RunConfig,
    RunGrid,
    Transformer,
    device_bytes,
    plan,
    stage_table,
    to_megatron,
    to_torchtitan,
    transformer_costs,
)
from fastpp.model.config import PER_CONFIGURATION, ROW

TINY = Transformer(8, 512, 8, vocab=1024, swiglu=True, name="tiny")


def test_fields_are_plan_columns():
    fields = set(RunConfig.__dataclass_fields__) | {"gpus", "n"}
    assert set(ROW) <= fields and set(ROW) == set(PLAN_COLUMNS[:len(ROW) + 1]) - {"model"}


def test_one_zero_default():
    """transformer_costs, device_bytes, plan and RunConfig agree: ZeRO-1."""
    defaults = {f.__name__: inspect.signature(f).parameters["zero"].default
                for f in (transformer_costs, device_bytes, plan)}
    assert set(defaults.values()) == {RunConfig.__dataclass_fields__["zero"].default} == {1}


def test_rows_round_trip():
    rows = plan(TINY, 8, seq=512, global_batch=32, workers=1, recompute=["none", "full"],
                schedules=["1f1b", "interleaved-1f1b", "zbv"], zero=[1, 3])
    assert len(rows) > 20
    for _, row in rows.iterrows():
        config = RunConfig.from_row(row, seq=512)
        assert config.to_row() == {k: row[k] for k in ROW}
        assert RunConfig.from_row(config.to_row(), seq=512) == config


def test_config_form_equals_keywords():
    config = RunConfig(seq=1024, global_batch=16, t=2, p=2, d=2, schedule="interleaved-1f1b",
                       m=2, microbatch=2, recompute="selective", zero=3)
    schedule = config.build_schedule()
    assert (schedule.p, schedule.n) == (2, 4)
    ours = transformer_costs(TINY, config=config)
    theirs = transformer_costs(TINY, schedule, seq=1024, microbatch=2, tp=2, dp=2,
                               recompute="selective", zero=3)
    for name in ("f", "b", "w", "act"):
        assert np.array_equal(getattr(ours, name), getattr(theirs, name))
    ours, theirs = device_bytes(TINY, config=config), device_bytes(TINY, schedule, tp=2,
                                                                   dp=2, zero=3)
    assert all(np.array_equal(ours[k], theirs[k]) for k in ours)
    row = plan(TINY, config=config, workers=1)
    assert len(row) == 1 and RunConfig.from_row(row.iloc[0], seq=1024,
                                                precision=None) == config.replace(
        layout=row["layout"][0])
    keywords = plan(TINY, 8, seq=1024, global_batch=16, tp=2, pp=2, m=2, microbatch=2,
                    schedules=["interleaved-1f1b"], recompute="selective", zero=3, workers=1)
    assert row["step_time"][0] == keywords["step_time"][0]


def test_train_metrics_lengthen_the_loss_stage_s_backward_alone():
    """``train_metrics`` (Composer's train metrics): each adds 14 bytes a logit at the
    memory's rate and 7 launches to the loss stage's backward, after its host and ZeRO time,
    and nothing elsewhere; while one runs that stage holds 10 bytes a logit (the bf16 logits,
    an fp32 copy and log_softmax's output), which here, with a large vocabulary on a small
    model, is the plan's activations. Every form takes it: keywords, ``config=``, ``plan``."""
    wide = Transformer(2, 256, 4, vocab=65536, name="wide")
    tokens, h100 = 1024 * 8, HARDWARE["H100-80GB"]
    logits = tokens * wide.vocab
    config = RunConfig(seq=1024, global_batch=16, p=2, d=2, microbatch=8, zero=3)
    bare = transformer_costs(wide, config=config)
    costs = transformer_costs(wide, config=config.replace(train_metrics=2))
    keywords = transformer_costs(wide, config.build_schedule(), seq=1024, microbatch=8, dp=2,
                                 zero=3, train_metrics=2)
    assert np.array_equal(costs.b, keywords.b)
    metric = 14.0 * logits / h100.memory_bandwidth + 7 * h100.op_overhead
    assert costs.b[1] - bare.b[1] == pytest.approx(2 * metric)
    for name in ("f", "w", "act"):
        assert np.array_equal(getattr(costs, name), getattr(bare, name))
    assert costs.b[0] == bare.b[0] and not bare.after.any()
    assert costs.after.tolist() == [0.0, 10.0 * logits]
    rows = {k: plan(wide, config=config.replace(train_metrics=k), workers=1).iloc[0]
            for k in (0, 2)}
    assert rows[2]["step_time"] > rows[0]["step_time"]
    assert rows[0]["activation_bytes"] < 10.0 * logits == rows[2]["activation_bytes"]
    assert plan(wide, 4, seq=1024, global_batch=16, pp=2, microbatch=8, zero=3,
                schedules=["1f1b"], train_metrics=2, workers=1)["step_time"][0] == \
        rows[2]["step_time"]
    for bad in (-1, 1.5, True, 2**40):
        with pytest.raises(ScheduleError, match="train_metrics must be an integer >= 0"):
            RunConfig(seq=1024, global_batch=16, train_metrics=bad)
    with pytest.raises(ScheduleError, match="train_metrics must be an integer >= 0"):
        plan(TINY, 4, seq=1024, global_batch=16, train_metrics=-2)
    exported = {to_megatron: {"zero": 1}, to_torchtitan: {"zero": 3, "zero3": "step"}}
    for export, run in exported.items():  # no flag of theirs says it: refused
        with pytest.raises(ScheduleError, match="cannot state train_metrics=2"):
            export(config.replace(train_metrics=2, **run), wide)


def test_first_last_layers_become_a_layout():
    config = RunConfig(seq=512, global_batch=8, p=2, first_layers=3)
    assert str(config.chunk_layout(TINY)) == "Et*3|t*5L"
    costs = transformer_costs(TINY, config=config)
    assert costs.f[0] < costs.f[1]


def test_a_chunk_of_no_layers_as_plan_takes_it():
    """first_layers=0 (the embedding's chunk alone) is a RunConfig as it is a plan axis, the
    same price either way; Megatron's per-rank counts must be > 0, so it is written as the
    layout it makes."""
    config = RunConfig(seq=512, global_batch=8, p=2, microbatch=1, recompute="none",
                       first_layers=0)
    assert str(config.chunk_layout(TINY)) == "E|t*8L"
    row = plan(TINY, 2, seq=512, global_batch=8, p=2, microbatch=1, recompute="none",
               schedules=["1f1b"], first_layers=0, workers=1)
    assert plan(TINY, config=config, workers=1)["step_time"][0] == row["step_time"][0]
    flags = to_megatron(config, TINY)
    assert flags[flags.index("--pipeline-model-parallel-layout") + 1] == "E|t*8L"
    assert "--decoder-first-pipeline-num-layers" not in flags
    with pytest.raises(ScheduleError, match="needs the model .* a count of 0"):
        to_megatron(config)
    with pytest.raises(ScheduleError, match=r"first_layers must be an integer >= 0 \(got -1\)"):
        RunConfig(seq=512, global_batch=8, p=2, first_layers=-1)


def test_plan_axis_spellings():
    a = plan(TINY, 8, seq=512, global_batch=16, t=2, p=[2], schedules=["1f1b"], workers=1,
             recompute="none", microbatch=1)
    b = plan(TINY, 8, seq=512, global_batch=16, tp=2, pp=[2], schedules=["1f1b"], workers=1,
             recompute="none", microbatch=1)
    assert a["step_time"].tolist() == b["step_time"].tolist()
    with pytest.raises(ScheduleError, match="give t or tp, not both"):
        plan(TINY, 8, seq=512, global_batch=16, t=2, tp=2)
    with pytest.raises(ScheduleError, match="plan needs gpus, seq and global_batch"):
        plan(TINY, 8, seq=512)
    # an axis given beside config replaces its value, d following from the GPUs
    rows = plan(TINY, config=RunConfig(seq=512, global_batch=16, t=2, d=4), t=[1, 2],
                workers=1)
    assert sorted(zip(rows["t"], rows["d"], strict=True)) == [(1, 8), (2, 4)]


def test_bad_configs():
    with pytest.raises(ScheduleError, match="global_batch must be a multiple of microbatch"):
        RunConfig(seq=512, global_batch=10, d=4)
    with pytest.raises(ScheduleError, match="schedule must be one of the training"):
        RunConfig(seq=512, global_batch=8, schedule="forward-only")
    with pytest.raises(ScheduleError, match="t \\* cp \\* p = 24 must divide the gpus"):
        RunConfig.for_gpus(64, seq=512, global_batch=64, t=8, p=3)
    assert RunConfig.for_gpus(64, seq=512, global_batch=64, t=8, p=2).d == 4
    with pytest.raises(ScheduleError, match="recompute"):
        RunConfig(seq=512, global_batch=8, recompute="most")
    with pytest.raises(ScheduleError, match="give layout or first_layers"):
        RunConfig(seq=512, global_batch=8, layout="Et|tL", first_layers=1)
    with pytest.raises(ScheduleError, match="layout must"):
        RunConfig(seq=512, global_batch=8, layout="Ex|tL")
    with pytest.raises(ScheduleError, match="schedule must be a Schedule"):
        transformer_costs(TINY, seq=512)
    with pytest.raises(TypeError):
        RunConfig(512, 8)  # keywords only: no positional mix-ups of t, p, d


def test_run_grid_names_run_config_fields():
    """RunGrid's fields are RunConfig's (plan's columns) but the recipe RunConfig's
    recompute_modules become, and the older Megatron-LM's scatter-gather hand-off, which only
    its published runs set (plan prices Megatron-Core's)."""
    grid = set(RunGrid.__dataclass_fields__) - {"recipe", "scatter_gather"}
    assert grid <= set(RunConfig.__dataclass_fields__)
    assert set(PER_CONFIGURATION) <= grid


def test_a_grid_prices_each_configuration_as_alone():
    """stage_table over three configurations at once (tensor, context and expert
    parallelism, recomputation, ZeRO-3 and the pair overlap differing) gives each stage what
    the configuration's own one-configuration grid gives it."""
    moe = Transformer(4, 256, 8, ffn=512, kv_heads=4, expert_ffn=128, experts=8, top_k=2,
                      shared_experts=1, vocab=512, swiglu=True, name="grid-moe")
    grid = RunGrid(seq=256, microbatch=np.array([1, 2, 1]), t=np.array([1, 2, 4]),
                   d=np.array([4, 2, 1]), p=np.full(3, 2), m=np.ones(3, np.int64),
                   recompute=np.array([0, 1, 2]), cp=np.array([1, 2, 1]),
                   ep=np.array([2, 4, 1]), zero=np.array([1, 3, 0]),
                   overlap=np.array([True, False, False]), sequence_parallel=True,
                   blocking_handoffs=True, cp_comm="ring", zero3="layer")
    config = np.repeat(np.arange(3), 2)
    stages = {"layers": np.tile([2.0, 2.0], 3), "embedding": np.tile([True, False], 3),
              "loss": np.tile([False, True], 3), "moe_layers": np.tile([2.0, 2.0], 3)}
    together = stage_table(moe, HARDWARE["H100-80GB"], grid, config=config,
                           **stages)
    assert np.isfinite(together["fb"][:2]).all() and np.isnan(together["fb"][2:]).all()
    for k in range(3):
        mine = config == k
        alone = stage_table(moe, HARDWARE["H100-80GB"], grid.take([k]),
                            config=np.zeros(2, np.int64),
                            **{name: x[mine] for name, x in stages.items()})
        for key, value in alone.items():
            np.testing.assert_allclose(together[key][mine], value, rtol=1e-12, err_msg=key)


@pytest.mark.parametrize("column, value, match", [
    # an array cell: its item() was NumPy's ValueError, its truth (layout) NumPy's too
    ("t", np.array([1, 2]), r"^t must be"), ("schedule", np.array([1, 2]), r"^schedule must"),
    ("layout", np.array([1, 2]), r"^layout must be"), ("layout", pd.NA, r"^layout must be"),
    # the global batch the row's counts give, named by them (it was 'global_batch')
    ("n", 10**18, r"row's n \* microbatch \* d, the global batch, must be below 2\*\*31"),
])
def test_from_row_names_a_bad_cell(column, value, match):
    row = RunConfig(seq=512, global_batch=8, t=2, p=2, d=2).to_row() | {"n": 2, "gpus": 8}
    with pytest.raises(ScheduleError, match=match):
        RunConfig.from_row(row | {column: value}, seq=512)
