"""The seventeenth bad-input wave (6 December 2026): a reviewer's 1,385 probes of the public
API and the command line. Each case failed on the code before it."""

from pathlib import Path

import numpy as np
import pytest
from helpers import needs_data

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
    # a TypeError of the call itself, its keywords all known, passes as it was raised
    with pytest.raises(ScheduleTypeError, match=r"^costs.f must be a number or an array"):
        Costs(f="x", b=2.0)
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


# ---- round two: sweeps, their tables and reports, plan's axes ----

def test_a_sweep_too_large_is_refused_naming_its_axes():
    """2**64 points wrapped to 0 in NumPy's product: an empty table, no word; just below
    2**63 the list of chunks took the machine's memory."""
    big = list(range(1, 65537))
    with pytest.raises(ScheduleError, match=r"a sweep must have at most 10,000,000,000 points "
                                            r"\(got 18,446,744,073,709,551,616: 65536 p, "
                                            r"65536 n, 65536 f, 65536 b\)"):
        fastpp.sweep("1f1b", p=big, n=big, f=[float(x) for x in big],
                     b=[x + 1e5 for x in big], progress=False, check_only=True)


def test_pandas_axes_and_ranges_are_lists_of_values():
    """A Series or Index as a sweep axis raised IndexError or was one value; a range or a
    Series as plan's pp raised "unhashable type: 'list'"; two alike layouts gave each row
    twice."""
    import pandas as pd

    from fastpp.model import plan

    lists = fastpp.sweep("1f1b", p=4, n=[8, 16], m=[1], progress=False)
    for n, m in ((pd.Series([8, 16]), pd.Index([1])), (np.array([8, 16]), 1)):
        got = fastpp.sweep("1f1b", p=pd.Series([4]), n=n, m=m, progress=False)
        assert got["makespan"].tolist() == lists["makespan"].tolist()
    kw = dict(seq=1024, global_batch=16, schedules=["1f1b"], tp=[1], recompute="none")
    rows = plan("llama2-7b", 16, pp=[2, 4], **kw)
    for pp in (range(2, 5, 2), pd.Series([2, 4]), np.array([2, 4])):
        np.testing.assert_array_equal(plan("llama2-7b", 16, pp=pp, **kw)["step_time"],
                                      rows["step_time"])
    layout = "Et*16|t*16L"
    assert len(plan("llama2-7b", 16, pp=[2], layout=[layout, layout], **kw)) == \
        len(plan("llama2-7b", 16, pp=[2], layout=[layout], **kw))


def test_for_gpus_refuses_a_data_parallel_degree_it_would_replace():
    from fastpp.model import RunConfig

    with pytest.raises(ScheduleError, match=r"d must be the 4 GPUs of 16 left by t \* cp \* p, "
                                            r"or not given \(got d=2\)"):
        RunConfig.for_gpus(16, seq=1024, global_batch=32, p=4, d=2)
    assert RunConfig.for_gpus(16, seq=1024, global_batch=32, p=4, d=4).d == 4


def test_a_sweeps_folder_is_checked_before_the_work_and_read_as_the_shell_reads_it(
        tmp_path, monkeypatch):
    """``check_only=True`` never looked at ``out=``; ``out="~/sw"`` made ``./~/sw`` and left
    a part in the real home folder; an empty store folder left by a refused sweep was
    "other files"; ``collect=False`` without ``out=`` ran and kept nothing."""
    (tmp_path / "file").write_text("x")
    for out, said in ((tmp_path / "file", "must be a folder \\(got the file"),
                      (3, "must be a folder path \\(got 3\\)"),
                      (tmp_path / "file" / "sub", "must be a folder that can be made .* is a "
                                                  "file")):
        with pytest.raises(ScheduleError, match=f"out {said}"):
            fastpp.sweep("1f1b", p=4, n=8, out=out, check_only=True, progress=False)
    assert not (tmp_path / "file" / "sub").exists()
    fastpp.sweep("1f1b", p=4, n=8, out=tmp_path / "sw", progress=False)
    with pytest.raises(ScheduleError, match="already holds a sweep; pass resume=True"):
        fastpp.sweep("1f1b", p=4, n=8, out=tmp_path / "sw", check_only=True, progress=False)
    with pytest.raises(ScheduleError, match="holds a different sweep"):
        fastpp.sweep("1f1b", p=8, n=8, out=tmp_path / "sw", resume=True, check_only=True,
                     progress=False)
    assert fastpp.sweep("1f1b", p=4, n=8, out=tmp_path / "sw", resume=True, check_only=True,
                        progress=False) is None
    with pytest.raises(ScheduleError, match=r"collect=False keeps the rows in out= alone"):
        fastpp.sweep("1f1b", p=4, n=8, collect=False, progress=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert len(fastpp.sweep("1f1b", p=4, n=8, out="~/sw", progress=False)) == 1
    assert (tmp_path / "home" / "sw" / "_fastpp" / "manifest.json").exists()
    assert not (tmp_path / "~").exists()
    (tmp_path / "left" / "_fastpp").mkdir(parents=True)
    assert len(fastpp.sweep("1f1b", p=4, n=8, out=tmp_path / "left", progress=False)) == 1


def test_the_rankings_refuse_text_and_take_their_own_tables():
    """Text makespans were ranked alphabetically ('33.0' before '9.0'); ``pareto_front`` took
    the schedule's name as x; ``best_within_budget`` of its own table raised pandas'
    "columns overlap", and NumPy's float32 inf was "not finite"."""
    import math

    df = fastpp.sweep(["1f1b", "zb-h1"], p=4, n=[8, 16], w=1.0, progress=False)
    text = df.assign(makespan=df["makespan"].astype(str))
    with pytest.raises(ScheduleTypeError, match=r"df's column 'makespan' must hold numbers to "
                                                r"be ranked by \(got dtype"):
        fastpp.best_within_budget(text, budget=math.inf, by=("p",))
    with pytest.raises(ScheduleTypeError, match=r"df's column 'schedule' must hold numbers"):
        fastpp.pareto_front(df, x="schedule")
    best = fastpp.best_within_budget(df, budget=4.0)
    assert fastpp.best_within_budget(best, budget=4.0).equals(best)
    assert fastpp.best_within_budget(df, budget=np.float32("inf")).equals(
        fastpp.best_within_budget(df, budget=math.inf))


def test_report_of_sweep_tables_it_accepts(tmp_path):
    """A sweep kept with invalid="keep" where no point ran raised ZeroDivisionError; a table
    of the required columns alone raised Costs' TypeError; a NaN G ValueError; a schedule
    named in schedules= but absent from the table had its section left out, unsaid."""
    none_ran = fastpp.sweep("interleaved-1f1b", p=4, n=8, m=1, invalid="keep", progress=False)
    page = fastpp.report(none_ran, output=tmp_path / "none.html").read_text()
    assert "None of its 1 points was simulated" in page
    good = fastpp.sweep(["1f1b", "interleaved-1f1b"], p=4, n=8, progress=False)
    bare = good[["schedule", "p", "n", "m", "makespan", "bubble_ratio",
                 "peak_activations_max", "throughput"]]
    assert fastpp.report(bare, output=tmp_path / "bare.html").exists()
    assert fastpp.report(good.assign(G=np.nan), output=tmp_path / "g.html").exists()
    with pytest.raises(ScheduleError, match=r"schedules must be schedules of the sweeps, among "
                                            r"\['1f1b', 'interleaved-1f1b'\] \(got \['zbv'\]\)"):
        fastpp.report(good, output=tmp_path / "x.html", schedules=["zbv"])
    # a name one of several sweeps holds is theirs (each table's own check refused it)
    zbv = fastpp.sweep(["1f1b", "zbv"], p=4, n=8, progress=False)
    assert fastpp.report(zbv, good, output=tmp_path / "two.html", schedules=["zbv"]).exists()


def test_optimize_names_the_device_short_of_the_most():
    """act=[1, 2, 3, 4] under memory=2 said "at least 4 on every device ... (device 2 needs
    3)"."""
    with pytest.raises(ScheduleError, match=r"at least 4 on every device: .* \(device 3 needs "
                                            r"4, got memory=2\)"):
        fastpp.optimize(4, 8, Costs(1.0, 2.0, act=[1.0, 2.0, 3.0, 4.0]), memory=2.0,
                        progress=False)


def test_samples_without_noise_is_refused():
    """``simulate(s, c, samples=100)`` returned the deterministic ``Result`` and ``sweep``
    and ``plan`` no noisy column, unsaid: no Monte Carlo ran."""
    from fastpp.model import plan

    with pytest.raises(ScheduleError, match=r"samples counts the Monte Carlo's timelines: give "
                                            r"noise= too \(got samples=100 without noise\)"):
        simulate(ONE, Costs(1.0, 2.0), samples=100)
    with pytest.raises(ScheduleError, match=r"give noise= too \(got samples=8 without noise\)"):
        fastpp.sweep("1f1b", p=4, n=8, samples=8, progress=False)
    with pytest.raises(ScheduleError, match=r"give noise= too \(got samples=8 without noise\)"):
        plan("llama2-7b", 16, seq=1024, global_batch=16, pp=[2], samples=8)
    assert simulate(ONE, Costs(1.0, 2.0), noise=Noise(0.05)).samples == 1000  # the default


@needs_data("whatif_st/trace-ST.parquet", "whatif_st/result-ST.json")
def test_the_what_if_readers_say_what_to_fix(tmp_path):
    """A JSON file given as the op table was told its meta file was missing; ``whatif`` of
    the table's path said "got str", not to read it first."""
    from fastpp.model.validate import DATA as SHARED

    table, result = (SHARED / "whatif_st" / name for name in ("trace-ST.parquet",
                                                              "result-ST.json"))
    with pytest.raises(ScheduleError, match=r"path must be a Parquet op table \(got .*"
                                            r"result-ST.json"):
        fastpp.read_op_table(result)
    with pytest.raises(ScheduleTypeError, match=r"job must be a fastpp.MeasuredJob: read the op "
                                                r"table first, fastpp.read_op_table\("):
        fastpp.whatif(table)


def test_empty_names_are_refused_as_given(capsys, tmp_path):
    """``report -o ''`` said "got '.'"; ``--attention-kernel ''`` (and
    ``with_attention_kernel(h, '')``) priced the GPU's own kernel, unsaid."""
    from fastpp.__main__ import main
    from fastpp.model.attention import with_attention_kernel

    sweep = fastpp.sweep("1f1b", p=4, n=8, progress=False)
    sweep.to_parquet(tmp_path / "s.parquet")
    assert main(["report", str(tmp_path / "s.parquet"), "-o", ""]) == 2
    assert "--output must be a file in an existing folder (got '')" in capsys.readouterr().err
    assert main(["plan", "--model", "llama2-7b", "--gpus", "8", "--attention-kernel", ""]) == 2
    assert "--attention-kernel must name a measured kernel (got '')" in capsys.readouterr().err
    with pytest.raises(ScheduleError, match=r"implementation must name a measured kernel"):
        with_attention_kernel(HARDWARE["H100-80GB"], "")


def test_a_costs_pickles_and_copies_whatever_its_fields():
    """Its per-kind mappings kept read-only (a mappingproxy) made a Costs with ``overhead``
    (every MeasuredRun.costs()) refuse pickle, deepcopy and dataclasses.asdict, and a Result
    holding one."""
    import copy
    import dataclasses
    import pickle

    for costs in (Costs(1.0, 2.0), Costs(np.ones(4), 2.0, w=[0.5] * 4),
                  Costs(1.0, 2.0, overhead={"F": 0.1, "B": np.float64(0.2), "W": [0.1] * 4},
                        send={"F": 0.05})):
        for twin in (pickle.loads(pickle.dumps(costs)), copy.deepcopy(costs)):
            assert twin == costs and simulate(ONE, twin).makespan == \
                simulate(ONE, costs).makespan
        assert dataclasses.asdict(costs)["f"] is not None
        assert pickle.loads(pickle.dumps(simulate(ONE, costs))).makespan == \
            simulate(ONE, costs).makespan
    given = Costs(1.0, 2.0, overhead={"B": np.float64(0.2)})
    assert type(given.overhead["B"]) is np.float64  # a number stays a number


def test_a_noisy_sweep_is_still_refused_a_store(tmp_path):
    """The refusal of noise= with out= had moved under samples' own refusal, where it never
    ran: a noisy sweep wrote its noisy columns into a store that does not know the noise."""
    with pytest.raises(ScheduleError, match=r"noise cannot be combined with out="):
        fastpp.sweep(["1f1b"], p=2, n=4, noise=Noise(0.05), samples=8, out=tmp_path / "s",
                     progress=False)
    assert not (tmp_path / "s").exists()


def test_plan_gives_the_rows_an_imbalance_their_ep_cannot_have_a_reason():
    """One imbalance for every ep row priced the ep = 1 rows at 4x the mean on their one
    rank (12.1 s for 6.5 s, 135 GB for 95): the busiest of ep ranks receives at most
    min(ep, experts / top_k) times the mean."""
    from fastpp.model import plan

    rows = plan("mixtral-8x7b", 64, seq=4096, global_batch=64, ep=[1, 2, 8], imbalance=2.0,
                schedules=["1f1b"], recompute="none")
    said = rows["reason"].str.contains("imbalance must be at most", regex=False)
    assert said[rows["ep"] == 1].mean() > 0.9 and not said[rows["ep"] > 1].any()
    assert rows.loc[said, "step_time"].isna().all()


def test_report_of_an_unfinished_sweep_says_so_and_reads_the_scripts_parts(tmp_path):
    """An interrupted sweep's report gave a part's answers as the sweep's, unsaid; a
    ``scripts/sweep.py`` folder was refused ("neither a manifest ... nor Parquet files")
    though its sweep lay in ``parts/``, or read from an earlier run's sweep.parquet."""
    out = tmp_path / "out"
    fastpp.sweep(["1f1b", "zb-h1"], p=[2, 4], n=8, chunk_size=1, out=out / "parts",
                 progress=False)
    old = fastpp.sweep(["gpipe"], p=2, n=4, progress=False)
    old.to_parquet(out / "sweep.parquet")  # an earlier run's table beside the store
    page = fastpp.report(out, output=tmp_path / "all.html").read_text()
    assert "(unfinished:" not in page and "zb-h1" in page and "gpipe" not in page
    (out / "parts" / "_fastpp" / "part-000001.json").unlink()  # as if stopped before it
    page = fastpp.report(out, output=tmp_path / "part.html").read_text()
    assert "(unfinished: 3 of 4 points)" in page


def test_model_options_as_refused_or_taken_as_their_apis_do(capsys, tmp_path):
    """``device_bytes``' keywords took ``zero3="step"`` beside ``zero=1`` (RunConfig refuses
    it); the CLI refused ``--first-layers 0``, which ``plan`` takes; ``--recipe`` beside
    ``--recompute-modules`` was named by the API's parameters."""
    from fastpp.__main__ import main
    from fastpp.model import device_bytes

    with pytest.raises(ScheduleError, match=r"zero must be 3 with zero3='step' \(got zero=1\)"):
        device_bytes("llama3-8b", ONE, tp=2, dp=4, zero=1, zero3="step")
    assert main(["plan", "--model", "llama3-8b", "--gpus", "16", "--pp", "4", "--first-layers",
                 "0", "--schedules", "1f1b", "--recompute", "full", "--no-plots", "--out",
                 str(tmp_path), "--top", "1"]) == 0
    capsys.readouterr()
    assert main(["plan", "--model", "deepseek-v3", "--gpus", "256", "--recipe", "deepseek-v3",
                 "--recompute-modules", "moe"]) == 2
    assert ("--recipe must be given alone: it sets recompute_modules, fp8_cache and "
            "offload_modules (got --recipe='deepseek-v3' with --recompute-modules=['moe'])") \
        in capsys.readouterr().err


def test_stage_table_refuses_a_layout_the_model_cannot_run():
    """A hand-built RunGrid priced t = 3 on 32 heads (fractional bytes), ep = 3 on 8 experts,
    cp = 4096 on 4,096 tokens: stage_table checked only replicate, where transformer_costs
    and plan refuse them all."""
    from fastpp.model import stage_table

    mixtral, h100 = MODELS["mixtral-8x7b"], HARDWARE["H100-80GB"]
    stages = dict(config=[0, 0], layers=[16, 16], embedding=[True, False], loss=[False, True],
                  moe_layers=[16, 16])
    grid = dict(seq=4096, microbatch=[1], d=[8], p=[2], m=[1], recompute=[0])
    for given, said in ((dict(t=[3], ep=[8]), r"grid's t must divide the heads 32 and KV heads 8 "
                                              r"\(got t=3 in configuration 0\)"),
                        (dict(t=[2], ep=[3]), r"ep must divide the experts 8 \(got ep=3\) \(in "
                                              r"configuration 0 of the grid\)"),
                        (dict(t=[1], ep=[1], cp=[4096]), r"cp"),
                        (dict(t=[2], ep=[1], imbalance=2.0), r"imbalance must be at most")):
        with pytest.raises(ScheduleError, match=said):
            stage_table(mixtral, h100, RunGrid(**grid, **given), **stages)
    priced = stage_table(mixtral, h100, RunGrid(**grid, t=[2], ep=[8]), **stages)
    assert np.all(np.asarray(priced["f"]) > 0)
