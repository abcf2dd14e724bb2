"""The error contract: bad input to a public function is the library's own error, naming the
parameter, what it must be and what it got; never NumPy's, Numba's or Python's, and never a
silently accepted value. Rows of the escapes found in review (issue 22's table), and every
public call's misspelt keyword, the calls Python refuses and the messages' lists.
"""

import inspect

import numpy as np
import pytest

import fastpp
import fastpp.model as fm
from fastpp import (
    Costs,
    Noise,
    Schedule,
    ScheduleError,
    ScheduleTypeError,
    build_schedule,
    simulate,
    theory,
)
from fastpp.io import read_torch_csv, write_torch_csv
from fastpp.model import HARDWARE, MODELS, RunGrid


@pytest.fixture
def csv_path(tmp_path):
    return write_torch_csv(fastpp.build_schedule("1f1b", 2, 4), tmp_path / "s.csv")


@pytest.mark.parametrize("kwargs, name", [
    ({"f": [1, [2]], "b": 2}, "costs.f"),  # ragged: once a ValueError while formatting
    ({"f": "1", "b": 2}, "costs.f"),  # once accepted as 1.0
    ({"f": True, "b": 2}, "costs.f"),  # once accepted as 1.0
    ({"f": 1, "b": 2, "w": [0.5, "x"]}, "costs.w"),
])
def test_costs_take_numbers_only(kwargs, name):
    with pytest.raises(ScheduleTypeError, match=rf"{name} must be a number"):
        Costs(**kwargs)


@pytest.mark.parametrize("n", [1.5, "2", -1, 0, True])
def test_read_torch_csv_n(csv_path, n):
    with pytest.raises(ScheduleError, match=r"n must be a positive integer"):
        read_torch_csv(csv_path, n=n)


def test_read_torch_csv_placement_and_path(csv_path):
    with pytest.raises(ScheduleTypeError, match=r"placement must be a string"):
        read_torch_csv(csv_path, placement=["loop"])
    with pytest.raises(ScheduleTypeError, match=r"path must be a file path"):
        read_torch_csv(None)


@pytest.mark.parametrize("rows", [None, 5, "0F0", [None], [["0F0", 3]]])
def test_from_tokens_types(rows):
    with pytest.raises(ScheduleTypeError, match=r"rows|token"):
        Schedule.from_tokens(rows)


@pytest.mark.parametrize("seed, error", [("a", ScheduleTypeError), (None, ScheduleTypeError),
                                         (1.5, ScheduleTypeError), (-1, ScheduleError)])
def test_optimize_seed(seed, error):
    with pytest.raises(error, match=r"seed must be"):
        fastpp.optimize(2, 2, seed=seed, method="heuristic", progress=False)


def test_optimize_bounds_its_size_and_memory():
    with pytest.raises(ScheduleError, match=r"p\*n\*m must be at most"):
        fastpp.optimize(10**5, 10**5, progress=False)  # once a MemoryError
    with pytest.raises(ScheduleTypeError, match=r"memory must be a number"):
        fastpp.optimize(2, 4, memory="12", progress=False)  # once accepted as 12
    with pytest.raises(ScheduleError, match=r"memory must be"):
        fastpp.optimize(2, 4, memory=[3.0, np.nan], progress=False)


@pytest.mark.parametrize("p, n", [(-4, 8), (0, 8), (4, 0), (4, 2.5)])
def test_theory_counts(p, n):
    with pytest.raises(ScheduleError, match=r"(p|n) must be a positive integer"):
        theory.idle("1f1b", p, n)  # once returned -15 for p=-4


def test_theory_still_answers_valid_counts():
    assert theory.idle("1f1b", 4, 8) == 3 * 3.0  # (p-1)(f+b) with f=1, b=2
    assert theory.idle("1f1b", np.int64(4), 8, m=1) == 9.0


@pytest.mark.parametrize("n, p", [(0, 4), (4, 0), (-1, 4), (2.5, 4)])
def test_compute_theoretical_peak_counts(n, p):
    with pytest.raises(ScheduleError, match=r"num_(microbatches|stages) must be a positive"):
        fastpp.compute_theoretical_peak("1f1b", n, p)  # once returned 0 for n=0


def test_durations_of_zero_and_complex():
    s = fastpp.build_schedule("1f1b", 2, 2)
    zero = fastpp.simulate(s, durations=np.zeros(s.kind.shape))  # once a ZeroDivisionError
    assert (zero.makespan, zero.bubble_ratio, zero.span_bubble_ratio) == (0.0, 0.0, 0.0)
    with pytest.raises(ScheduleTypeError, match=r"durations must be an array of numbers"):
        fastpp.simulate(s, durations=np.ones(s.kind.shape) * 1j)


@pytest.mark.parametrize("text, match", [
    ("Et*99999999999|L", r"expand to at most 1,000,000 symbols"),  # once a MemoryError
    ("E(t|)*99999999999L", r"expand to at most 1,000,000 symbols"),
    ("Et*\u0663|L", r"follow '\*' with a count"),  # an Arabic-Indic 3 is not a count
])
def test_layout_counts(text, match):
    from fastpp.model import parse_layout
    with pytest.raises(ScheduleError, match=match):
        parse_layout(text)


def test_megatron_layer_counts_are_integers():
    from fastpp.model import megatron_layers
    for first in (2.5, "3", True, -1):  # 2.5 and "3" were once taken as 2 and 3
        with pytest.raises(ScheduleError, match=r"decoder_first_pipeline_num_layers must be an "
                                                r"integer >= 0"):
            megatron_layers(8, 2, first=first)


PLAN = dict(seq=1024, global_batch=8, tp=1, pp=2, microbatch=1, recompute="none",
            schedules=["1f1b"])


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(first_layers=[]), ScheduleError, r"first_layers must hold at least one"),
    (dict(schedules=[]), ScheduleError, r"schedules must hold at least one"),
    (dict(zero=[]), ScheduleError, r"zero must hold at least one"),
    (dict(recompute=[]), ScheduleError, r"recompute must hold at least one"),
    (dict(zero=True), ScheduleError, r"zero must be one of \[0, 1, 2, 3\] \(got True\)"),
    (dict(sequence_parallel="no"), ScheduleError, r"sequence_parallel must be one of"),
    (dict(capacity=[1e9, 2e9]), ScheduleError, r"capacity must be one number"),
    (dict(hardware=5), ScheduleTypeError, r"hardware must be a fastpp.model.Hardware"),
    (dict(link=5), ScheduleTypeError, r"link must be a fastpp.model.Link"),
])
def test_plan_arguments(kwargs, error, match):
    from fastpp.model import plan
    with pytest.raises(error, match=match):
        plan("llama2-7b", 8, **(PLAN | kwargs))


def test_plan_takes_numpy_integers_for_choices():
    from fastpp.model import plan
    assert len(plan("llama2-7b", 8, **(PLAN | dict(zero=np.int64(1))))) == 1


def test_transformer_costs_types():
    from fastpp.model import device_bytes, transformer_costs
    s = fastpp.build_schedule("1f1b", 2, 4)
    with pytest.raises(ScheduleTypeError, match=r"model must be a fastpp.model.Transformer"):
        transformer_costs(3, s, seq=1024)  # once an AttributeError
    with pytest.raises(ScheduleTypeError, match=r"hardware must be a fastpp.model.Hardware"):
        transformer_costs("llama2-7b", s, 3, seq=1024)
    with pytest.raises(ScheduleTypeError, match=r"model must be a fastpp.model.Transformer"):
        device_bytes(3, s)
    with pytest.raises(ScheduleError, match=r"sequence_parallel must be one of"):
        transformer_costs("llama2-7b", s, seq=1024, sequence_parallel="no")


def test_validate_names_its_datasets():
    from fastpp.model import validate
    for bad in ("korthikanti_2022", 3):  # a string once iterated its letters
        with pytest.raises(ScheduleTypeError, match=r"datasets must be a list of names"):
            validate(bad)


def test_sweep_group_size_is_one_value():
    with pytest.raises(ScheduleError, match=r"G must be a positive integer \(got G=\[4, 8\]\)"):
        fastpp.sweep("interleaved-1f1b", p=4, n=8, G=[4, 8], progress=False)  # a TypeError once


def test_analyses_leave_inference_out():
    """forward-only has no backward: it once headed every (p, n) of best_within_budget and the
    Pareto front (the README's example)."""
    df = fastpp.sweep(["1f1b", "forward-only", "zb-h1"], p=4, n_per_p=2, progress=False)
    best = fastpp.best_within_budget(df)
    assert set(best["schedule"]) <= {"1f1b", "zb-h1"} and len(best) == 1
    assert "forward-only" not in set(fastpp.pareto_front(df)["schedule"])
    assert "forward-only" in set(fastpp.pareto_front(df, inference=True)["schedule"])
    assert fastpp.best_within_budget(df, inference=True)["schedule"].iloc[0] == "forward-only"


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


# made by simulate on its per-point path (a wrapper's frame there costs every point), never
# by a user; an enum's call is not a function's
NOT_PROBED = {"Result", "MonteCarlo", "Op"}


def _public_callables():
    """Every public function and class of ``fastpp`` and ``fastpp.model``, and the methods a
    user calls on a schedule, a result, a Monte Carlo and a ``Costs``."""
    s = build_schedule("1f1b", 2, 4)
    result = simulate(s, Costs(1, 2))
    mc = simulate(s, Costs(1, 2), noise=fastpp.Noise(cov=0.1), samples=8)
    for module in (fastpp, fm):
        for name in module.__all__:
            obj = getattr(module, name)
            if name in NOT_PROBED or not callable(obj) or (
                    isinstance(obj, type) and issubclass(obj, BaseException)):
                continue
            yield f"{module.__name__}.{name}", obj
    for owner in (s, result, mc, Costs(1, 2)):
        for name, _ in inspect.getmembers(type(owner), inspect.isfunction):
            if not name.startswith("_"):
                yield f"{type(owner).__name__}.{name}", getattr(owner, name)


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
    # a TypeError of the call itself, its keywords all known, passes as it was raised
    with pytest.raises(ScheduleTypeError, match=r"^costs.f must be a number or an array"):
        Costs(f="x", b=2.0)
    assert simulate(ONE, Costs(f=1.0, b=2.0)).makespan == 33.0
    assert np.isfinite(simulate(ONE, costs=Costs(1.0, 2.0)).makespan)


@pytest.mark.parametrize("call, message", [
    (lambda: fastpp.optimize(2, 4, None, 2), r"optimize cannot be called so: too many "
                                             r"positional arguments \(its parameters: p, n, "
                                             r"costs, memory"),
    (lambda: build_schedule("1f1b", 4, 8, 1, 4, 5), r"build_schedule cannot be called so: too "
                                                    r"many positional arguments \(its "
                                                    r"parameters: name, p, n, m\)"),
    (lambda: build_schedule("1f1b"), r"build_schedule cannot be called so: missing a required "
                                     r"argument: 'p'"),
], ids=["optimize", "build_schedule", "missing"])
def test_a_call_python_refuses_is_a_type_error_naming_the_parameters(call, message):
    """Python's bare TypeError, where a misspelt keyword already said which ones it takes."""
    with pytest.raises(ScheduleTypeError, match=message):
        call()


def test_a_type_error_raised_inside_is_not_taken_for_a_bad_call():
    with pytest.raises(ScheduleError, match="bogus must not be given for '1f1b'"):
        build_schedule("1f1b", 4, 8, bogus=1)  # (**options: a keyword it forwards)


def test_messages_show_what_was_given():
    """A nested list was shown flattened, a generator as the empty list it was read as."""
    with pytest.raises(ScheduleError, match=r"array of p=2 numbers \(got \[\[1, 2\]\]\)"):
        fastpp.optimize(2, 4, memory=[[1, 2]])
    with pytest.raises(ScheduleError, match=r"non-empty list of Device \(got a generator\)"):
        fastpp.gpipe_schedule((d for d in [fastpp.Device("d0", [0])]), 2)


def test_every_public_call_names_a_misspelt_keyword():
    """Python's bare ``TypeError`` (``got an unexpected keyword argument``) came out of 41
    public functions, classes and methods, from ``gpipe_schedule`` to ``Result.grid``."""
    probed = 0
    for label, call in _public_callables():
        params = inspect.signature(call).parameters.values()
        if any(p.kind == p.VAR_KEYWORD for p in params):
            continue  # (takes any keyword)
        try:
            call(zz_unknown=1)
        except ScheduleTypeError as named:
            assert "zz_unknown" in str(named), label
        except TypeError as bare:  # (Python's own)
            pytest.fail(f"{label}: {bare}")
        else:
            pytest.fail(f"{label} took an unknown keyword")
        probed += 1
    assert probed > 60


@pytest.mark.parametrize("call, message", [
    (lambda: theory.peak_live("1f1b", 4, 2**63), r"n must be at most 2,147,483,648"),
    (lambda: theory.peak_activations("1f1b", 4, 2**63), r"n must be at most"),
    (lambda: fastpp.compute_theoretical_peak("1f1b", 2**63, 4),
     r"num_microbatches must be at most"),
    (lambda: fm.megatron_layers(10**30, 4), r"layers must be at most"),
    (lambda: fm.chunk_layers(2**63, 4), r"layers must be at most"),
    (lambda: fm.transformer_costs("llama3-8b", build_schedule("1f1b", 4, 8), "H100-80GB",
                                  seq=4096, dp=2**63), r"dp must be at most"),
])
def test_counts_past_int64_are_refused_by_name(call, message):
    """An integer of 2**63 or more made NumPy raise ``OverflowError``."""
    with pytest.raises(ScheduleError, match=message):
        call()


def test_long_lists_say_how_many():
    """A list of choices in a message is whole, or says it is cut and how long it is (a
    column of a wide table was chosen among its first 12 columns, silently)."""
    import pandas as pd
    import pytest

    from fastpp.checks import dataframe, listed

    assert listed(["a", "b"]) == "['a', 'b']"
    assert listed(range(50), most=3) == "[0, 1, 2, ... (50 in all)]"
    wide = pd.DataFrame({f"c{i}": [0] for i in range(20)})
    with pytest.raises(fastpp.ScheduleError, match=r"'c19'\] \(got 'x'\)"):
        dataframe(wide, "df", {"by": "x"})
