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
    needs = f"needs {found.row['peak_memory'] / 1e9:.1f} GB on device 0 > capacity 80 GB"
    assert found.row["reason"] == needs and f"DOES NOT FIT: {needs}" in found.table()


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


# -- the commands and scripts: refused before the work, by their flags -----------------------


@pytest.mark.parametrize("script, argv, match", [
    ("frontier.py", ["-p", "4", "-n", "8", "--budgets", "2", "--out", "afile/sub"],
     "error: --out must be a folder that can be made (got 'afile/sub': Not a directory)"),
    ("fidelity.py", ["--out", "afile"],
     "error: --out must be a folder that can be made (got 'afile': File exists)"),
    ("fidelity.py", ["--no-plots", "--markdown", "afile/rows.md"],
     "error: --markdown's folder must be a folder that can be made (got 'afile'"),
    ("fidelity.py", ["--vtrain-table", "nonexist.csv"],
     "error: --vtrain-table: a vTrain table must be a readable CSV (got nonexist.csv"),
    ("measure.py", ["--steps", "0"], "error: --steps must be a positive integer (got --steps=0)"),
    ("measure.py", ["--time-limit", "0"],
     "argument --time-limit: must be a finite number of seconds > 0 (got '0')"),
    ("measure.py", ["--reread", "nonexist"], "error: --reread must name a folder of a "
                                             "scripts/measure.py run"),
    ("measure.py", ["--picture", "p.txt"], "error: --picture must end in a format matplotlib "
                                           "writes"),
    ("variability.py", ["--samples", "20", "--picture", "p.txt"],
     "error: --picture must end in a format matplotlib writes"),
])
def test_scripts_refuse_their_outputs_before_the_work(tmp_path, script, argv, match):
    """frontier.py made its --out after every search, fidelity.py and measure.py let the
    library's errors and the OS's out as tracebacks (measure.py after minutes of real runs),
    and a picture's format was checked when it was drawn, after the work."""
    from test_bad_input_wave6 import run_script

    (tmp_path / "afile").write_text("")
    err = run_script(script, *argv, cwd=tmp_path)
    assert match in err, err
    assert "budgets:" not in err and "measuring" not in err  # no work began


def test_sweep_script_refuses_a_w_over_b_before_the_sweep(tmp_path):
    """--w over --b skipped every point, wrote an empty table and printed a dict of reasons."""
    from test_bad_input_wave6 import run_script

    err = run_script("sweep.py", "-p", "2", "--n-per-p", "1", "--w", "5", "--no-progress",
                     "--no-plots", "--out", "sw", cwd=tmp_path)
    assert "--w must be <= --b: W is the weight-gradient part of each backward (got --w=5, " \
           "--b=2)" in err
    assert not (tmp_path / "sw").exists()


@pytest.mark.parametrize("argv, match", [
    (["plan", "--model", "llama3-8b", "--gpus", "8", "--out", "afile/x", "--no-plots"],
     "error: --out must be a folder that can be made (got 'afile/x': Not a directory)"),
    (["measure", "-s", "ScheduleGPipe", "-p", "2", "-n", "4", "--picture", "p.txt"],
     "error: --picture must end in a format matplotlib writes"),
    (["simulate", "--from-csv", "zbv.csv", "-n", "4"],
     "error: -n must cover the microbatches of zbv.csv: at least 8 (got -n=4; left out, the "
     "file's count is taken)"),
    (["explain", "--vtrain", "missing.json"],
     "error: --vtrain must be a vTrain configuration's JSON file (no file missing.json)"),
])
def test_commands_refuse_before_the_work(tmp_path, monkeypatch, capsys, argv, match):
    """plan wrote its table after planning (an errno without the flag); measure drew its
    picture's format check after the run; a CSV read with too small an -n blamed the file
    and its placement; a missing vTrain file was called a config.json."""
    from helpers import cli_stderr

    from fastpp.__main__ import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    rows = [[f"{d}F{j}" for j in range(8)] + [f"{d}B{j}" for j in range(8)] for d in range(2)]
    (tmp_path / "zbv.csv").write_text("\n".join(",".join(r) for r in rows) + "\n")
    assert main(argv) == 2
    err = cli_stderr(capsys)
    assert match in err, err
    assert "planned in" not in capsys.readouterr().out


def test_explain_says_which_flag_gives_the_microbatches(capsys, tmp_path):
    """An interleaved run of --hf with the default global batch (one microbatch a pipeline)
    cannot be priced; the error spoke of n and G, which no flag sets."""
    from pathlib import Path

    from helpers import cli_stderr

    from fastpp.__main__ import main

    hf = str(Path(__file__).parent / "data" / "hf" / "qwen3-8b.json")
    assert main(["explain", "--hf", hf, "--gpus", "64", "--tp", "8", "--pp", "4", "--m", "2",
                 "--neighbours", "0"]) == 2
    assert "(--global-batch defaults to one microbatch per pipeline, n = 1: give " \
           "--global-batch)" in cli_stderr(capsys)


def test_a_megatron_script_without_a_tokenizer_says_so():
    from fastpp.model import from_megatron

    with pytest.raises(ScheduleError, match=r"--vocab-size must be given \(the script names "
                                            r"no tokenizer whose vocabulary is known\)"):
        from_megatron("--num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                      "--seq-length 128", gpus=1)


def test_a_reader_that_leaves_ends_the_command_quietly():
    """``python -m fastpp list | head -1`` printed 'error: [Errno 32] Broken pipe' (exit 2)."""
    import os
    import subprocess
    import sys

    with subprocess.Popen([sys.executable, "-m", "fastpp", "list"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=dict(os.environ)) as run:
        run.stdout.close()  # before it writes: its first line meets a closed pipe
        err = run.stderr.read().decode()
        assert run.wait(timeout=120) == 1
    assert "Broken pipe" not in err and "Traceback" not in err, err


def test_simulate_without_p_and_n_names_its_command(capsys):
    from fastpp.__main__ import main

    with pytest.raises(SystemExit):
        main(["simulate", "-s", "1f1b", "-p", "4"])
    assert "python -m fastpp simulate: error: --schedule needs -p and -n" in \
        capsys.readouterr().err


def test_plan_summary_with_no_rows_asked_shows_none():
    """--top 0 still listed five configurations that do not fit."""
    from fastpp.model import plan
    from fastpp.model.plan import summary

    # (t = 4 at p = 2 is faster and does not fit)
    rows = plan("llama3-70b", 64, seq=8192, global_batch=64, tp=[4, 8], pp=[2, 8],
                schedules=["1f1b"], workers=1)
    assert "do not fit" in summary(rows, 3) and "do not fit" not in summary(rows, 0)


@pytest.mark.parametrize("axes", [dict(p=[2, 4, 2]), dict(schedules=["1f1b", "gpipe", "1f1b"]),
                                  dict(comm=[0, 0.1, 0.0]), dict(n_per_p=[1, 2, 1]),
                                  dict(costs=[fastpp.Costs(1, 2), fastpp.Costs(1, 3),
                                              fastpp.Costs(1.0, 2.0)])])
def test_a_sweep_axis_takes_each_value_once(axes):
    """-p 2 2 wrote each point twice and counted them as simulated points; plan already took
    each value of an axis once (wave 9), and so does a sweep now, in the order given."""
    once = {k: list(dict.fromkeys(v)) for k, v in axes.items()}
    if "costs" in axes:  # (Costs objects: equal ones, not the same object)
        once = {"costs": [axes["costs"][0], axes["costs"][1]]}
    base = {"schedules": ["1f1b"], "p": [2], "progress": False}
    twice, single = (fastpp.sweep(**{**base, **a}) for a in (axes, once))
    assert len(twice) == len(single) and twice.equals(single)


# -- measured runs: what a trial of measure, read and report found ----------------------------

TRACES = __import__("pathlib").Path(__file__).parent / "data"


@pytest.mark.parametrize("labels, match", [
    ({1: "1f1b", "1": "gpipe"}, r"schedules' labels must name different folders \(got 1 and "
                                r"'1', both '1'\)"),
    ({"../../escape": "1f1b"}, r"schedules' labels must be plain folder names, each run's "
                               r"folder under out \(got '../../escape'\)"),
    ({"..": "1f1b"}, r"plain folder names"),
])
def test_measure_many_labels_name_their_own_folders(tmp_path, labels, match):
    """Two labels of one folder ran the second job's schedule for both and read its traces
    twice; a label with '..' wrote outside out. Refused before any rank starts."""
    from fastpp.measured import measure_many

    with pytest.raises(ScheduleError, match=match):
        measure_many(labels, 2, 4, out=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_an_earlier_runs_steps_are_not_read_as_this_ones(tmp_path):
    """A 3-step run's step2 stayed beside a later 2-step run's steps, and the report showed
    it as the later run's last step."""
    from fastpp.measured.runner import Job, _prepare

    for k in range(3):
        (tmp_path / f"step{k}").mkdir()
        (tmp_path / f"step{k}" / "rank0_trace.json").write_text("{}")
    (tmp_path / "step9x").mkdir()  # not a step folder: left alone
    (tmp_path / "step9x" / "rank0_trace.json").write_text("{}")
    (tmp_path / "step1" / "notes.txt").write_text("mine")  # no trace: kept, and its folder
    (tmp_path / "step2" / "rank0_trace.json.bak").write_text("mine")
    (tmp_path / "step5").mkdir()  # empty before: not this code's to remove
    job = Job(**{**{f.name: None for f in __import__("dataclasses").fields(Job)},
                 "out": str(tmp_path)})
    _prepare(job, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step1", "step2", "step5", "step9x"]
    assert [p.name for p in (tmp_path / "step1").iterdir()] == ["notes.txt"]
    assert [p.name for p in (tmp_path / "step2").iterdir()] == ["rank0_trace.json.bak"]


def test_a_missing_forward_on_the_first_rank_is_named(tmp_path):
    """Without 'Forward 0' on rank 0 of a 2-stage GPipe run, the reader took stage 0's 3
    forwards as n (a tie, the first rank's) and blamed a good op's microbatch 3."""
    import gzip
    import json

    source = TRACES / "gpipe"
    for f in source.iterdir():
        events = json.loads(gzip.decompress(f.read_bytes()))
        if f.name.startswith("rank0"):
            events["traceEvents"] = [e for e in events["traceEvents"]
                                     if e.get("name") != "Forward 0"]
        (tmp_path / f.name).write_bytes(gzip.compress(json.dumps(events).encode()))
    with pytest.raises(ScheduleError, match=r"missing 1 op\(s\): 0F0"):
        fastpp.read_torch_trace(tmp_path)


def test_numpy_integers_are_integers_for_measure():
    """probe=np.int64(2), warmup and timeout as NumPy numbers were refused, where p, layers and
    steps took them."""
    from fastpp.measured.runner import _probe, _timeout

    assert _probe(np.int64(2)) == 2 and _timeout(np.float32(5)) == 5.0
    with pytest.raises(ScheduleError, match=r"probe must be an integer >= 0 \(got -1\)"):
        _probe(-1)


def test_read_torch_trace_of_an_empty_path():
    """'' read the current folder."""
    with pytest.raises(ScheduleError, match=r"path must be a trace file, a folder of them or a "
                                            r"list of files \(got ''\)"):
        fastpp.read_torch_trace("")


@pytest.mark.parametrize("argv, match", [
    (["measure", "-s", "1f1b", "--out", "runs", "--trace", "runs/trace.json"],
     "error: --trace must be outside --out 'runs', whose .json files are read as the ranks' "
     "traces (got 'runs/trace.json')"),
    (["measure", "-s", "1f1b", "-p", "3", "-n", "3", "--costs-from", str(TRACES / "gpipe")],
     "error: --costs-from must be a run of this run's 3 ranks, whose costs price it (got a "
     "run of p=2)"),
])
def test_measure_refuses_before_the_run(tmp_path, monkeypatch, capsys, argv, match):
    """A Perfetto trace written into --out was read as a rank's by the next run, after it;
    costs of another p failed after the run, naming costs.f."""
    from helpers import cli_stderr

    from fastpp.__main__ import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert main(argv) == 2
    assert match in cli_stderr(capsys)
    assert not list((tmp_path / "runs").iterdir())  # no rank ran


def test_report_data_cannot_end_or_change_its_script_element():
    from fastpp.reports.page import _json

    text = _json({"label": "x</script><!--<script>"})
    assert "<" not in text and __import__("json").loads(text)["label"] == "x</script><!--<script>"


# -- search: a split backward that costs more ----------------------------------------------


DEARER = [fastpp.Costs(f=1, b=2, w=1, i=2), fastpp.Costs(f=1, b=2, w=1, overhead=1.0),
          fastpp.Costs(f=1, b=2, w=1, overhead={"W": 1.0})]
UNEVEN = fastpp.Costs(f=[1, 1.5], b=[2, 3], w=[1, 0.5], i=[1.5, 3])  # per device: p = 2


@pytest.mark.parametrize("costs, p, n", [(c, p, n) for c in DEARER
                                         for p, n in ((1, 4), (2, 4), (2, 6))]
                         + [(UNEVEN, 2, 4), (UNEVEN, 2, 6)])
@pytest.mark.parametrize("method", ["heuristic", "auto", "exact"])
def test_no_bound_or_optimum_that_1f1b_beats(costs, p, n, method):
    """With a split backward dearer than a whole one (Costs.i, overhead), every method returned
    split schedules as proven optimal (bound 18 at p=2, n=4) where 1F1B, which splits none,
    takes 15 within the same memory."""
    if method == "exact":
        pytest.importorskip("ortools")
    one = fastpp.simulate(build_schedule("1f1b", p, n), costs)
    found = fastpp.optimize(p, n, costs, memory=p, method=method, time_limit=2,
                            progress=False)
    assert found.lower_bound <= one.makespan * (1 + 1e-12)
    assert found.value <= one.makespan * (1 + 1e-12)
    assert fastpp.simulate(found.schedule, costs).makespan == found.value
    # the V placement has no whole-backward schedule to offer, but its bound holds one: ZB-V
    # with each I run as a whole B and no W
    from fastpp.schedule import Schedule

    zbv = build_schedule("zbv", p, n)
    whole = Schedule.from_tokens([[x.replace("I", "B") for x in row if "W" not in x]
                                  for row in zbv.tokens()], zbv.stage_to_device, n=n, m=2,
                                 routes=np.stack([zbv.route_first, zbv.route_last], axis=1))
    ran = fastpp.simulate(whole, costs)
    v = fastpp.optimize(p, n, costs, memory=ran.peak_activations.max(), placement="v",
                        method="heuristic", progress=False)
    assert v.lower_bound <= ran.makespan * (1 + 1e-12)


def test_replicate_checked_where_it_is_read():
    """A review of the change: a string replicate in transformer_costs' keywords reached a
    comparison (TypeError); 2**70 overflowed; a RunGrid whose d cp replicate does not divide
    priced ZeRO-3 as if it did (3 // 2); the expert message named a zero not given."""
    from fastpp.model import RunGrid, transformer_costs
    from fastpp.model.stages import stage_table

    schedule = build_schedule("1f1b", 2, 4)
    with pytest.raises(ScheduleError, match="replicate must be a positive integer"):
        transformer_costs("mixtral-8x7b", schedule, seq=4096, tp=1, dp=4, replicate="2")
    with pytest.raises(ScheduleError, match="replicate must be at most 2,147,483,647"):
        RunConfig(seq=2048, global_batch=8, d=4, replicate=2**70)
    one = np.ones(1, np.int64)
    grid = RunGrid(seq=64, microbatch=one, t=one, d=3 * one, p=2 * one, m=one,
                   recompute=0 * one, zero=3, replicate=2)
    with pytest.raises(ScheduleError, match=r"replicate=2 must divide d \* cp"):
        stage_table(fastpp.model.MODELS["llama3-8b"], fastpp.model.HARDWARE["H100-80GB"], grid,
                    config=np.zeros(2, np.int64), layers=np.array([16.0, 16.0]),
                    embedding=np.array([True, False]), loss=np.array([False, True]))
    with pytest.raises(ScheduleError, match=r"must divide the expert-data-parallel replicas .* "
                                            r"\(got zero=3, d \* cp = 4, edp = 1\)"):
        transformer_costs("mixtral-8x7b", schedule, seq=4096, tp=1, dp=4, ep=4, zero=3,
                          replicate=2)


def test_explain_hints_at_the_global_batch_only_for_the_microbatch_count(capsys):
    from pathlib import Path

    from helpers import cli_stderr

    from fastpp.__main__ import main

    hf = str(Path(__file__).parent / "data" / "hf" / "qwen3-8b.json")
    assert main(["explain", "--hf", hf, "--gpus", "6", "--tp", "3", "--seq", "4095",
                 "--neighbours", "0"]) == 2
    err = cli_stderr(capsys)
    assert "--tp must divide the heads" in err and "--global-batch" not in err


@pytest.mark.parametrize("name, placement", [("zb-h1", "loop"), ("zbv", "v"), ("v-min", "v")])
def test_a_split_schedule_run_whole(name, placement):
    """``Problem.whole_backwards``: every ``I`` a ``B`` in its place, every ``W`` dropped; its
    peak never above the split one's, and with a whole backward cheaper than I + W, faster
    here (the search offers it: the V placement has no registered one)."""
    from fastpp.ops import B, I, W
    from fastpp.search.problem import Problem

    costs = fastpp.Costs(f=1, b=2, w=1, i=2)
    split = build_schedule(name, 4, 8)
    problem = Problem.build(4, 8, costs, None, placement, "makespan")
    whole = problem.whole_backwards(split)
    for r in range(4):
        kinds = split.ops[0, r, :split.length[r]]
        assert list(whole.ops[0, r, :whole.length[r]]) == [B if k == I else k for k in kinds
                                                           if k != W]
    ran, before = fastpp.simulate(whole, costs), fastpp.simulate(split, costs)
    assert (ran.peak_activations <= before.peak_activations + 1e-12).all()
    assert ran.makespan < before.makespan


# -- the core API: a trial of schedules, theory and io ---------------------------------------


@pytest.mark.parametrize("fb", [0.25, 1.5, 4.0])
def test_dualpipe_idle_closed_form_only_where_it_holds(fb):
    """theory.idle('dualpipe') gave -2.25, 1.5 and 9.0 where simulate gives 10.75, 4.5 and 11:
    the form holds for a pair between its longer half and both halves in a row."""
    assert fastpp.theory.idle("dualpipe", 8, 20, 1, f=1, b=2, w=1, fb=fb) is None
    for fb in (2.0, 2.5, 3.0):  # inside: the simulated idle
        ran = fastpp.simulate(build_schedule("dualpipe", 8, 20), fastpp.Costs(f=1, b=2, w=1,
                                                                              fb=fb))
        assert fastpp.theory.idle("dualpipe", 8, 20, 1, f=1, b=2, w=1, fb=fb) == \
            pytest.approx((ran.makespan - ran.busy).max())


def test_theory_takes_g_as_build_schedule_does():
    with pytest.raises(ScheduleError, match=r"G must not be given for '1f1b': it takes no "
                                            r"options \(got G=2\)"):
        fastpp.theory.idle("1f1b", 4, 8, G=2)
    assert build_schedule("interleaved-1f1b", 4, 8, 2, G=None).n == 8  # None: the default
    with pytest.raises(ScheduleError, match=r"gamma must be in \[0, 1\] \(got -1\)"):
        fastpp.theory.peak_activations("zb-h1", 4, 8, gamma=-1)


@pytest.mark.parametrize("call", [lambda: build_schedule("1f1b", "4", 4),
                                  lambda: build_schedule("1f1b", None, 4),
                                  lambda: build_schedule(None, 4, 4)])
def test_a_wrong_type_is_a_type_error(call):
    """simulate.md: a wrong-type argument raises ScheduleTypeError (also a TypeError);
    build_schedule's counts and name raised a plain ScheduleError."""
    with pytest.raises(fastpp.ScheduleTypeError):
        call()


@pytest.mark.parametrize("rows, keywords, match", [
    ([["0F0", "0B0"], ["1F0", "1B0"]], dict(routes=[[1, 0]]),
     r"routes must hold 0 <= first <= last < V=2 for each microbatch \(got \[1, 0\] for "
     r"microbatch 0\)"),
    ([[], []], {}, r"rows must hold at least one op \(got no op on any device\)"),
])
def test_from_tokens_says_what_is_wrong(rows, keywords, match):
    """routes in the right shape were refused 'got shape (1, 2)'; no op at all said 'every
    stage 0..-1 ... (missing [])'."""
    with pytest.raises(ScheduleError, match=match):
        fastpp.Schedule.from_tokens(rows, **keywords)
