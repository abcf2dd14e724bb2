"""The RunConfig path: the keyword forms take their defaults from RunConfig's fields, and a
RunGrid refuses a bad field by name."""

import inspect
import re

import numpy as np
import pytest

from fastpp import ScheduleError
from fastpp.model import RunConfig, RunGrid, device_bytes, transformer_costs
from fastpp.model.config import DEFAULTS

# the keywords spelled otherwise than the field
SPELLING = {"tp": "t", "dp": "d"}


@pytest.mark.parametrize("function", [transformer_costs, device_bytes])
def test_keyword_defaults_are_run_config_fields(function):
    given = {SPELLING.get(k, k): v.default
             for k, v in inspect.signature(function).parameters.items()
             if SPELLING.get(k, k) in DEFAULTS and k != "schedule"}  # a Schedule there
    assert len(given) == (11 if function is device_bytes else 25)  # (recipe: the last)
    assert given == {k: DEFAULTS[k] for k in given}


def _grid(**changes):
    one = np.ones(2, np.int64)
    return RunGrid(**{"seq": 512, "microbatch": one, "t": one, "d": one, "p": one, "m": one,
                      "recompute": one - 1, **changes})


@pytest.mark.parametrize("changes, message", [
    (dict(seq=0), r"seq must be a positive integer \(got seq=0\)"),
    (dict(t=np.ones(3, np.int64)), r"per-configuration fields must broadcast together"),
    (dict(t=np.array([1, 0])), r"t must hold positive integers \(got \[1, 0\]\)"),
    (dict(d=np.array([1.0, 2.0])), r"d must hold positive integers"),
    (dict(cp=True), r"cp must hold positive integers"),
    (dict(recompute=np.array([0, 3])), r"recompute must hold indices into RECOMPUTE"),
    (dict(zero=4), r"zero must hold ZeRO stages, 0 to 3 \(got 4\)"),
    (dict(overlap=np.array([0, 2])), r"overlap must hold bools"),
    (dict(sequence_parallel=1), r"sequence_parallel must be one of \[False, True\]"),
    (dict(cp_comm="tree"), r"cp_comm must be one of"),
    (dict(precision="fp4"), r"precision must be one of \['bf16', 'fp8'\]"),
    (dict(node_limit=0), r"node_limit must be a positive integer"),
    (dict(imbalance=0.5), r"imbalance must be a number finite and >= 1"),
])
def test_run_grid_names_a_bad_field(changes, message):
    with pytest.raises(ScheduleError, match=message):
        _grid(**changes)


def test_run_grid_of_a_run_config():
    run = RunConfig(seq=1024, global_batch=16, t=2, d=2, p=2, cp=2, recompute="full",
                    overlap=False, zero=3)
    grid = RunGrid.of(run)
    assert {k: getattr(grid, k).tolist() for k in ("t", "d", "p", "cp", "zero", "recompute")} \
        == {"t": [2], "d": [2], "p": [2], "cp": [2], "zero": [3], "recompute": [2]}
    assert grid.sequence_parallel is True and grid.blocking_handoffs is True


def test_stage_table_keyword_form_is_deprecated_and_prices_the_same():
    """stage_table's 0.1.0 keywords (blocking, c) still price, for one release, with a
    DeprecationWarning."""
    from fastpp.model import HARDWARE, Transformer, stage_table

    model = Transformer(4, 256, 8, ffn=512, vocab=512, swiglu=True, name="toy")
    one, two = np.ones(1, np.int64), np.full(1, 2, np.int64)
    stages = {"config": np.zeros(2, np.int64), "layers": np.array([2.0, 2.0]),
              "embedding": np.array([True, False]), "loss": np.array([False, True])}
    grid = RunGrid(seq=512, microbatch=two, t=two, d=one, p=two, m=one, recompute=one,
                   cp=two, zero=one + 2, sequence_parallel=True, blocking_handoffs=True)
    new = stage_table(model, HARDWARE["H100-80GB"], grid, **stages)
    with pytest.warns(DeprecationWarning, match="give the configurations as one"):
        old = stage_table(model, HARDWARE["H100-80GB"], 512, microbatch=two, t=two, d=one,
                          p=two, m=one, recompute=one, c=two, zero=one + 2,
                          sequence_parallel=True, blocking=True, **stages)
    assert new.keys() == old.keys() and all(np.array_equal(new[k], old[k]) for k in new)
    with pytest.raises(ScheduleError, match="not keywords"):
        stage_table(model, HARDWARE["H100-80GB"], grid, c=two, **stages)


def test_layer_parts_tp_is_deprecated_for_t():
    from fastpp.model import HARDWARE, MODELS, layer_parts

    model, hardware = MODELS["mixtral-8x7b"], HARDWARE["H100-80GB"]
    with pytest.warns(DeprecationWarning, match=r"layer_parts\(tp=...\) is deprecated"):
        old = layer_parts(model, hardware, seq=4096, tp=2, ep=4)
    assert old == layer_parts(model, hardware, seq=4096, t=2, ep=4)
    assert old != layer_parts(model, hardware, seq=4096, ep=4)
    with pytest.raises(ScheduleError, match="give t or tp, not both"), pytest.warns(
            DeprecationWarning):
        layer_parts(model, hardware, seq=4096, t=2, tp=2)


def test_parts_with_recipe_tp_is_deprecated_for_t():
    from fastpp.model import HARDWARE, MODELS, layer_parts
    from fastpp.model.recipes import make_recipe, parts_with_recipe

    model, hardware = MODELS["mixtral-8x7b"], HARDWARE["H100-80GB"]
    parts = layer_parts(model, hardware, seq=4096, t=2, ep=4)
    recipe = make_recipe(recompute_modules=["moe_act"])
    with pytest.warns(DeprecationWarning, match=r"parts_with_recipe\(tp=...\) is deprecated"):
        old = parts_with_recipe(parts, model, hardware, recipe, seq=4096, tp=2, ep=4)
    assert old == parts_with_recipe(parts, model, hardware, recipe, seq=4096, t=2, ep=4)
    assert old != parts_with_recipe(parts, model, hardware, recipe, seq=4096, ep=4)


def test_the_constants_moved_to_config_still_read_from_stages():
    from fastpp.model import config, stages

    assert (stages.ZERO, stages.ZERO3_GATHERS, stages.CP_COMMS) == \
        (config.ZERO, config.ZERO3_GATHERS, config.CP_COMMS)


@pytest.mark.parametrize("function, keywords, named", [
    (transformer_costs, dict(tp=2), "tp must be left out (got config= and tp=2;"),
    (transformer_costs, dict(recipe="deepseek-v3", fp8_cache=True),
     "recipe, fp8_cache must be left out (got config= and recipe='deepseek-v3', "
     "fp8_cache=True;"),
    (transformer_costs, dict(layers=[1, 1]), "layers must be left out (got config= and "
                                             "layers=[1, 1];"),
    (device_bytes, dict(zero=3), "zero must be left out (got config= and zero=3;"),
    (transformer_costs, dict(tp=np.array([2, 2])), "tp must be left out (got config= and "
                                                   "tp=array([2, 2]);"),
])
def test_a_keyword_beside_config_is_refused_not_dropped(function, keywords, named):
    run = RunConfig(seq=1024, global_batch=8, p=2)
    with pytest.raises(ScheduleError, match=rf"{function.__name__}: config replaces the "
                                            rf"run's keywords, so {re.escape(named)}"):
        function("llama2-7b", config=run, **keywords)
    # the defaults themselves, spelled out, are no conflict
    function("llama2-7b", config=run, tp=1, layout=None)


def test_device_bytes_refuses_a_config_the_model_cannot_run_as_transformer_costs_does():
    # llama2-7b has 32 heads (sequence parallelism off: it would refuse 1024 tokens over 3)
    run = RunConfig(seq=1024, global_batch=8, t=3, d=1, p=2, sequence_parallel=False)
    for function in (transformer_costs, device_bytes):
        with pytest.raises(ScheduleError, match=r"heads"):
            function("llama2-7b", config=run)
