"""llm-foundry's MPT benchmark (``fastpp.model.validate_foundry``): small models on 8 A100s
under FSDP, priced with the loss their code ran and a measured stand-in for their attention
kernel, nothing fitted."""

import dataclasses
import json

import numpy as np
import pytest
from helpers import needs_data

from fastpp.model import errorbar
from fastpp.model.explain import explain
from fastpp.model.stages import metric_bytes
from fastpp.model.validate_foundry import (
    DATASET,
    EXCLUDED,
    SOURCE,
    excluded,
    foundry_rows,
    hardware,
    mpt,
    run,
    table,
    validation_rows,
)

pytestmark = needs_data(SOURCE)


@pytest.fixture(scope="module")
def runs():
    pytest.importorskip("pandas")
    return foundry_rows()


def _priced_rows():
    return [row for row in table().to_dict("records") if row["gpu_type"] not in EXCLUDED]


def test_every_a100_run_is_priced_and_the_h100_runs_say_why_not(runs):
    """The benchmark's 105 runs: the 76 on A100 (41 on 80 GB, 35 on 40 GB) priced; the 29 on
    H100 (bf16 and FP8) not, each with its reason."""
    assert len(table()) == 105
    assert len(runs) == 76 and (runs["predicted"] > 0).all()
    assert runs["gpu_type"].value_counts().to_dict() == {"a100_80gb": 41, "a100_40gb": 35}
    out = excluded()
    assert len(out) == 29 and set(out["gpu_type"]) == set(EXCLUDED)
    assert (out["reason"] == EXCLUDED["h100_80gb"]).all()


def test_every_run_fits_where_it_ran(runs):
    """Every run ran, so each fits in its GPU's memory in the model too, with flash-attn's
    loss keeping the bf16 logits alone (``Transformer.loss="flash-attn"``), and with what
    the train metrics hold after each backward (``stages.metric_bytes``), which is the
    activations' peak of 24 runs (46 GiB at most). Priced with
    PyTorch's cross entropy on fp32 logits instead (4 bytes a logit kept, 12 at its
    backward), a third of them or more would not: the loss the runs' code ran is the one
    their memory allows."""
    assert runs["fits"].all()
    held = [(explain(mpt(row), run(row), hardware(row["gpu_type"]), neighbours=0).row,
             float(metric_bytes(mpt(row), row["seq_len"] * row["micro_batch"], 1)))
            for row in _priced_rows()]
    peaks = [after for priced, after in held if priced["activation_bytes"] == after]
    assert len(peaks) == 24 and 45 * 2**30 < max(peaks) < 47 * 2**30
    misfits = sum(not explain(dataclasses.replace(mpt(row), loss="cross-entropy"), run(row),
                              hardware(row["gpu_type"]), neighbours=0).row["fits"]
                  for row in _priced_rows())
    assert misfits >= 76 / 3


def test_the_step_time_within_eight_percent(runs):
    """The measured figure, 6.7% mean step error, nothing fitted on these rows: the bound a
    regression must not cross (issue 26's 5% is the xfail below)."""
    error = runs["step_error"].abs().mean()
    assert error <= 0.08, error


@pytest.mark.xfail(strict=True, reason="6.7% step MAPE: with head dimension 128 the steps at "
                                       "32K-64K tokens are priced 16-26% long (likely the "
                                       "stand-in kernel's speed at 128); at 512-1K tokens "
                                       "760M's are priced 13-16% short (docs/fidelity.md)")
def test_the_step_time_within_five_percent(runs):
    assert runs["step_error"].abs().mean() <= 0.05


def test_the_attention_kernel_is_what_brings_them_close():
    """Priced with A100's default kernel (FlashAttention-2, 1.5-2.4 times the stand-in's
    speed at their sequences) the same runs are priced over a fifth short on average, and
    every run at 32K-64K tokens over 30% short: the kernel is the mechanism, not a
    constant."""
    errors, long = [], []
    for row in _priced_rows():
        priced = explain(mpt(row), run(row), hardware(row["gpu_type"], "FlashAttention-2"),
                         neighbours=0).row
        error = row["value"] / (priced["tokens_per_s"] / row["gpus"]) - 1.0
        errors.append(error)
        if row["seq_len"] >= 32768:
            long.append(error)
    assert np.mean(np.abs(errors)) > 0.2 and max(long) < -0.3


def test_the_train_metrics_are_what_the_short_runs_lacked():
    """Composer computes the model's two train metrics on every microbatch's logits after its
    backward (``RunConfig.train_metrics``): 14 bytes a logit each, 50,368 logits a token,
    which weigh most where a token's products are fewest. Without them the 125M and 350M
    runs at 512-2,048 tokens are priced 16% short on average and the table 9.5% off; with
    them 6% and 6.7%."""
    short, without = [], []
    for row in _priced_rows():
        bare = explain(mpt(row), dataclasses.replace(run(row), train_metrics=0),
                       hardware(row["gpu_type"]), neighbours=0).row
        error = row["value"] / (bare["tokens_per_s"] / row["gpus"]) - 1.0
        without.append(abs(error))
        if row["model"] in ("MPT-125m", "MPT-350m") and row["seq_len"] <= 2048:
            priced = explain(mpt(row), run(row), hardware(row["gpu_type"]), neighbours=0).row
            short.append((error, row["value"] / (priced["tokens_per_s"] / row["gpus"]) - 1.0))
    assert np.mean(without) > 0.09
    before, after = np.mean(short, axis=0)
    assert len(short) == 13 and before < -0.15 and -0.07 < after < 0


def test_a_composer_run_s_neighbours_keep_its_train_metrics():
    """``explain``'s faster neighbours are priced with the run's train metrics: none is the
    run itself under another price (each changes something, and is faster than the run)."""
    row = next(r for r in _priced_rows() if r["model"] == "MPT-125m" and r["seq_len"] == 512
               and r["gpu_type"] == "a100_80gb")
    small = dataclasses.replace(run(row), microbatch=4)  # (its own is the fastest)
    found = explain(mpt(row), small, hardware(row["gpu_type"]), neighbours=5)
    assert found.neighbours
    assert all(n["changed"] >= 1 and n["step_time"] < found.row["step_time"]
               for n in found.neighbours)


def test_the_40gb_gpus_run_their_own_memory_rate():
    """The 40 GB A100's HBM2 (1,555 GB/s) against the 80 GB's HBM2e (2,039): the preset's
    memory-bound rate scaled by their ratio, the products' speed unchanged."""
    small, large = hardware("a100_40gb"), hardware("a100_80gb")
    assert small.memory_bandwidth / large.memory_bandwidth == pytest.approx(1555 / 2039)
    assert (small.peak, small.efficiency) == (large.peak, large.efficiency)
    assert small.memory_bytes * 2 == large.memory_bytes


def test_a_composer_job_s_bar_is_composer_s():
    """The runs are the checks of the "composer" framework: the shipped table's composer
    groups hold them alone, and no other framework's groups hold any of them."""
    groups = json.loads(errorbar.TABLE.read_text())["regimes"]
    own = [g for g in groups if g["framework"] == "composer"]
    assert own and all(g["datasets"] == [DATASET] for g in own)
    assert not any(DATASET in g["datasets"] for g in groups if g["framework"] != "composer")
    assert sum(g["rows"] for g in own) == len(validation_rows())
