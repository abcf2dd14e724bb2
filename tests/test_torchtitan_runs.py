"""torchtitan's own benchmark runs (``fastpp.model.validate_torchtitan``): priced as a user of
torchtitan prices them, checks of a stack the cost model was not calibrated on."""

import pytest

from fastpp.model.torchtitan import from_torchtitan
from fastpp.model.validate_torchtitan import job_text, torchtitan_rows


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


@pytest.mark.xfail(strict=True, reason="fastpp prices torchtitan's steps 18-64% short (the "
                                       "runs took 1.2-2.8 times as long; step MAPE 41%): its "
                                       "eager or compiled kernels, PyTorch's SDPA, torchao's "
                                       "Float8 and a 500 W H100 are priced as Megatron's "
                                       "stack on the 700 W preset")
def test_torchtitan_runs_within_fifteen_percent(runs):
    """Issue 26's bar for a table nothing was fitted on. The runs' error bars, torchtitan's
    own checks since they are in the bars, are held to them in test_fidelity.py (left out,
    every row is extrapolated on its framework)."""
    assert runs["step_error"].abs().mean() <= 0.15


def test_a_torchtitan_job_s_bar_is_torchtitan_s(runs):
    """Each run's bar comes from torchtitan's checks (34-49%), not from Megatron's runs
    (7.6-44%, which held 1 of the 18 runs)."""
    assert (runs["extrapolated"] == "").all()
    assert runs["expected_error"].min() > 0.3
