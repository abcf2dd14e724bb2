"""The fifteenth bad-input wave (5 December 2026, evening): a new user's trial of the planner,
the configs and the variability API. Each case failed on the code before it: a message that
said nothing or pointed the wrong way, or a setting dropped without a word."""

import numpy as np
import pytest
from helpers import needs_data

import fastpp
from fastpp import ScheduleError, build_schedule
from fastpp.model import RunConfig, device_bytes, from_torchtitan, transformer_costs
from fastpp.model.explain import explain
from fastpp.model.validate import DATA as SHARED

WHATIF = SHARED / "whatif_st"


def test_explain_says_why_a_run_does_not_fit():
    """explain priced the run with an unbounded capacity and set ``fits`` again, not
    ``reason``: its table printed "DOES NOT FIT: " and nothing after."""
    found = explain("llama3-70b", RunConfig(seq=8192, global_batch=64, t=4, p=2, d=8),
                    "H100-80GB", neighbours=0, workers=1)
    assert not found.row["fits"]
    assert found.row["reason"] == "needs 93.5 GB on device 0 > capacity 80 GB"
    assert "DOES NOT FIT: needs 93.5 GB on device 0 > capacity 80 GB" in found.table()


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


TOML = """
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 8
seq_len = {seq}
[parallelism]
tensor_parallel_degree = {t}
"""


@pytest.mark.parametrize("t, seq, match", [
    (3, 8192, r"\[parallelism\] tensor_parallel_degree must divide the model's 32 attention "
              r"heads \(got 3\)"),
    (4, 8190, r"\[training\] seq_len must be a multiple of tensor_parallel_degree x "
              r"context_parallel_degree = 4, over which torchtitan splits each sequence "
              r"\(got 8190\)")])
def test_torchtitan_tensor_parallelism_in_its_own_terms(tmp_path, t, seq, match):
    """A tensor-parallel degree the heads do not take was refused for the sequence, with a
    way out (sequence_parallel=False) that torchtitan does not have."""
    path = tmp_path / "job.toml"
    path.write_text(TOML.format(t=t, seq=seq))
    with pytest.raises(ScheduleError, match=match):
        from_torchtitan(path, gpus=8 * t)


@pytest.mark.parametrize("cov", ["0.1", [0.1], True])
def test_noise_cov_says_what_it_takes(cov):
    """A string said "a number or an array of numbers", and the array then "one number"."""
    with pytest.raises(ScheduleError, match=r"cov must be a number or a mapping of kind to "
                                            r"number \(got "):
        fastpp.Noise(cov)


def test_one_number_says_one_number():
    """Every scalar parameter said "a number or an array of numbers" for a string."""
    with pytest.raises(ScheduleError, match=r"step must be a number \(got 'x'\)"):
        fastpp.Noise(0.1, step="x")
    with pytest.raises(ScheduleError, match=r"step must be one number \(got \[0.1\]\)"):
        fastpp.Noise(0.1, step=[0.1])


@needs_data("whatif_st/trace-ST.parquet", "whatif_st/meta-ST.yaml")
def test_op_table_steps_past_int64(tmp_path):
    """uint64 step labels of 2**63 and more wrapped around to negative steps."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("yaml")
    table = pd.read_parquet(WHATIF / "trace-ST.parquet")
    table["step"] = table["step"].astype(np.uint64) + np.uint64(2**63)
    path = tmp_path / "trace-X.parquet"
    table.to_parquet(path)
    (tmp_path / "meta-X.yaml").write_text((WHATIF / "meta-ST.yaml").read_text())
    with pytest.raises(ScheduleError, match=r"step must hold integers below 2\*\*63 \(got "
                                            r"922337203685477"):
        fastpp.read_op_table(path)
