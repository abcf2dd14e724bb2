"""Full recomputation of some layers only: Megatron's ``--recompute-method block`` (each
model chunk's first ``--recompute-num-layers``) and torchtitan's layer-wise selective
checkpointing (every ``selective_ac_option``-th layer of each chunk), the others keeping their
activations.

Checked against the two runs they lie between: on hardware without host constants (H100's
preset), every per-layer term is linear in the layers, so a stage's backward and activations
with ``r`` of its ``L`` layers recomputed are those without recomputation plus ``r / L`` of
the difference full recomputation makes. The forward does not change.
"""

import dataclasses

import numpy as np
import pytest

from fastpp import ScheduleError
from fastpp.model import Transformer, plan, transformer_costs
from fastpp.model.config import RunConfig, RunGrid
from fastpp.model.explain import explain
from fastpp.model.megatron import from_megatron, to_megatron
from fastpp.model.stages import recomputed_layers
from fastpp.model.torchtitan import from_torchtitan, to_torchtitan

MODEL = Transformer(16, 1024, 16, vocab=32000, name="block")
# 16 layers on p = 2 stages of m = 2 chunks: 4 layers a chunk
RUN = RunConfig(seq=2048, global_batch=16, t=2, p=2, d=1, m=2, schedule="interleaved-1f1b",
                microbatch=1, recompute="full", blocking_handoffs=True)


def costs(config):
    return transformer_costs(MODEL, hardware="H100-80GB", config=config)


@pytest.mark.parametrize("method, k, r", [("block", 1, 1), ("block", 2, 2), ("block", 3, 3),
                                          ("interval", 2, 2), ("interval", 3, 1),
                                          ("interval", 4, 1), ("interval", 5, 0)])
def test_some_layers_lie_on_the_line_between_none_and_full(method, k, r):
    """``r`` of a chunk's 4 layers recomputed: the first ``k``, or every ``k``-th."""
    none = costs(dataclasses.replace(RUN, recompute="none"))
    full = costs(RUN)
    some = costs(dataclasses.replace(RUN, recompute_method=method, recompute_layers=k))
    share = r / 4
    np.testing.assert_allclose(some.f, full.f, rtol=1e-12)
    np.testing.assert_allclose(some.f, none.f, rtol=1e-12)
    np.testing.assert_allclose(some.b, none.b + share * (full.b - none.b), rtol=1e-12)
    np.testing.assert_allclose(some.act, none.act + share * (full.act - none.act), rtol=1e-12)
    # the layer brought back in its backward is a recomputed one: as full recomputation's
    np.testing.assert_array_equal(some.recomputed, full.recomputed if r else none.recomputed)


def test_every_layer_of_a_chunk_is_full_recomputation():
    full = costs(RUN)
    for method, k in (("block", 4), ("block", 9), ("interval", 1), ("uniform", 1),
                      (None, 1)):
        other = costs(dataclasses.replace(RUN, recompute_method=method, recompute_layers=k))
        for name in ("f", "b", "act", "recomputed"):
            np.testing.assert_array_equal(getattr(other, name), getattr(full, name))
    # the frameworks' default counts: Megatron's --recompute-num-layers 1, torchtitan's "2"
    assert dataclasses.replace(RUN, recompute_method="block").partial_recompute == {
        "recompute_method": "block", "recompute_layers": 1}
    assert dataclasses.replace(RUN, recompute_method="interval").partial_recompute == {
        "recompute_method": "interval", "recompute_layers": 2}
    # a method acts on full recomputation alone: without it, refused (as plan and Megatron
    # refuse it) rather than carried and dropped; uniform (every layer) is any run's
    with pytest.raises(ScheduleError, match="recompute must be 'full'"):
        dataclasses.replace(RUN, recompute="selective", recompute_method="block")
    uniform = dataclasses.replace(RUN, recompute="selective", recompute_method="uniform")
    assert uniform.partial_recompute == {"recompute_method": None, "recompute_layers": None}


@pytest.mark.parametrize("k, checkpoints", [(2, 2), (3, 2), (4, 1), (5, 1)])
def test_uniform_groups_keep_one_input_a_group_and_bring_a_group_back(k, checkpoints):
    """Megatron's ``--recompute-method uniform --recompute-num-layers k``
    (``megatron/core/recompute.py``): a chunk's 4 layers in checkpoints of ``k`` layers, the
    last one shorter. A chunk keeps one input (``2 s b h / t`` bytes with sequence
    parallelism) a checkpoint, not a layer; a checkpoint's backward re-runs its layers'
    forwards at once, so its working set is each of its layers' bytes without recomputation,
    its input aside. The times are full recomputation's. Until 6 December 2026 every ``k``
    was priced as ``k = 1``."""
    none = costs(dataclasses.replace(RUN, recompute="none"))
    full = costs(RUN)
    some = costs(dataclasses.replace(RUN, recompute_method="uniform", recompute_layers=k))
    m, layers, one_input = RUN.m, 4, 2.0 * RUN.seq * RUN.microbatch * MODEL.hidden / RUN.t
    np.testing.assert_array_equal(some.f, full.f)
    np.testing.assert_array_equal(some.b, full.b)
    np.testing.assert_allclose(some.act, full.act - m * (layers - checkpoints) * one_input,
                               rtol=1e-12)
    # a layer's bytes without recomputation, from the two runs it lies between
    stored = (none.act - full.act) / (m * layers) + one_input
    np.testing.assert_allclose(some.recomputed, min(k, layers) * stored - one_input,
                               rtol=1e-12)
    # Megatron's flags carry the groups both ways
    run = dataclasses.replace(RUN, recompute_method="uniform", recompute_layers=k,
                              blocking_handoffs=False)
    flags = [str(x) for x in to_megatron(run, MODEL)]
    assert f"--recompute-method uniform --recompute-num-layers {k}" in " ".join(flags)
    assert from_megatron(flags, gpus=run.gpus).config.partial_recompute == (
        run.partial_recompute)


def test_a_chunks_dense_layers_lead_it():
    """Stage 0: 3 dense layers, then 1 with experts; stage 1: 4 with experts."""
    layers, dense = np.array([4.0, 4.0]), np.array([3.0, 0.0])
    for method, k, again, moe in (("block", 3, [3, 3], [0, 3]), ("block", 4, [4, 4], [1, 4]),
                                  ("interval", 2, [2, 2], [1, 2]),
                                  ("interval", 3, [1, 1], [0, 1]),
                                  (None, None, [4, 4], [1, 4])):
        got = recomputed_layers(method, k, layers, dense)
        assert [x.tolist() for x in got] == [again, moe], (method, k)


def test_plan_prices_block_rows_as_the_config_does():
    block = dataclasses.replace(RUN, recompute_method="block", recompute_layers=2)
    row = plan(MODEL, hardware="H100-80GB", config=block, capacity=1e30).iloc[0]
    every = plan(MODEL, hardware="H100-80GB", config=RUN, capacity=1e30).iloc[0]
    keywords = plan(MODEL, hardware="H100-80GB", capacity=1e30,
                    **{**RUN.plan_keywords(), "recompute_method": "block",
                       "recompute_layers": 2}).iloc[0]
    none = plan(MODEL, hardware="H100-80GB", capacity=1e30,
                config=dataclasses.replace(RUN, recompute="none")).iloc[0]
    assert none["step_time"] < row["step_time"] < every["step_time"]
    assert none["peak_memory"] > row["peak_memory"] > every["peak_memory"]
    assert (keywords["step_time"], keywords["peak_memory"]) == (row["step_time"],
                                                                row["peak_memory"])
    bad = {"recompute_method": "block", "recompute_layers": 0}
    with pytest.raises(ScheduleError, match=r"recompute_layers must be a positive integer"):
        plan(MODEL, hardware="H100-80GB", **RUN.plan_keywords() | bad)
    with pytest.raises(ScheduleError, match=r"recompute_method and recompute_layers go "
                                            r"together \(got recompute_method=None, "
                                            r"recompute_layers=2\)"):
        RunGrid.of(RUN).replace(recompute_layers=2)
    with pytest.raises(ScheduleError, match=r"recompute_method must be one of"):
        RunConfig(seq=2048, global_batch=16, recompute="full", recompute_method="blocks")


def test_a_megatron_script_with_block_recomputation_prices_it():
    base = ("--num-layers 16 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
            "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 16 "
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
            "--padded-vocab-size 32000 --recompute-granularity full ")
    block = from_megatron(base + "--recompute-method block --recompute-num-layers 2", gpus=4)
    uniform = from_megatron(base + "--recompute-method uniform --recompute-num-layers 1",
                            gpus=4)
    assert block.config.partial_recompute["recompute_layers"] == 2
    assert uniform.config.partial_recompute["recompute_method"] is None
    fast = explain(block.model, block.config, "H100-80GB", neighbours=0)
    slow = explain(uniform.model, uniform.config, "H100-80GB", neighbours=0)
    assert fast.row["step_time"] < slow.row["step_time"]
    # the FLOPs the GPUs ran: Megatron's count plus the second forward of 2 of 8 layers a
    # stage, against all 8 (a layer's forward a third of its forward and backward)
    gained = fast.recompute_tflops_per_gpu / fast.row["tflops_per_gpu"] - 1
    gained_all = slow.recompute_tflops_per_gpu / slow.row["tflops_per_gpu"] - 1
    assert gained == pytest.approx(gained_all * 2 / 8, rel=1e-12)


def test_torchtitan_layer_checkpointing_is_every_kth_layer():
    """selective_ac_option = "k": torchtitan wraps each chunk's k-th, 2k-th, ... block in a
    full checkpoint (_apply_layer_sac, its count reset per model part)."""
    job = ('[parallelism]\npipeline_parallel_degree = 2\n'
           'pipeline_parallel_schedule = "Interleaved1F1B"\n'
           'pipeline_parallel_layers_per_stage = 4\n'
           # (torchtitan's default weighs the embedding and output as a layer each: 5 stages,
           # which 2 ranks cannot share)
           'pipeline_parallel_first_stage_less_layers = 0\n'
           'pipeline_parallel_last_stage_less_layers = 0\n'
           'pipeline_parallel_microbatch_size = 1\n'
           '[training]\nlocal_batch_size = 16\nglobal_batch_size = 16\nseq_len = 2048\n'
           '[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "3"\n')
    config = from_torchtitan(job, gpus=2, model=MODEL)[1]
    assert (config.recompute, config.recompute_method, config.recompute_layers) == (
        "full", "interval", 3)
    assert from_torchtitan(to_torchtitan(config, MODEL), gpus=2, model=MODEL)[1] == config
    one = from_torchtitan(job.replace('"3"', '"1"'), gpus=2, model=MODEL)[1]
    assert (one.recompute, one.recompute_method) == ("full", None)
    # one of each chunk's 4 layers, as the interval's own pricing
    priced = transformer_costs(MODEL, hardware="H100-80GB", config=config)
    none = costs(dataclasses.replace(config, recompute="none", recompute_method=None,
                                     recompute_layers=None))
    full = costs(dataclasses.replace(config, recompute_method=None, recompute_layers=None))
    np.testing.assert_allclose(priced.b, none.b + (full.b - none.b) / 4, rtol=1e-12)
    with pytest.raises(ScheduleError, match=r"not every k-th: recompute_method must be None, "
                                            r"'uniform' or 'block' \(got 'interval'\)"):
        to_megatron(config, MODEL)


def test_plan_reads_the_method_as_run_config_does():
    """plan's recompute_method: None or "uniform" every layer (uniform's groups at the
    times of one layer a group, with more bytes); "block" and "interval" with the
    frameworks' default counts (1 and 2); refused without full-recomputation rows, and a
    count without a method."""
    keywords = RUN.plan_keywords() | {"recompute_method": None, "recompute_layers": None}

    def row(**more):
        return plan(MODEL, hardware="H100-80GB", capacity=1e30, **keywords | more).iloc[0]

    every = row()
    groups = row(recompute_method="uniform", recompute_layers=3)
    assert groups["step_time"] == every["step_time"]
    assert groups["peak_memory"] > every["peak_memory"]
    assert row(recompute_method="uniform", recompute_layers=1).equals(every)
    assert row(recompute_method="block")["step_time"] == row(
        recompute_method="block", recompute_layers=1)["step_time"] < every["step_time"]
    assert row(recompute_method="interval")["step_time"] == row(
        recompute_method="interval", recompute_layers=2)["step_time"] < every["step_time"]
    with pytest.raises(ScheduleError, match=r"recompute_method acts on recompute='full' rows: "
                                            r"recompute must include 'full' \(got "
                                            r"recompute=\['none'\] with recompute_method="
                                            r"'block'\)"):
        row(recompute=["none"], recompute_method="block")
    with pytest.raises(ScheduleError, match=r"recompute_layers needs recompute_method "
                                            r"'uniform', 'block' or 'interval' \(got "
                                            r"recompute_layers=2 alone\)"):
        row(recompute_layers=2)
    with pytest.raises(ScheduleError, match=r"recompute_method must be one of"):
        row(recompute_method="blocks")


def test_explain_prices_neighbours_as_it_lists_them():
    """A torchtitan interval run on a schedule Megatron names is explained with fields, not
    Megatron's flags (which cannot state it); the run's own method reaches its neighbours only
    where it acts (full recomputation)."""
    config = dataclasses.replace(RUN, microbatch=1, recompute_method="interval",
                                 recompute_layers=2, blocking_handoffs=False)
    found = explain(MODEL, config, "H100-80GB", neighbours=3)
    assert found.neighbours and all("--" not in n["changes"] for n in found.neighbours)
    # Megatron's uniform groups of 2: a neighbour recomputing fully keeps them
    groups = dataclasses.replace(RUN, recompute_method="uniform", recompute_layers=2,
                                 blocking_handoffs=False)  # (blocking: Megatron needs p > 2)
    full = [n for n in explain(MODEL, groups, "H100-80GB", neighbours=20).neighbours
            if n["recompute"] == "full"]
    assert full and all("--recompute-num-layers" not in n["changes"] for n in full)
    # a run Megatron refuses (two ranks, interleaved, blocking): its neighbours as fields
    refused = explain(MODEL, RUN, "H100-80GB", neighbours=3).neighbours
    assert refused and all("--" not in n["changes"] for n in refused)


def test_uniform_groups_with_mtp_are_refused_as_megatron_refuses_them():
    """Megatron's MTP module asserts ``recompute_num_layers == 1`` under uniform
    recomputation (``multi_token_prediction.py``); fastpp had priced the groups."""
    flags = ("--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 "
             "--vocab-size 1000 --micro-batch-size 1 --global-batch-size 8 --mtp-num-layers 1 "
             "--recompute-granularity full --recompute-method uniform ")
    with pytest.raises(ScheduleError, match=r"--recompute-num-layers must be 1 with "
                                            r"--recompute-method uniform and --mtp-num-layers"):
        from_megatron(flags + "--recompute-num-layers 2", gpus=1)
    model = dataclasses.replace(MODEL, mtp_depth=1)
    run = dataclasses.replace(RUN, recompute_method="uniform", recompute_layers=2)
    with pytest.raises(ScheduleError, match=r"recompute_layers must be 1 with uniform "
                                            r"recomputation of a model with MTP modules"):
        transformer_costs(model, hardware="H100-80GB", config=run)
    assert from_megatron(flags + "--recompute-num-layers 1", gpus=1).config.recompute == "full"
