"""torchtitan's own benchmark runs (``fastpp.model.validate_torchtitan``): priced as a user of
torchtitan prices them, checks of a stack the cost model was not calibrated on."""

import json

import pytest

from fastpp.model import errorbar
from fastpp.model.errorbar import error_bar
from fastpp.model.torchtitan import from_torchtitan
from fastpp.model.validate_torchtitan import DATASET, job_text, torchtitan_rows, validation_rows


@pytest.fixture(scope="module")
def runs():
    pytest.importorskip("pandas")
    return torchtitan_rows()


def test_every_run_is_read_and_priced(runs):
    """All 18 rows read as their job configs say (the degrees, the microbatch a pipeline
    runs) and priced; where fastpp stands against them is in docs/fidelity.md."""
    assert len(runs) == 18 and (runs["predicted"] > 0).all()
    for row in runs.to_dict("records"):
        config = from_torchtitan(job_text(row), gpus=row["gpus"], model=row["model"]).config
        assert (config.t, config.p, config.cp, config.d) == (
            row["tp"], row["pp"], row["cp"], row["dp"])
        assert config.microbatch == row["microbatch"]
        assert config.precision == ("fp8" if row["fp8"] else "bf16")


@pytest.mark.xfail(strict=True, reason="fastpp prices torchtitan's steps 5-45% short (the "
                                       "runs took 1.06-1.83 times as long; step MAPE 25.2%): "
                                       "the compiled kernels moving more than fastpp's fused "
                                       "count or the eager ones less (compile's gain priced at "
                                       "26%, measured 16%), and the GPUs' 500 W power limit "
                                       "not priced")
def test_torchtitan_runs_within_fifteen_percent(runs):
    """Issue 26's bar for a table nothing was fitted on. The runs' error bars, torchtitan's
    own checks since they are in the bars, are held to them in test_fidelity.py (left out,
    every row is extrapolated on its framework)."""
    assert runs["step_error"].abs().mean() <= 0.15


def test_a_torchtitan_job_s_bar_is_torchtitan_s(runs):
    """Each run's bar is the one torchtitan's checks alone give (21-34%), not the one
    Megatron's runs give in its regime (7.6-44%, which held 1 of the 18 runs until 6
    December 2026): the shipped table's torchtitan groups hold torchtitan's rows only."""
    groups = json.loads(errorbar.TABLE.read_text())["regimes"]
    own = [g for g in groups if g["framework"] == "torchtitan"]
    assert own and all(g["datasets"] == [DATASET] for g in own)
    assert (runs["extrapolated"] == "").all()
    for (_, name, _, _, _, where), bar in zip(validation_rows(), runs["expected_error"],
                                              strict=True):
        assert bar == error_bar(where, own).expected
        assert error_bar(where._replace(framework="megatron")).expected != bar, name


def test_the_stack_s_slowdown_is_steady_within_a_regime():
    """Each run divided by ``1 + bias`` of the other 17 runs' bars in its regime: the step
    error falls from 25.2% to 9.0% on average (docs/fidelity.md; 41.3% to 15.2% before the
    runs were priced on their GPUs and kernels). Not applied: one benchmark is no
    calibration of torchtitan as a user runs it; shown, because within a regime its
    slowdown is steady."""
    from fastpp.model.errorbar import regime_table, step_error
    from fastpp.model.validate import validate

    frame = validate([DATASET])
    regimes = {name: where for _, name, _, _, _, where in validation_rows()}
    plain, corrected = [], []
    for i, row in enumerate(frame.itertuples()):
        error = float(step_error([row.error], [row.quantity])[0])
        bias = error_bar(regimes[row.row], regime_table(frame.drop(frame.index[i]))).bias
        plain.append(abs(error))
        corrected.append(abs((1 + error) / (1 + bias) - 1))
    assert sum(corrected) < 0.5 * sum(plain)


def test_the_counted_memory_is_a_floor_on_what_the_runs_reserved(runs):
    """What a plan row counts (``peak_memory``: the tensors alive) is below what each of the
    18 runs reserved (torchtitan's ``memory_gib``: the caching allocator's peak reserve), by
    6-28% (15% on average): the allocator's reserve and fragmentation, NCCL's buffers and
    the microbatch outputs the 405B pipelines kept, none counted (docs/fidelity.md). The
    memory error bar (``expected_memory_error``, the counted activations against the bytes
    PyTorch saves) is under a percent where these runs have one: it is no bar on a run's
    reserved memory, as ``plan``'s docstring and ``explain`` say."""
    below = 1 - runs["predicted_memory_gib"] / runs["memory_gib"]
    assert below.between(0.05, 0.29).all(), below.round(3).tolist()
    assert 0.14 < below.mean() < 0.16
