"""The seventeenth bad-input wave (6 December 2026): a reviewer's 1,385 probes of the public
API and the command line. Each case failed on the code before it."""

from pathlib import Path

import numpy as np
import pytest

import fastpp
from fastpp import Costs, Noise, ScheduleError, ScheduleTypeError, build_schedule, simulate
from fastpp.model import HARDWARE, MODELS, RunGrid

DATA = Path(__file__).parent / "data" / "hf"

ONE = build_schedule("1f1b", 4, 8)

# a public callable, a call of it with every required argument, and a keyword it lacks:
# Python said "got an unexpected keyword argument" in a bare TypeError
CALLS = {
    "Costs": (Costs, (1.0, 2.0), {}),
    "Noise": (Noise, (0.05,), {}),
    "Schedule": (fastpp.Schedule, (ONE.ops, ONE.length, ONE.stage_to_device), {"n": 8}),
    "simulate": (simulate, (ONE,), {}),
    "sweep": (fastpp.sweep, (["1f1b"], [2], [4]), {"progress": False}),
    "optimize": (fastpp.optimize, (2, 4), {"progress": False}),
    "write_torch_csv": (fastpp.io.write_torch_csv, (ONE, "x.csv"), {}),
    "in_loss_order": (fastpp.io.in_loss_order, (ONE,), {}),
    "Hardware": (HARDWARE["H100-80GB"].__class__, (), {}),
    "RunGrid": (RunGrid, (), {}),
    "from_hf": (fastpp.model.from_hf, ({"model_type": "llama"},), {}),
    "device_bytes": (fastpp.model.device_bytes, (MODELS["llama3-8b"], ONE), {}),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_misspelt_keyword_is_named(name):
    function, args, keywords = CALLS[name]
    with pytest.raises(ScheduleTypeError, match=rf"^{name} has no keyword 'zzz_misspelt' "
                                                r"\(its keywords: "):
        function(*args, **keywords, zzz_misspelt=1)


def test_a_refused_keyword_check_costs_a_call_nothing_when_it_passes():
    """The check looks at the keywords only when the call has failed: a good call's own
    errors pass through as they were."""
    with pytest.raises(ScheduleError, match="costs.f must be"):
        Costs(f=-1.0, b=2.0)
    assert simulate(ONE, Costs(f=1.0, b=2.0)).makespan == 33.0
    assert np.isfinite(simulate(ONE, costs=Costs(1.0, 2.0)).makespan)


def test_a_bool_among_numbers_is_no_number():
    """``Costs([1.5, True, 1, 1], 2)`` priced True as 1.0 and ``w=(1, False, 1, 1)`` False as
    0: ``f=True`` alone was refused, and a list was not looked into."""
    for given in (dict(f=[1.5, True, 1, 1], b=2.0), dict(f=1.0, b=2.0, w=(1, False, 1, 1)),
                  dict(f=1.0, b=2.0, overhead={"F": [np.True_, 0.1, 0.1, 0.1]})):
        with pytest.raises(ScheduleTypeError, match=r"must be a number or an array of "
                                                     r"numbers \(got .*(True|False)"):
            Costs(**given)
    assert Costs([1.5, 1, 1, 1], 2.0).f.tolist() == [1.5, 1.0, 1.0, 1.0]


def test_a_costs_fields_are_what_it_prices():
    """An array given to ``Costs`` and changed by its caller afterwards was not priced (its
    values were copied) but showed in ``c.f``, and ``dataclasses.replace(c, b=2.0)`` priced
    the changed one: 77 for 33. The fields are now read-only copies of what is priced."""
    import dataclasses

    f, overhead = np.ones(4), {"F": [0.1] * 4}
    costs = Costs(f, 2.0, overhead=overhead)
    f[:] = 5.0
    overhead["F"][0] = 9.0
    priced = simulate(ONE, costs).makespan
    assert costs.f.tolist() == [1.0] * 4 and costs.overhead["F"].tolist() == [0.1] * 4
    assert simulate(ONE, dataclasses.replace(costs, comm=0.0)).makespan == priced
    assert simulate(ONE, Costs(np.ones(4), 2.0, overhead={"F": [0.1] * 4})).makespan == priced
    with pytest.raises(ValueError, match="read-only"):
        costs.f[0] = 3.0
    listed = Costs([1.0, 1.0, 1.0, 1.0], 2.0)
    assert listed == Costs(np.ones(4), 2.0) and not listed.f.flags.writeable


def test_in_loss_order_checks_a_schedule_written_into():
    """A schedule whose arrays were written into (microbatch 7 of n = 3) raised NumPy's
    IndexError; a duplicated microbatch named routes out of int32, read from memory never
    written."""
    schedule = build_schedule("1f1b", 2, 3)
    schedule.ops[2, 1, 0] = 7
    with pytest.raises(ScheduleError, match=r"microbatch must be in 0..2"):
        fastpp.io.in_loss_order(schedule)


def test_compiled_evaluate_checks_what_it_is_given():
    """``fastpp.compiled.evaluate`` took negative durations (makespan -16), NaN ones (-inf)
    and NaN or infinite stage rows, and met a wrong argument with AttributeError, TypeError,
    AxisError or ValueError."""
    from fastpp.compiled import evaluate

    compiled = ONE.compiled()
    N = compiled.num_ops
    stage = Costs(1.0, 2.0).per_stage(ONE)
    rows = np.stack([np.asarray(stage)], axis=2)
    # every op 1: (n + p - 1)(f + b), 1F1B's closed form
    assert evaluate(compiled, rows, np.ones((N, 1))).makespan.tolist() == [(8 + 4 - 1) * 2.0]
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ScheduleError, match=r"durations must be finite and >= 0"):
            evaluate(compiled, rows, np.full((N, 1), bad))
    for value in (np.nan, np.inf, -1.0):
        wrong = rows.copy()
        wrong[0, 0, 0] = value
        with pytest.raises(ScheduleError, match=r"stage_costs must be finite and >= 0"):
            evaluate(compiled, wrong)
    with pytest.raises(ScheduleTypeError, match=r"compiled must be a fastpp.compiled.Compiled"):
        evaluate(ONE, [stage])
    for given in (Costs(1.0, 2.0), stage):
        with pytest.raises(ScheduleTypeError, match=r"stage_costs must be a list of StageCosts"):
            evaluate(compiled, given)
    other = Costs(1.0, 2.0).per_stage(build_schedule("1f1b", 2, 4))
    with pytest.raises(ScheduleError, match=r"stage_costs must each have V=4 stages"):
        evaluate(compiled, [stage, other])
    with pytest.raises(ScheduleError, match=r"B >= 1\) \(got shape \(9, 4, 0\)"):
        evaluate(compiled, np.zeros((9, 4, 0)))
    with pytest.raises(ScheduleTypeError, match=r"durations must be a number or an array"):
        evaluate(compiled, rows, np.full((N, 1), "a"))


def test_a_long_pipeline_within_the_bounds_simulates():
    """``simulate`` of 1F1B at p = 100,000 (p n m = 400,000, within the 4,000,000 bound)
    raised MemoryError: the point plan kept a V x V table of overlapped pairs (80 GB)."""
    result = simulate(build_schedule("1f1b", 100_000, 4), Costs(1.0, 2.0))
    assert result.makespan == 3 * (100_000 - 1) + 4 * 3  # (p - 1)(f + b) + n (f + b)


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


def test_messages_name_what_the_user_gave(tmp_path, capsys):
    """``--capacity-gb 1e300`` said "capacity must be finite and > 0 (got inf)"; ``--f
    1e300`` named overhead and send terms optimize has no flag for; a launcher's
    ``--nproc_per_node 0`` named ``--gpus``, not given; a 0-d object array showed as a
    list."""
    from fastpp.__main__ import main
    from fastpp.model import from_megatron

    assert main(["plan", "--model", "llama2-7b", "--gpus", "8", "--capacity-gb",
                 "1e300"]) == 2
    assert "--capacity-gb must be finite and > 0 (got 1e+300)" in capsys.readouterr().err
    assert main(["optimize", "-p", "4", "-n", "8", "--f", "1e300", "--quiet"]) == 2
    assert "error: --f / m must be at most 1e+290" in capsys.readouterr().err
    script = ("GPUS_PER_NODE=0\ntorchrun --nproc_per_node $GPUS_PER_NODE pretrain_gpt.py "
              "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 "
              "--vocab-size 1000")
    with pytest.raises(ScheduleError, match=r"torchrun's --nproc_per_node 0 starts no "
                                            r"process \(give it a count >= 1, or gpus=N\)"):
        from_megatron(script)
    with pytest.raises(ScheduleTypeError, match=r"\(got 1.0\)$"):
        Costs(np.array(1.0, dtype=object), 2.0)


def test_an_output_that_cannot_be_written_is_refused_before_the_work(tmp_path, capsys):
    """``optimize --csv FOLDER`` searched and printed its result, then failed; so did
    ``explain --report FOLDER`` after pricing its neighbours."""
    from fastpp.__main__ import main

    assert main(["optimize", "-p", "4", "-n", "8", "--csv", str(tmp_path), "--quiet"]) == 2
    out = capsys.readouterr()
    assert "--csv must be a file path that can be written" in out.err and "best:" not in out.out
    assert main(["explain", "--hf", str(DATA / "qwen3-8b.json"), "--gpus", "16", "--tp", "2",
                 "--pp", "2", "--global-batch", "64", "--report", str(tmp_path)]) == 2
    out = capsys.readouterr()
    assert "--report must be a file path that can be written" in out.err
    assert "step time" not in out.out


def test_an_unknown_flag_is_the_commands_error_and_the_flag_it_misspells_named(capsys):
    """``plan --gpu 64`` printed the top-level usage and "python -m fastpp: error:
    unrecognized arguments", not the command's (docs/cli.md), and did not say ``--gpus``."""
    from fastpp.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main(["plan", "--gpu", "64"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m fastpp plan ")
    assert ("python -m fastpp plan: error: unrecognized arguments: --gpu 64 (did you mean "
            "--gpus for --gpu?)") in err
    with pytest.raises(SystemExit):
        main(["optimize", "-p", "2", "-n", "4", "--quite"])
    assert "(did you mean --quiet for --quite?)" in capsys.readouterr().err
