"""llm-foundry's MPT benchmark (``fastpp.model.validate_foundry``): small models on 8 A100s
under FSDP, priced with the attention kernel and the loss their code ran, nothing fitted."""

import dataclasses

import numpy as np
import pytest
from helpers import needs_data

from fastpp.model import errorbar
from fastpp.model.explain import explain
from fastpp.model.validate_foundry import (
    DATASET,
    SOURCE,
    excluded,
    foundry_rows,
    hardware,
    mpt,
    run,
    validation_rows,
)

pytestmark = needs_data(SOURCE)


@pytest.fixture(scope="module")
def runs():
    pytest.importorskip("pandas")
    return foundry_rows()


def test_every_a100_run_is_priced_and_the_h100_runs_say_why_not(runs):
    """76 A100 rows (41 on 80 GB, 35 on 40 GB) priced; the 29 H100 rows (bf16 and FP8) not,
    each with its reason: llm-foundry's Triton kernel was never measured on H100."""
    assert len(runs) == 76 and (runs["predicted"] > 0).all()
    assert runs["gpu_type"].value_counts().to_dict() == {"a100_80gb": 41, "a100_40gb": 35}
    out = excluded()
    assert len(out) == 29 and set(out["gpu_type"]) == {"h100_80gb"}
    assert out["reason"].str.contains("never measured on H100").all()


def test_every_run_fits_where_it_ran(runs):
    """Every run ran, so each fits in its GPU's memory in the model too: with flash-attn's
    loss keeping the bf16 logits alone (``Transformer.loss="flash-attn"``). Priced with
    PyTorch's cross entropy on fp32 logits instead, 32 of them would not fit."""
    from fastpp.model.validate_foundry import _table

    assert runs["fits"].all()
    misfits = 0
    for row in _table().to_dict("records"):
        if row["gpu_type"] == "h100_80gb":
            continue
        model = dataclasses.replace(mpt(row), loss="cross-entropy")
        misfits += not explain(model, run(row), hardware(row["gpu_type"]),
                               neighbours=0).row["fits"]
    assert misfits == 32


def test_the_step_within_ten_and_a_half_percent(runs):
    """The measured figure: 9.9% mean step error, with no constant fitted on these rows (the
    bound a regression must not cross; issue 26's 5% is the xfail below)."""
    error = runs["step_error"].abs().mean()
    assert error <= 0.105, error


@pytest.mark.xfail(strict=True, reason="9.9% step MAPE: at 32K-64K tokens, past the 16K the "
                                       "Triton kernel was measured to, the steps are priced "
                                       "up to 26% long; at 512-2K tokens short, the smaller "
                                       "the model the more (125M: 17-24%; docs/fidelity.md)")
def test_the_step_within_five_percent(runs):
    assert runs["step_error"].abs().mean() <= 0.05


def test_the_kernel_the_code_ran_is_what_brings_them_close():
    """Priced with A100's default kernel (FlashAttention-2, 1.5-2.4 times the Triton kernel's
    speed at their sequences) the same runs are 27% short on average, 32-46% at 32K-64K
    tokens: the kernel llm-foundry's ``attn_impl: triton`` runs is the mechanism, not a
    constant."""
    from fastpp.model.hardware import HARDWARE
    from fastpp.model.validate_foundry import GPU_MEMORY, _table

    errors, long = [], []
    for row in _table().to_dict("records"):
        if row["gpu_type"] == "h100_80gb":
            continue
        gpu = dataclasses.replace(HARDWARE["A100-80GB"], memory_bytes=GPU_MEMORY[row["gpu_type"]])
        priced = explain(mpt(row), run(row), gpu, neighbours=0).row
        error = float(row["value"]) / (priced["tokens_per_s"] / row["gpus"]) - 1.0
        errors.append(error)
        if row["seq_len"] >= 32768:
            long.append(error)
    assert np.mean(np.abs(errors)) > 0.25 and max(long) < -0.3


def test_a_composer_job_s_bar_is_composer_s():
    """The runs are the checks of the "composer" framework: the shipped table's composer
    groups hold them alone, and Megatron's groups none of them."""
    import json

    groups = json.loads(errorbar.TABLE.read_text())["regimes"]
    own = [g for g in groups if g["framework"] == "composer"]
    assert own and all(g["datasets"] == [DATASET] for g in own)
    assert not any(DATASET in g["datasets"] for g in groups if g["framework"] != "composer")
    assert sum(g["rows"] for g in own) == len(validation_rows())
