"""Runs beyond shared/data: the out-of-sample review of docs/fidelity.md, recountable.

``tests/data/out_of_sample.csv`` holds the 18 published training runs that review priced
(Megatron-Bridge's 25.11 performance summary, Llama 3 405B's Table 4, MT-NLG 530B, BLOOM 176B,
Nemotron-4 340B), each with its layout, the published metric and its source, and a
``not_published`` note naming every field the source leaves out and the value taken for it.
Each run is priced here as a user would: a ``RunConfig`` of the published layout (fastpp's
defaults where a field is unpublished; an interleaved schedule whose depth is unstated at
``m = 2``, the smallest) through ``explain``, on the GPU's preset (with its FP8 products
priced with per-tensor current scaling where the table says FP8-CS). Nothing is fitted on
these rows.

The throughput error is signed (+: fastpp's faster); a bar (``expected_error``) is a relative
error of the step time, so each row is within its bar when its step-time error
(``errorbar.step_error``) is. Measured with the code of 7 December 2026 (3f62379):

- mean absolute throughput error 15.2% (13.4% of the step time);
- 12 of 18 within their bar, 15 within two;
- 7 of 18 priced as not fitting: the four GB200 and GB300 70B and 405B runs (their recipes
  offload 10-92 layers' activations to the CPU, which fastpp does not price) and Llama 3's
  three (116 and 88 GB of 80: its memory savings are not priced).

At the review's code (1b7cbac's parent: its model, the bars as they were) the same rows give
16.4%, 8 within one bar and 11 within two, 8 not fitting; its MT-NLG, BLOOM, Llama 3 and
Nemotron errors are the review's to 0.1%. Since then a pipeline hand-off without sequence
parallelism is priced whole (ecd3126: MT-NLG +27.7% -> +22.5%, BLOOM +18.4% -> +15.7%), and
an unchecked stack's bar is at least each checked stack's (1b7cbac: MT-NLG's and BLOOM's 5.2%
and 3.9% -> 27.1%).

The counts are a floor (a regression guard), not a target: a change that moves them up is
welcome, and the figures above should then be updated.
"""

import csv
import dataclasses
import math
import os

import pytest

from fastpp.model import HARDWARE, MODELS, RunConfig, Transformer
from fastpp.model.errorbar import step_error
from fastpp.model.explain import explain

CSV = os.path.join(os.path.dirname(__file__), "data", "out_of_sample.csv")
WITHIN_ONE, WITHIN_TWO = 12, 15  # of 18, measured (the module docstring)
NOT_FITTING = 7
SHAPE = ("layers", "hidden", "heads")
BOOL = ("tied_embeddings", "dropout", "flash_attention", "fp8_current_scaling",
        "sequence_parallel")
INT = ("gpus", "seq", "global_batch", "microbatch", "t", "p", "cp", "d", "ep", "vp", "zero",
       "first_layers", "last_layers", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab")


def _rows() -> list[dict]:
    with open(CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in BOOL:
            r[k] = {"True": True, "False": False, "": None}[r[k]]
        for k in INT:
            r[k] = int(r[k]) if r[k] else None
        r["value"] = float(r["value"])
        r["flops_per_token"] = float(r["flops_per_token"]) if r["flops_per_token"] else None
    return rows


ROWS = _rows()


def _model(r):
    """The preset the row names, else the shape it gives (Transformer's defaults for the
    rest: a non-gated MLP of ``ffn``, 4h without one)."""
    if r["model"] in MODELS:
        assert r["layers"] is None, f"{r['run']}: a preset's shape is its own"
        return MODELS[r["model"]]
    return Transformer(r["layers"], r["hidden"], r["heads"], kv_heads=r["kv_heads"],
                       ffn=r["ffn"], vocab=r["vocab"], tied_embeddings=r["tied_embeddings"],
                       dropout=r["dropout"], flash_attention=r["flash_attention"],
                       name=r["model"])


def _config(r) -> RunConfig:
    return RunConfig(seq=r["seq"], global_batch=r["global_batch"], microbatch=r["microbatch"],
                     t=r["t"], p=r["p"], cp=r["cp"], d=r["d"], ep=r["ep"], m=r["vp"],
                     schedule="interleaved-1f1b" if r["vp"] > 1 else "1f1b",
                     first_layers=r["first_layers"], last_layers=r["last_layers"],
                     precision=r["precision"], recompute=r["recompute"], zero=r["zero"],
                     zero3=r["zero3"], sequence_parallel=r["sequence_parallel"],
                     framework=r["framework"])


def _hardware(r):
    hw = HARDWARE[r["gpu"]]
    # FP8-CS: the products' per-tensor current scaling (NOT_THE_GPU: the same regime)
    return dataclasses.replace(hw, fp8_current_scaling=True) if r["fp8_current_scaling"] else hw


def _priced(r) -> dict:
    """The row's explain row, its signed throughput error and its step-time error."""
    model, config = _model(r), _config(r)
    row = explain(model, config, _hardware(r), neighbours=0).row
    tokens = r["seq"] * r["global_batch"]
    if r["metric"] == "tokens_per_s_per_gpu":
        measured = tokens / (r["value"] * r["gpus"])
    elif r["metric"] == "step_s":
        measured = r["value"]
    else:  # TFLOP/s a GPU, counted as the source counts (else as fastpp counts: Megatron's)
        assert r["metric"] == "tflops_per_gpu", r["metric"]
        per_token = (r["flops_per_token"] if r["flops_per_token"] is not None
                     else row["tflops_per_gpu"] * 1e12 * r["gpus"] * row["step_time"] / tokens)
        measured = per_token * tokens / (r["value"] * 1e12 * r["gpus"])
    error = measured / row["step_time"] - 1.0  # throughput: + where fastpp's step is shorter
    return {"row": row, "error": error,
            "step_error": float(step_error(error, "tokens_per_s_per_gpu"))}


@pytest.fixture(scope="module")
def priced():
    return {r["run"]: _priced(r) for r in ROWS}


def test_the_table_is_18_runs_each_a_whole_layout():
    assert len(ROWS) == 18 and len({r["run"] for r in ROWS}) == 18
    for r in ROWS:
        assert r["t"] * r["p"] * r["cp"] * r["d"] == r["gpus"], r["run"]
        assert r["global_batch"] % (r["microbatch"] * r["d"]) == 0, r["run"]
        assert r["gpu"] in HARDWARE, r["run"]
        assert r["source"] and r["not_published"], r["run"]
        assert (r["model"] in MODELS) != (r["layers"] is not None), r["run"]


def test_each_run_prices(priced):
    """Every run gets a finite step and bar; those that do not fit say why, as explain says
    it (their price is the run's as laid out)."""
    unfit = []
    for r in ROWS:
        p = priced[r["run"]]
        row = p["row"]
        assert math.isfinite(row["step_time"]) and row["step_time"] > 0, r["run"]
        assert math.isfinite(row["expected_error"]) and row["expected_error"] > 0, r["run"]
        assert math.isfinite(p["error"]), r["run"]
        if not row["fits"]:
            assert row["reason"], r["run"]
            unfit.append(r["run"])
    assert len(unfit) == NOT_FITTING, unfit


def test_the_out_of_sample_counts_hold(priced):
    """At least the measured 12 of 18 within one bar and 15 within two (module docstring)."""
    within = [abs(priced[r["run"]]["step_error"]) / priced[r["run"]]["row"]["expected_error"]
              for r in ROWS]
    one, two = sum(x <= 1 for x in within), sum(x <= 2 for x in within)
    table = "\n".join(f"{r['run']:40s} {priced[r['run']]['error']:+7.1%} "
                      f"bar {priced[r['run']]['row']['expected_error']:6.1%}" for r in ROWS)
    assert one >= WITHIN_ONE and two >= WITHIN_TWO, f"{one} and {two} within 1, 2 bars\n{table}"
