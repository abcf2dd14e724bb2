"""Bad input to the planner and the cost model: ``plan`` (its axes, a ``config``, its summary),
``RunConfig``, ``device_bytes``, ``transformer_costs``, ``explain``, the hardware and model
presets, recipes and MoE options, hybrid sharding, the plan cache, the error bars and the
published data.

The cases come from the bad-input review waves of December 2026 (docs/design.md tells their
history); each failed on the code before its fix, and its docstring says how.
"""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from helpers import TITAN

import fastpp
import fastpp.model as fm
from fastpp import ScheduleError, ScheduleTypeError, batch, build_schedule
from fastpp.model import (
    HARDWARE,
    MODELS,
    RunConfig,
    RunGrid,
    Transformer,
    device_bytes,
    from_megatron,
    from_torchtitan,
    plan,
    transformer_costs,
)
from fastpp.model import plan as plan_configurations
from fastpp.model.explain import explain

RUN = RunConfig(seq=4096, global_batch=64, t=2, p=2, d=2)
ONE = build_schedule("1f1b", 4, 8)
ROOT = Path(__file__).resolve().parents[1]


def test_unknown_field_is_also_a_type_error():
    """A wrong keyword stays a ``TypeError`` too (``ScheduleTypeError``), as Python's was."""
    with pytest.raises(ScheduleTypeError):
        RunConfig(seq=1, global_batch=1, q=3)


def test_expert_groups_must_fit_a_stage():
    """Megatron-LM's own Mixtral example (EP 8, PP 4) on its default single node of 8 GPUs:
    a stage has t * cp * d = 2 GPUs, too few for 8 expert-parallel ranks."""
    with pytest.raises(ScheduleError, match=r"ep \* etp = 8 must divide the GPUs of a "
                                            r"pipeline stage t \* cp \* d = 2"):
        RunConfig(seq=4096, global_batch=256, t=1, p=4, d=2, ep=8)
    assert RunConfig(seq=4096, global_batch=256, t=1, p=4, d=16, ep=8).ep == 8


def test_plan_refuses_recompute_modules_without_selective_rows():
    """``recompute="none"`` with ``recompute_modules=["moe_act"]``: the modules act on the
    selective rows alone, so they priced nothing, silently."""
    with pytest.raises(ScheduleError, match=r"recompute_modules must come with selective "
                                            r"recomputation, the rows they act on: "
                                            r"recompute must include 'selective'"):
        fastpp.model.plan("mixtral-8x7b", 8, seq=1024, global_batch=8, tp=1, pp=2,
                          microbatch=1, schedules=["1f1b"], ep=2, recompute="none",
                          recompute_modules=["moe_act"], workers=1)


def test_plan_with_a_config_takes_gpus_and_lets_d_follow():
    """``gpus`` beside ``config`` raised a raw TypeError: "plan() got multiple values for
    argument 'gpus'"."""
    (row,) = plan("llama3-8b", 16, config=RUN, workers=1).itertuples()
    assert (row.t, row.p, row.d) == (2, 2, 4)


@pytest.mark.parametrize("keyword", [dict(zero=3), dict(precision="fp8"), dict(seq=2048),
                                     dict(offload_modules=["core_attn"]),
                                     dict(sequence_parallel=False)])
def test_plan_refuses_run_keywords_beside_a_config(keyword):
    """Each was dropped without a word: the row kept the config's value."""
    (name,) = keyword
    with pytest.raises(ScheduleError, match=f"plan: config replaces the run's keywords, so "
                                            f"{name} must be left out"):
        plan("llama3-8b", config=RUN, **keyword)


def test_plan_refuses_a_config_that_is_not_a_run_config():
    """A string raised AttributeError: 'str' object has no attribute 'plan_keywords'."""
    with pytest.raises(fastpp.ScheduleTypeError, match="config must be a "
                                                       "fastpp.model.RunConfig"):
        plan("llama3-8b", config="x")


@pytest.mark.parametrize("keyword, match", [
    (dict(tp=3), r"tp must divide the heads 32 and KV heads 8 \(got tp=3\)"),
    (dict(tp=10**6), r"tp must divide the heads"),
    (dict(dp=10**12), r"dp must be at most 2,147,483,647"),
])
def test_device_bytes_refuses_degrees_the_model_cannot_run(keyword, match):
    """The keyword form divided the bytes by them (tp=3: a third of a head per GPU)."""
    with pytest.raises(ScheduleError, match=match):
        device_bytes("llama3-8b", build_schedule("1f1b", 4, 8), **keyword)


def test_transformer_costs_refuses_recompute_modules_without_selective_recomputation():
    """``recompute="none"`` with ``recompute_modules=["mlp"]`` priced the run without them,
    as plan already refuses (test_plan_refuses_recompute_modules_without_selective_rows)."""
    from fastpp.model import transformer_costs

    with pytest.raises(ScheduleError, match="recompute_modules must come with selective "
                                            "recomputation, which they act on"):
        transformer_costs("llama3-8b", build_schedule("1f1b", 4, 8), seq=4096,
                          recompute="none", recompute_modules=["mlp"])


def test_plan_with_a_config_and_another_recompute_drops_the_configs_modules():
    """A config with selective recomputation of ``mlp``, planned with ``recompute="none"``,
    was refused over the ``recompute_modules`` the user never passed (they came from the
    config); they act on selective rows alone, so they stay with those."""
    run = RunConfig(seq=4096, global_batch=64, t=2, p=2, d=2, recompute="selective",
                    recompute_modules=("mlp",))
    rows = plan("llama3-8b", config=run, recompute=["none", "selective"], workers=1)
    assert rows["recompute"].tolist() == ["none", "selective"]
    alone = plan("llama3-8b", config=run, workers=1)
    assert rows["step_time"].iloc[1] == alone["step_time"].iloc[0]
    assert plan("llama3-8b", config=run, recompute="none", workers=1)["step_time"].iloc[0] == \
        rows["step_time"].iloc[0]


def test_planner_inputs_it_priced_as_given():
    """``plan(reduce_bytes=1e30)`` priced a 7e27 s step (``RunConfig`` takes 2 or 4 alone);
    ``RunConfig(recompute_modules=("x",))`` was carried unpriced and written as
    ``--recompute-modules x``."""
    from fastpp.model import RunConfig, plan

    with pytest.raises(ScheduleError, match=r"reduce_bytes must be 2 or 4 \(bytes per gradient; "
                                            r"got 1e\+30\)"):
        plan("llama2-7b", 8, seq=1024, global_batch=8, reduce_bytes=1e30, workers=1)
    with pytest.raises(ScheduleError, match=r"recompute_modules must hold names among "
                                            r"\['core_attn'.*\(got 'x'\)"):
        RunConfig(seq=512, global_batch=8, p=2, d=2, recompute="selective",
                  recompute_modules=("x",))


def test_plan_axes_once_each():
    """A value given twice (``pp=[2, 2]``, a schedule twice) gave each of its rows twice; a
    bool in a list (``pp=[2, True]``) was read as 1."""
    from fastpp.model import plan

    args = dict(seq=1024, global_batch=8, tp=1, microbatch=1, recompute="none", workers=1)
    once = plan("llama2-7b", 8, pp=[2], schedules=["1f1b"], zero=[1], **args)
    twice = plan("llama2-7b", 8, pp=[2, 2], schedules=["1f1b", "1f1b"], zero=[1, 1], **args)
    assert len(once) == len(twice) == 1
    with pytest.raises(ScheduleError, match=r"pp must hold positive integers below 2\*\*31 "
                                            r"\(got \[2, True\]\)"):
        plan("llama2-7b", 8, pp=[2, True], **args)


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


def test_explain_says_why_a_run_does_not_fit():
    """explain priced the run with an unbounded capacity and set ``fits`` again, not
    ``reason``: its table printed "DOES NOT FIT: " and nothing after."""
    found = explain("llama3-70b", RunConfig(seq=8192, global_batch=64, t=4, p=2, d=8),
                    "H100-80GB", neighbours=0, workers=1)
    assert not found.row["fits"]
    needs = f"needs {found.row['peak_memory'] / 1e9:.1f} GB on device 0 > capacity 80 GB"
    assert found.row["reason"] == needs and f"DOES NOT FIT: {needs}" in found.table()


def test_plan_names_an_array_recompute_method():
    """It was compared with 'op' before it was checked: NumPy's ambiguous truth."""
    with pytest.raises(ScheduleError, match=r"recompute_method must be one of"):
        plan("llama2-7b", 8, seq=1024, global_batch=8, tp=1, pp=2, recompute="full",
             recompute_method=np.array(["block", "uniform"]), workers=1)


@pytest.mark.parametrize("method", ["block", "interval"])
def test_a_partial_recompute_method_needs_full_recomputation(method):
    """RunConfig took the method with recompute="none" and dropped it; plan and from_megatron
    refuse the same."""
    with pytest.raises(ScheduleError, match=f"recompute_method='{method}' chooses the layers "
                                            f"full recomputation covers: recompute must be "
                                            f"'full' \\(got recompute='none'\\)"):
        RunConfig(seq=2048, global_batch=8, recompute="none", recompute_method=method,
                  recompute_layers=3)


@pytest.mark.parametrize("price", [transformer_costs, device_bytes])
def test_a_schedule_of_other_stages_than_the_config(price):
    """A 4-device schedule with a 2-device RunConfig priced the layers over the schedule's
    stages and ignored the config's p."""
    config = RunConfig(seq=2048, global_batch=16, p=2, d=1)
    for schedule, got in ((build_schedule("1f1b", 4, 8), "p=4, m=1"),
                          (build_schedule("zbv", 2, 8), "p=2, m=2")):
        with pytest.raises(ScheduleError, match=f"schedule must have config's p=2 devices of "
                                                f"m=1 chunks \\(got a schedule with {got}\\)"):
            price("llama3-8b", schedule, config=config)
    price("llama3-8b", build_schedule("gpipe", 2, 8), config=config)  # another order: fine


def test_plan_summary_with_no_rows_asked_shows_none():
    """--top 0 still listed five configurations that do not fit."""
    from fastpp.model import plan
    from fastpp.model.plan import summary

    # (t = 4 at p = 2 is faster and does not fit)
    rows = plan("llama3-70b", 64, seq=8192, global_batch=64, tp=[4, 8], pp=[2, 8],
                schedules=["1f1b"], workers=1)
    assert "do not fit" in summary(rows, 3) and "do not fit" not in summary(rows, 0)


def test_replicate_checked_where_it_is_read():
    """A review of the change: a string replicate in transformer_costs' keywords reached a
    comparison (TypeError); 2**70 overflowed; a RunGrid whose d cp replicate does not divide
    priced ZeRO-3 as if it did (3 // 2); the expert message named a zero not given."""
    from fastpp.model import RunGrid, transformer_costs
    from fastpp.model.stages import stage_table

    schedule = build_schedule("1f1b", 2, 4)
    with pytest.raises(ScheduleError, match="replicate must be a positive integer"):
        transformer_costs("mixtral-8x7b", schedule, seq=4096, tp=1, dp=4, replicate="2")
    with pytest.raises(ScheduleError, match="replicate must be at most 2,147,483,647"):
        RunConfig(seq=2048, global_batch=8, d=4, replicate=2**70)
    one = np.ones(1, np.int64)
    grid = RunGrid(seq=64, microbatch=one, t=one, d=3 * one, p=2 * one, m=one,
                   recompute=0 * one, zero=3, replicate=2)
    with pytest.raises(ScheduleError, match=r"replicate=2 must divide d \* cp"):
        stage_table(fastpp.model.MODELS["llama3-8b"], fastpp.model.HARDWARE["H100-80GB"], grid,
                    config=np.zeros(2, np.int64), layers=np.array([16.0, 16.0]),
                    embedding=np.array([True, False]), loss=np.array([False, True]))
    with pytest.raises(ScheduleError, match=r"must divide the expert-data-parallel replicas .* "
                                            r"\(got zero=3, d \* cp = 4, edp = 1\)"):
        transformer_costs("mixtral-8x7b", schedule, seq=4096, tp=1, dp=4, ep=4, zero=3,
                          replicate=2)


def test_misspelt_keyword_names_itself():
    """A misspelt keyword of ``Transformer`` or ``plan`` raised a bare TypeError, not a
    ScheduleTypeError naming it and the keywords taken (as RunConfig's does)."""
    with pytest.raises(ScheduleTypeError, match=r"Transformer has no keyword 'bogus' \(its "
                                                 r"keywords: layers, hidden, heads"):
        Transformer(layers=2, hidden=64, heads=4, bogus=1)
    with pytest.raises(ScheduleTypeError, match=r"plan has no keyword 'tensor_parallel' \(its "
                                                 r"keywords: model, gpus, hardware, seq"):
        plan(MODELS["llama3-8b"], 8, seq=4096, global_batch=8, tensor_parallel=2)
    assert Transformer(2, 64, 4).layers == 2  # positional calls as before


def test_fields_accepted_then_ignored():
    """``Transformer(window_layers=1)`` without a window, ``RunConfig(zero=1, zero3="step")``
    and ``RunConfig(recompute="none", recompute_layers=4)`` were accepted and the second
    field ignored."""
    with pytest.raises(ScheduleError, match=r"window_layers needs a window > 0 \(got "
                                            r"window_layers=1, window=0\)"):
        Transformer(2, 64, 4, window_layers=1)
    with pytest.raises(ScheduleError, match=r"zero must be 3 with zero3='step' \(got zero=1\)"):
        RunConfig(seq=4096, global_batch=8, zero=1, zero3="step")
    with pytest.raises(ScheduleError, match=r"recompute must be 'full' with recompute_layers=4 "
                                            r"\(got recompute='none'\)"):
        RunConfig(seq=4096, global_batch=8, recompute="none", recompute_layers=4)


def test_explain_a_zero3_run_gathered_per_step():
    """explain's neighbours at ZeRO-1 were rebuilt with the run's ``zero3="step"``, which
    RunConfig now refuses beside ``zero=1``: explain raised on any such run (the review)."""
    from fastpp.model.explain import explain

    found = explain(Transformer(4, 256, 4, vocab=1024),
                    RunConfig(seq=256, global_batch=16, p=2, d=4, microbatch=1, zero=3,
                              zero3="step"), "A100-80GB", workers=1)
    assert found.row["zero"] == 3 and isinstance(found.neighbours, list)


def test_device_bytes_counts_a_recipes_bf16_moments_as_plan_does():
    """``plan(recipe="deepseek-v3")`` counted AdamW's moments in bf16 (8 optimizer bytes a
    parameter), ``device_bytes`` had no recipe and counted 12 (the review)."""
    from fastpp import build_schedule
    from fastpp.model import device_bytes

    sched = build_schedule("1f1b", 2, 4)
    model = Transformer(4, 256, 4, vocab=1024)
    plain = device_bytes(model, sched, dp=4, zero=1)
    moments = device_bytes(model, sched, dp=4, zero=1, recipe="deepseek-v3")
    np.testing.assert_allclose(moments["optimizer_bytes"] * 12, plain["optimizer_bytes"] * 8)
    np.testing.assert_allclose(moments["gradient_bytes"], plain["gradient_bytes"])


def test_transformer_costs_agrees_with_plan_on_three_counts():
    """The plan-against-building-blocks trial: the keyword form's error bar counted the job
    without its pipeline (t = 6 on 12 GPUs read as inside a node), it had no
    ``reduce_bytes`` (a misspelt or missing keyword was a bare TypeError), and it refused
    combined 1F1B's overlap where one microbatch builds no pair, which plan prices as
    without the overlap."""
    from fastpp.model import HARDWARE, transformer_costs
    from fastpp.model.errorbar import error_bar, regime

    model = Transformer(4, 768, 48, kv_heads=12, vocab=1000)
    config = RunConfig(seq=1536, global_batch=8, t=6, p=2, d=1)
    keywords = transformer_costs(model, config.build_schedule(), "H100-80GB", seq=1536, tp=6)
    assert keywords.error_bar == transformer_costs(model, hardware="H100-80GB",
                                                   config=config).error_bar
    assert keywords.error_bar == error_bar(regime(model, HARDWARE["H100-80GB"], 1536, 6, 12))
    assert keywords.error_bar.regime.tp == "across nodes"
    with pytest.raises(ScheduleTypeError, match="transformer_costs has no keyword 'reduce'"):
        transformer_costs(model, config.build_schedule(), seq=1536, reduce=2)
    one = RunConfig(seq=4096, global_batch=8, d=8, ep=8, schedule="combined-1f1b", m=1,
                    overlap=True)
    plain = one.replace(overlap=False)
    paired, unpaired = (transformer_costs("mixtral-8x7b", hardware="H100-80GB", config=c)
                        for c in (one, plain))
    np.testing.assert_array_equal(paired.f, unpaired.f)
    np.testing.assert_array_equal(paired.b, unpaired.b)
    row = plan("mixtral-8x7b", hardware="H100-80GB", config=one, workers=1).iloc[0]
    assert row["step_time"] == plan("mixtral-8x7b", hardware="H100-80GB", config=plain,
                                    workers=1).iloc[0]["step_time"]


def test_the_error_bar_lookups_check_their_arguments():
    """``regime(model, hardware, nan)`` raised StopIteration, a preset's name
    AttributeError, ``seq=0`` and ``t=0`` passed; ``error_bar`` of a tuple raised
    AttributeError, of rows without their columns KeyError."""
    from fastpp.model.errorbar import error_bar, regime

    model, h100 = MODELS["llama3-8b"], HARDWARE["H100-80GB"]
    assert regime("llama3-8b", "H100-80GB", 4096, 2, 16) == regime(model, h100, 4096, 2, 16)
    for seq, t in ((float("nan"), 1), (0, 1), (4096, 0)):
        with pytest.raises(ScheduleError, match=r"(seq|t) must be a positive integer"):
            regime(model, h100, seq, t)
    with pytest.raises(ScheduleTypeError, match=r"where must be a Regime"):
        error_bar(("H100", "<3B", "<=8K", "dense", "in node"))
    with pytest.raises(ScheduleError, match=r"groups must be regime_table's rows"):
        error_bar(regime(model, h100, 4096), [{}])


def test_for_gpus_refuses_a_data_parallel_degree_it_would_replace():
    from fastpp.model import RunConfig

    with pytest.raises(ScheduleError, match=r"d must be the 4 GPUs of 16 left by t \* cp \* p, "
                                            r"or not given \(got d=2\)"):
        RunConfig.for_gpus(16, seq=1024, global_batch=32, p=4, d=2)
    assert RunConfig.for_gpus(16, seq=1024, global_batch=32, p=4, d=4).d == 4


def test_plan_gives_the_rows_an_imbalance_their_ep_cannot_have_a_reason():
    """One imbalance for every ep row priced the ep = 1 rows at 4x the mean on their one
    rank (12.1 s for 6.5 s, 135 GB for 95): the busiest of ep ranks receives at most
    min(ep, experts / top_k) times the mean."""
    from fastpp.model import plan

    rows = plan("mixtral-8x7b", 64, seq=4096, global_batch=64, ep=[1, 2, 8], imbalance=2.0,
                schedules=["1f1b"], recompute="none")
    said = rows["reason"].str.contains("imbalance must be at most", regex=False)
    assert said[rows["ep"] == 1].mean() > 0.9 and not said[rows["ep"] > 1].any()
    assert rows.loc[said, "step_time"].isna().all()


def test_model_options_as_refused_or_taken_as_their_apis_do(capsys, tmp_path):
    """``device_bytes``' keywords took ``zero3="step"`` beside ``zero=1`` (RunConfig refuses
    it); the CLI refused ``--first-layers 0``, which ``plan`` takes; ``--recipe`` beside
    ``--recompute-modules`` was named by the API's parameters."""
    from fastpp.__main__ import main
    from fastpp.model import device_bytes

    with pytest.raises(ScheduleError, match=r"zero must be 3 with zero3='step' \(got zero=1\)"):
        device_bytes("llama3-8b", ONE, tp=2, dp=4, zero=1, zero3="step")
    assert main(["plan", "--model", "llama3-8b", "--gpus", "16", "--pp", "4", "--first-layers",
                 "0", "--schedules", "1f1b", "--recompute", "full", "--no-plots", "--out",
                 str(tmp_path), "--top", "1"]) == 0
    capsys.readouterr()
    assert main(["plan", "--model", "deepseek-v3", "--gpus", "256", "--recipe", "deepseek-v3",
                 "--recompute-modules", "moe"]) == 2
    assert ("--recipe must be given alone: it sets recompute_modules, fp8_cache and "
            "offload_modules (got --recipe='deepseek-v3' with --recompute-modules=['moe'])") \
        in capsys.readouterr().err


def test_stage_table_refuses_a_layout_the_model_cannot_run():
    """A hand-built RunGrid priced t = 3 on 32 heads (fractional bytes), ep = 3 on 8 experts,
    cp = 4096 on 4,096 tokens: stage_table checked only replicate, where transformer_costs
    and plan refuse them all."""
    from fastpp.model import stage_table

    mixtral, h100 = MODELS["mixtral-8x7b"], HARDWARE["H100-80GB"]
    stages = dict(config=[0, 0], layers=[16, 16], embedding=[True, False], loss=[False, True],
                  moe_layers=[16, 16])
    grid = dict(seq=4096, microbatch=[1], d=[8], p=[2], m=[1], recompute=[0])
    for given, said in ((dict(t=[3], ep=[8]), r"grid's t must divide the heads 32 and KV heads 8 "
                                              r"\(got t=3 in configuration 0\)"),
                        (dict(t=[2], ep=[3]), r"ep must divide the experts 8 \(got ep=3\) \(in "
                                              r"configuration 0 of the grid\)"),
                        (dict(t=[1], ep=[1], cp=[4096]), r"cp"),
                        (dict(t=[2], ep=[1], imbalance=2.0), r"imbalance must be at most"),
                        # (Megatron's MoE layer trains t > 1 under sequence parallelism alone)
                        (dict(t=[2], ep=[8]), r"sequence_parallel must be True for a model "
                                              r"with experts at t > 1")):
        with pytest.raises(ScheduleError, match=said):
            stage_table(mixtral, h100, RunGrid(**grid, **given), **stages)
    priced = stage_table(mixtral, h100, RunGrid(**grid, t=[2], ep=[8], sequence_parallel=True),
                         **stages)
    assert np.all(np.asarray(priced["f"]) > 0)


@pytest.mark.parametrize("given, message", [
    (dict(ep=3), r"ep must be 1 for a dense model \(llama2-7b has no experts; got ep=3\)"),
    (dict(ep=[2, 4]), r"ep must be 1 for a dense model .*got ep=\[2, 4\]\)"),
    (dict(etp=3), r"etp must be 1 for a dense model \(llama2-7b has no experts; got etp=3\)"),
    (dict(replicate=3), r"replicate must divide gpus=8 \(got replicate=3\)"),
    (dict(first_layers=100), r"first_layers \+ last_layers must be at most the layers 32 "
                             r"\(got first_layers=100, last_layers=None\)"),
    (dict(first_layers=[20, 30], last_layers=20), r"first_layers \+ last_layers must be at "
                                                  r"most the layers 32"),
])
def test_plan_refuses_an_axis_no_row_could_run(given, message):
    """Each printed "nothing fits" with every row's reason the flag's, and exit 0: values
    that no configuration of the grid can take are refused up front. A value beside one
    that runs keeps its rows' reasons."""
    from fastpp.model import plan

    with pytest.raises(ScheduleError, match=message):
        plan("llama2-7b", 8, seq=4096, global_batch=64, schedules=["1f1b"], **given)
    rows = plan("llama2-7b", 8, seq=4096, global_batch=64, schedules=["1f1b"], tp=2, pp=2,
                microbatch=1, recompute="none", ep=[1, 2])
    assert set(rows["ep"]) == {1, 2} and rows.loc[rows["ep"] == 2, "step_time"].isna().all()


@pytest.mark.parametrize("change, message", [
    (dict(hidden=2**47, heads=32), r"hidden must be at most 16,777,216 \(no model is larger\)"),
    (dict(vocab=2**62), r"vocab must be at most 2,147,483,648"),
    (dict(heads=10**30), r"heads must be at most 16,777,216"),
    (dict(experts=2**40, top_k=1), r"experts must be at most 16,777,216"),
])
def test_a_model_past_any_size_is_refused_where_it_is_made(change, message):
    """Each raised a raw OverflowError from NumPy's conversions, inside plan."""
    import dataclasses

    from fastpp.model import MODELS

    with pytest.raises(ScheduleError, match=message):
        dataclasses.replace(MODELS["llama3-8b"], **change)


def test_hardware_and_run_sizes_past_any_machine():
    import dataclasses

    from fastpp.model import HARDWARE, MODELS, RunConfig, plan

    with pytest.raises(ScheduleError, match=r"gpus_per_node must be at most 2,147,483,648"):
        dataclasses.replace(HARDWARE["H100-80GB"], gpus_per_node=10**30)
    with pytest.raises(ScheduleError, match=r"imbalance must be a number finite and >= 1"):
        RunConfig(seq=4096, global_batch=16, t=2, p=2, d=2, imbalance=10**310)
    for seed in (float("nan"), -1, True):
        with pytest.raises(ScheduleError, match=r"seed must be an integer in \[0, 2\*\*64\)"):
            plan(MODELS["llama3-8b"], 8, "H100-80GB", seq=4096, global_batch=8, tp=1, pp=1,
                 microbatch=1, schedules=["1f1b"], seed=seed)


def test_tp_overlap_needs_sequence_parallel():
    from fastpp.model import MODELS, RunConfig, plan, to_megatron

    with pytest.raises(ScheduleError, match=r"tp_overlap needs sequence_parallel"):
        RunConfig(seq=4096, global_batch=16, t=2, p=1, d=4, sequence_parallel=False,
                  tp_overlap=True)
    with pytest.raises(ScheduleError, match=r"tp_overlap needs sequence_parallel"):
        plan(MODELS["llama3-8b"], 8, "H100-80GB", seq=4096, global_batch=8,
             sequence_parallel=False, tp_overlap=True)
    # at t = 1 it has nothing to overlap, and Megatron refuses the flag there: not written
    one = RunConfig(seq=4096, global_batch=16, t=1, p=1, d=8, tp_overlap=True)
    assert "--tp-comm-overlap" not in to_megatron(one)


@pytest.mark.parametrize("field, value", [("op_overhead", []), ("handoff", [1e-3, 2e-3]),
                                          ("memory_bytes", []), ("host_step", np.ones(2))])
def test_a_gpus_scalar_fields_refuse_arrays(field, value):
    """An array (an empty one skipped every check) was taken, and pricing then failed in
    NumPy's broadcasting, or named ``capacity`` for ``memory_bytes``."""
    with pytest.raises(ScheduleError, match=f"{field} must be one number"):
        dataclasses.replace(fm.HARDWARE["H100-80GB"], **{field: value})
    with pytest.raises(ScheduleError, match="n.latency must be one number"):
        fm.Link("n", 4e10, [1e-5, 1e-3])


def test_the_overlap_reason_refuses_an_unknown_schedule():
    """It returned ``""``, "the overlap can run", for a schedule that does not exist."""
    with pytest.raises(ScheduleError, match=r"name must be one of .* \(got 'nope'\)"):
        fm.overlap_reason("nope", True, "none")


def test_a_plans_monte_carlos_show_progress(monkeypatch):
    """``plan --noise`` ran its Monte Carlos for 55 s without a word: with ``progress`` (the
    command line's) a bar counts them, past a second."""
    from fastpp.sweeps import robust

    made = []
    real = robust.progress_bar
    monkeypatch.setattr(robust, "progress_bar", lambda total, enabled, **options: made.append(
        (total, enabled, options)) or real(total, enabled, **options))
    for progress in (False, True):
        fm.plan("llama3-8b", 8, seq=2048, global_batch=16, tp=[1], pp=[2], schedules=["1f1b"],
                noise=fastpp.Noise(cov=0.1), samples=8, progress=progress)
    assert [enabled for _, enabled, _ in made] == [False, True] and made[0][0] > 0
    bar = real(5, True, **made[1][2])
    assert bar.total == 5 and bar.delay == 1.0  # (tqdm's: nothing shown under a second)
    bar.close()


def test_missing_published_data_is_named(monkeypatch, tmp_path):
    """validate() on a data folder without the tables said pandas' FileNotFoundError (and
    scripts/fidelity.py ended in its traceback): now the folder, how it is found and the file."""
    import os
    import subprocess
    import sys

    import pytest

    from fastpp.model import published, validate

    monkeypatch.setattr(published, "DATA", tmp_path)
    with pytest.raises(fastpp.ScheduleError, match=r"\$FASTPP_DATA, else shared/data .* must "
                       r"hold korthikanti_2022.csv \(got .*, without it\)"):
        validate(["korthikanti_2022"])
    run = subprocess.run([sys.executable, "scripts/fidelity.py", "--no-plots"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "FASTPP_DATA": str(tmp_path)})
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith("error: the published data folder ($FASTPP_DATA, else "
                                 "shared/data beside the repository) must hold "), run.stderr
    assert len(run.stderr.splitlines()) == 1


def test_plan_summary_shows_a_single_cp():
    """plan --cp 2: every row had cp = 2, so no column showed it, and t p d read as half the
    GPUs."""
    from fastpp.model import plan
    from fastpp.model.plan import summary

    rows = plan("llama2-7b", 8, seq=4096, global_batch=8, cp=2, tp=[1], pp=[2],
                schedules=["1f1b"], recompute="none", workers=1, progress=False)
    header = summary(rows, 1).splitlines()[3]
    assert header.split()[-1] == "cp", header
    lines = summary(plan("llama2-7b", 8, seq=4096, global_batch=8, tp=[1], pp=[2],
                         schedules=["1f1b"], recompute="none", workers=1,
                         progress=False), 1).splitlines()
    assert lines[3].split()[-1] == "error"  # no cp column where every row has cp = 1


def test_plan_takes_a_0d_array_axis_as_its_one_value():
    """A 0-d array (``tp=np.array(2)``) raised numpy's "iteration over a 0-d array", where
    ``np.int64(2)`` is one value; a 2-d one is refused naming the axis (a review)."""
    base = dict(seq=4096, global_batch=64, schedules=["1f1b"], recompute="none",
                microbatch=1, workers=1)
    for axis, value in (("tp", 2), ("pp", 2), ("microbatch", 1), ("cp", 1), ("m", 1),
                        ("zero", 1), ("first_layers", 16), ("recompute", "none"),
                        ("schedules", "1f1b")):
        one = plan_configurations("llama3-8b", 8, "H100-80GB", **{**base, axis: value})
        got = plan_configurations("llama3-8b", 8, "H100-80GB",
                                  **{**base, axis: np.array(value)})
        assert len(one) and got.equals(one), axis
    with pytest.raises(ScheduleError, match=r"tp must be one value or a flat list of them "
                                            r"\(got an array of shape \(1, 2\)\)"):
        plan_configurations("llama3-8b", 8, "H100-80GB", **{**base, "tp": np.array([[1, 2]])})
