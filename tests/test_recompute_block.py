"""Megatron's ``--recompute-method block``: full recomputation of each model chunk's first
``--recompute-num-layers`` layers only, the others keeping their activations.

Checked against the two runs it lies between: on hardware without host constants (H100's
preset), every per-layer term is linear in the layers, so a stage's backward and activations
under block recomputation of ``k`` of its ``L`` layers are those without recomputation plus
``k / L`` of the difference full recomputation makes. The forward does not change.
"""

import dataclasses

import numpy as np
import pytest

from fastpp import ScheduleError
from fastpp.model import Transformer, plan, transformer_costs
from fastpp.model.config import RunConfig, RunGrid
from fastpp.model.explain import explain
from fastpp.model.megatron import from_megatron
from fastpp.model.stages import _block_layers

MODEL = Transformer(16, 1024, 16, vocab=32000, name="block")
# 16 layers on p = 2 stages of m = 2 chunks: 4 layers a chunk
RUN = RunConfig(seq=2048, global_batch=16, t=2, p=2, d=1, m=2, schedule="interleaved-1f1b",
                microbatch=1, recompute="full", blocking_handoffs=True)


def costs(config):
    return transformer_costs(MODEL, hardware="H100-80GB", config=config)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_block_lies_on_the_line_between_none_and_full(k):
    none = costs(dataclasses.replace(RUN, recompute="none"))
    full = costs(RUN)
    block = costs(dataclasses.replace(RUN, recompute_method="block", recompute_layers=k))
    share = k / 4
    np.testing.assert_allclose(block.f, full.f, rtol=1e-12)
    np.testing.assert_allclose(block.f, none.f, rtol=1e-12)
    np.testing.assert_allclose(block.b, none.b + share * (full.b - none.b), rtol=1e-12)
    np.testing.assert_allclose(block.act, none.act + share * (full.act - none.act), rtol=1e-12)
    assert np.all(full.b > block.b) and np.all(block.b > none.b)
    # the layer brought back in its backward is a recomputed one: as full recomputation's
    np.testing.assert_array_equal(block.recomputed, full.recomputed)


def test_block_over_every_layer_is_full_and_uniform_recomputes_all():
    full = costs(RUN)
    for method, k in (("block", 4), ("block", 9), ("uniform", 1), ("uniform", 2)):
        other = costs(dataclasses.replace(RUN, recompute_method=method, recompute_layers=k))
        for name in ("f", "b", "act", "recomputed"):
            np.testing.assert_array_equal(getattr(other, name), getattr(full, name))
    # Megatron's --recompute-num-layers defaults to 1
    assert dataclasses.replace(RUN, recompute_method="block").block_layers == 1
    # the method acts on full recomputation alone
    selective = dataclasses.replace(RUN, recompute="selective", recompute_method="block")
    assert selective.block_layers is None


def test_the_chunks_dense_layers_are_recomputed_first():
    grid = RunGrid.of(dataclasses.replace(RUN, recompute_method="block", recompute_layers=3))

    def per_stage(x):
        return np.broadcast_to(x, (2,))

    # stage 0: 3 dense layers, then 1 with experts; stage 1: 4 with experts
    again, again_moe = _block_layers(grid, per_stage, np.array([4.0, 4.0]), np.array([1.0, 4.0]))
    assert again.tolist() == [3.0, 3.0] and again_moe.tolist() == [0.0, 3.0]
    grid = grid.replace(recompute_layers=4)
    again, again_moe = _block_layers(grid, per_stage, np.array([4.0, 4.0]), np.array([1.0, 4.0]))
    assert again.tolist() == [4.0, 4.0] and again_moe.tolist() == [1.0, 4.0]


def test_plan_prices_block_rows_as_the_config_does():
    block = dataclasses.replace(RUN, recompute_method="block", recompute_layers=2)
    row = plan(MODEL, hardware="H100-80GB", config=block, capacity=1e30).iloc[0]
    every = plan(MODEL, hardware="H100-80GB", config=RUN, capacity=1e30).iloc[0]
    keywords = plan(MODEL, hardware="H100-80GB", capacity=1e30,
                    **{**RUN.plan_keywords(), "recompute_layers": 2}).iloc[0]
    none = plan(MODEL, hardware="H100-80GB", capacity=1e30,
                config=dataclasses.replace(RUN, recompute="none")).iloc[0]
    assert none["step_time"] < row["step_time"] < every["step_time"]
    assert none["peak_memory"] > row["peak_memory"] > every["peak_memory"]
    assert (keywords["step_time"], keywords["peak_memory"]) == (row["step_time"],
                                                                row["peak_memory"])
    with pytest.raises(ScheduleError, match=r"recompute_layers must be a positive integer"):
        plan(MODEL, hardware="H100-80GB", **RUN.plan_keywords() | {"recompute_layers": 0})
    with pytest.raises(ScheduleError, match=r"recompute_layers"):
        RunGrid.of(RUN).replace(recompute_layers=-1)


def test_a_megatron_script_with_block_recomputation_prices_it():
    base = ("--num-layers 16 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
            "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 16 "
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
            "--padded-vocab-size 32000 --recompute-granularity full ")
    block = from_megatron(base + "--recompute-method block --recompute-num-layers 2", gpus=4)
    uniform = from_megatron(base + "--recompute-method uniform --recompute-num-layers 1",
                            gpus=4)
    assert block.config.block_layers == 2 and uniform.config.block_layers is None
    fast = explain(block.model, block.config, "H100-80GB", neighbours=0)
    slow = explain(uniform.model, uniform.config, "H100-80GB", neighbours=0)
    assert fast.row["step_time"] < slow.row["step_time"]
    # the FLOPs the GPUs ran: Megatron's count plus the second forward of 2 of 8 layers a
    # stage, against all 8 (a layer's forward a third of its forward and backward)
    gained = fast.recompute_tflops_per_gpu / fast.row["tflops_per_gpu"] - 1
    gained_all = slow.recompute_tflops_per_gpu / slow.row["tflops_per_gpu"] - 1
    assert gained == pytest.approx(gained_all * 2 / 8, rel=1e-12)
