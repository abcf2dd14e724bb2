"""Bad input to the readers of models and runs and to the planner (the ninth wave, a fuzz of 4
December 2026, night) ends in a ``ScheduleError`` naming what is wrong: never another library's
error, a number priced as given that no run has, nor a run its own framework refuses priced as
if it could start.

One test per defect; each input escaped or was accepted before its fix (the docstring says
how). The vTrain table's, the op table's, the empirical noise's, the hardware's rates and the
expert imbalance's are beside their own tests (test_vtrain.py, test_whatif.py, test_noise.py,
test_compute.py, test_moe.py).
"""

import json
import tomllib
from pathlib import Path

import pytest

from fastpp import ScheduleError
from fastpp.__main__ import main
from fastpp.model import from_hf, from_megatron, from_torchtitan
from fastpp.model.layout import parse_layout

DATA = Path(__file__).parent / "data"
SHAPE = ("pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
         "--seq-length 4096 --vocab-size 32000 ")
LONG = "9" * 5000  # past int()'s 4,300 digits


def config(name: str) -> dict:
    return json.loads((DATA / "hf" / f"{name}.json").read_text())


def test_config_files_that_cannot_be_read(tmp_path):
    """A folder named config.json (IsADirectoryError), a NUL in the path (ValueError), a
    number of 5,000 digits (ValueError) and JSON nested 100,000 deep (RecursionError)
    escaped ``from_hf``."""
    (tmp_path / "folder" / "config.json").mkdir(parents=True)
    with pytest.raises(ScheduleError, match="config must be a readable config.json .*Is a "
                                            "directory"):
        from_hf(tmp_path / "folder")
    with pytest.raises(ScheduleError, match="config must be a readable config.json .*null"):
        from_hf("a\0b.json")
    (tmp_path / "long.json").write_text(f'{{"hidden_size": {LONG}}}')
    with pytest.raises(ScheduleError, match="config must be a readable config.json .*digits"):
        from_hf(tmp_path / "long.json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ScheduleError, match=r"deep.json is not JSON \(nested too deep\)"):
        from_hf(tmp_path / "deep.json")
    with pytest.raises(ScheduleError, match="model_type must be one of"):  # (a TypeError)
        from_hf({"model_type": [1], "text_config": {}})


@pytest.mark.parametrize("name, change, message", [
    # transformers divides by them: a 0 was read as 1
    ("qwen3-30b-a3b", {"decoder_sparse_step": 0}, "'decoder_sparse_step' must be an integer "
                                                  "in 1..2"),
    ("deepseek-v3", {"moe_layer_freq": 0}, "'moe_layer_freq' must be an integer in 1..2"),
    # ignored: a layer the model does not have, a string for a list
    ("qwen3-30b-a3b", {"mlp_only_layers": [100]}, r"'mlp_only_layers' must be a list of layer "
                                                  r"indices in 0..47 \(got \[100\]\)"),
    ("gpt-oss-20b", {"layer_types": "sliding_attention"}, "'layer_types' must be null or a "
                                                          "list of 24 names"),
    ("gpt-oss-20b", {"layer_types": ["sliding_attention"]}, "list of 24 names"),
])
def test_hf_fields_transformers_would_refuse(name, change, message):
    with pytest.raises(ScheduleError, match=message):
        from_hf({**config(name), **change})


def test_toml_that_cannot_be_read(tmp_path):
    """A NUL in the path, a 5,000-digit number and arrays nested 100,000 deep escaped
    ``from_torchtitan`` (ValueError, RecursionError)."""
    with pytest.raises(ScheduleError, match=r"job must be a readable TOML file"):
        from_torchtitan("a\0.toml", 8)
    (tmp_path / "long.toml").write_text(f"[training]\nseq_len = {LONG}\n")
    (tmp_path / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    for name, why in (("long", "digits"), ("deep", "nested too deep")):
        with pytest.raises(ScheduleError, match=rf"{name}.toml is not TOML \(.*{why}"):
            from_torchtitan(tmp_path / f"{name}.toml", 8)


def test_torchtitan_fields_of_the_wrong_kind():
    """A list for the model's name (TypeError: unhashable), and an interval written in
    Unicode digits or 5,000 of them (ValueError from int())."""
    job = tomllib.loads((DATA / "torchtitan" / "llama3_8b.toml").read_text())
    with pytest.raises(ScheduleError, match=r"\[model\] name and flavor must be one of"):
        from_torchtitan({**job, "model": {"name": [1], "flavor": "8B"}}, 64)
    for option in ("²", LONG):
        with pytest.raises(ScheduleError, match="selective_ac_option must be 'op' or a layer "
                                                "interval >= 0"):
            from_torchtitan({**job, "activation_checkpoint": {
                "mode": "selective", "selective_ac_option": option}}, 64)
    every = from_torchtitan({**job, "activation_checkpoint": {
        "mode": "selective", "selective_ac_option": "3"}}, 64)[1]
    assert every.recompute == "full"  # every third layer checkpointed whole
    # 0: torchtitan's _apply_layer_sac checkpoints every layer (it had been refused)
    zero = from_torchtitan({**job, "activation_checkpoint": {
        "mode": "selective", "selective_ac_option": "0"}}, 64)[1]
    assert (zero.recompute, zero.recompute_method) == ("full", None)


def test_megatron_counts_int_cannot_read():
    """``"²".isdigit()`` is True and ``int("²")`` a ValueError: in --moe-layer-freq, an array
    index and torchrun's --nproc_per_node; and a $((...)) of 5,000 terms recursed past
    Python's limit."""
    for freq in ("²", LONG):
        with pytest.raises(ScheduleError, match="--moe-layer-freq must be an integer or a "
                                                "list pattern"):
            from_megatron(SHAPE + f"--num-experts 8 --moe-layer-freq {freq}", 8)
    with pytest.raises(ScheduleError, match="GPU count must be given"):
        from_megatron("torchrun --nproc_per_node ² " + SHAPE)
    with pytest.raises(ScheduleError, match="needs the variable 'B'"):
        from_megatron("A=(32)\nB=${A[²]}\n" + SHAPE.replace("32", "$B", 1), 8)
    deep = "L=$((" + "+".join(["1"] * 5000) + "))\n" + SHAPE.replace("32", "$L", 1)
    with pytest.raises(ScheduleError, match="needs the variable 'L'"):
        from_megatron(deep, 8)


def test_layout_count_of_5000_digits():
    """int() refused the count (ValueError)."""
    with pytest.raises(ScheduleError, match=r"layout must repeat at most 1,000,000 times"):
        parse_layout(f"Et*{LONG}|tL")


def test_explain_global_batch_zero(capsys):
    """``--global-batch 0`` was replaced by the default (exit 0); ``--microbatch 0`` was
    reported as a global batch of 0, which the user had not given. Each is now refused by
    the command line's parser, naming the flag (exit 2)."""
    hf = str(DATA / "hf" / "qwen3-8b.json")
    for flag in ("--global-batch", "--microbatch"):
        with pytest.raises(SystemExit) as stop:
            main(["explain", "--hf", hf, "--gpus", "8", flag, "0", "--neighbours", "0"])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {flag}: must be a positive integer (got 0)" in err, err


def test_megatron_values_its_argparse_refuses():
    """``--fp8-format bogus`` was priced as fp8 and ``--attention-backend bogus`` as
    FlashAttention; a pattern of floats, ``[1.0]*32``, passed as ones and failed later naming
    ``dense_layers``."""
    for flag, choices in (("--fp8-format", "['e4m3', 'hybrid']"),
                          ("--attention-backend", "['flash', 'fused', 'unfused', 'local'")):
        with pytest.raises(ScheduleError, match=rf"{flag} must be one of \{choices[:-1]}"):
            from_megatron(SHAPE + f"{flag} bogus", 8)
    with pytest.raises(ScheduleError, match=r"--moe-layer-freq's pattern must give 0 or 1 for "
                                            r"each of the 32 layers \(got 1.0 for layer 0\)"):
        from_megatron(SHAPE + "--num-experts 8 --moe-layer-freq [1.0]*32", 8)


def test_planner_inputs_it_priced_as_given():
    """``plan(reduce_bytes=1e30)`` priced a 7e27 s step (``RunConfig`` takes 2 or 4 alone);
    ``RunConfig(recompute_modules=("x",))`` was carried unpriced and written as
    ``--recompute-modules x``."""
    from fastpp.model import RunConfig, plan

    with pytest.raises(ScheduleError, match=r"reduce_bytes must be 2 or 4 \(bytes per gradient; "
                                            r"got 1e\+30\)"):
        plan("llama2-7b", 8, seq=1024, global_batch=8, reduce_bytes=1e30, workers=1)
    with pytest.raises(ScheduleError, match=r"recompute_modules must hold names among "
                                            r"\['core_attn'.*\(got 'x'\)"):
        RunConfig(seq=512, global_batch=8, p=2, d=2, recompute="selective",
                  recompute_modules=("x",))


def test_plan_axes_once_each():
    """A value given twice (``pp=[2, 2]``, a schedule twice) gave each of its rows twice; a
    bool in a list (``pp=[2, True]``) was read as 1."""
    from fastpp.model import plan

    args = dict(seq=1024, global_batch=8, tp=1, microbatch=1, recompute="none", workers=1)
    once = plan("llama2-7b", 8, pp=[2], schedules=["1f1b"], zero=[1], **args)
    twice = plan("llama2-7b", 8, pp=[2, 2], schedules=["1f1b", "1f1b"], zero=[1, 1], **args)
    assert len(once) == len(twice) == 1
    with pytest.raises(ScheduleError, match=r"pp must hold positive integers below 2\*\*31 "
                                            r"\(got \[2, True\]\)"):
        plan("llama2-7b", 8, pp=[2, True], **args)


def test_torchtitan_messages_name_what_is_wrong():
    """A mistyped path was "not TOML (Expected '=' ...)", and ``model="bogus"`` said "config
    must be a config.json", naming neither the file nor ``model`` and its presets."""
    job = tomllib.loads((DATA / "torchtitan" / "llama3_8b.toml").read_text())
    with pytest.raises(ScheduleError, match=r"job must be a TOML file, TOML text or a dict "
                                            r"\(no file configs/llama3_8b\)"):
        from_torchtitan("configs/llama3_8b", 64)
    with pytest.raises(ScheduleError, match=r"model must be a preset name among "
                                            r"\['deepseek-v3'.* or a config.json \(got 'bogus'\)"):
        from_torchtitan(job, 64, model="bogus")


def test_vtrain_batch_without_microbatch():
    """Without micro_batch_size the microbatch is global_batch_size / d: 100 sequences over 256
    replicas was "microbatch must be a positive integer (got microbatch=0)", a value the
    configuration does not hold."""
    from fastpp.model import from_vtrain

    shape = {"num_gpus": 256, "gpu_name": "A100", "tensor_parallel_size": 1,
             "data_parallel_size": 256, "pipeline_parallel_size": 1, "num_layers": 24,
             "hidden_size": 1024, "num_attention_heads": 16, "max_length": 1024,
             "inter_node_bandwidth": 800, "intra_node_bandwidth": 150, "node_size": 8}
    for batch in (100, 1000):
        with pytest.raises(ScheduleError, match=rf"global_batch_size must be a multiple of "
                                                rf"data_parallel_size = 256 without "
                                                rf"micro_batch_size \(got {batch}\)"):
            from_vtrain({**shape, "global_batch_size": batch})
    assert from_vtrain({**shape, "global_batch_size": 512}).config.microbatch == 2


def test_measure_link_delay_as_a_numpy_scalar():
    """``link_delay=np.float32(0.05)`` was refused as "must be seconds or (seconds, r1, r2)";
    NumPy's scalars pass everywhere else."""
    import numpy as np

    from fastpp.measured.runner import link_of as _link

    assert _link(np.float32(0.5), 4) == (0.5, 1, 2)
    assert _link(np.int64(1), 2) == (1.0, 0, 1)
    with pytest.raises(ScheduleError, match="link_delay must be seconds or"):
        _link(np.bool_(True), 2)


def test_measured_steps_with_ops_of_no_time():
    """Steps whose ops took 0 s gave factors of 0/0: a RuntimeWarning, step factors of 0 and
    later "measured op times must be finite and >= 0 (got [nan ...])", times never given."""
    pytest.importorskip("pandas")
    from helpers import changed_run

    import fastpp

    run = fastpp.read_torch_trace(DATA / "gpipe")
    zero = changed_run(run, durations=run.durations * 0.0)
    with pytest.raises(ScheduleError, match=r"measured steps must have ops that take time: "
                                            r"step 0's median op took 0 times its Costs time"):
        fastpp.MeasuredSteps([zero, zero]).step_factors()


def test_plan_capacity_in_the_units_given(capsys):
    """``--capacity-gb -1`` said "capacity must be finite and > 0 (got -1000000000.0)", a name
    and a unit the user had not typed; a capacity under a GB read "capacity 0 GB"."""
    from fastpp.model import plan

    assert main(["plan", "--model", "llama2-7b", "--gpus", "8", "--capacity-gb", "-1"]) == 2
    assert "--capacity-gb must be finite and > 0 (got -1)" in capsys.readouterr().err
    rows = plan("llama2-7b", 8, seq=1024, global_batch=8, tp=1, pp=[2], microbatch=1,
                recompute="none", schedules=["1f1b"], capacity=0.5e9, workers=1)
    assert rows["reason"].str.endswith("> capacity 0.5 GB").all()


def test_noise_of_a_link_some_points_lack_names_the_point():
    """A sweep over ``p = 4`` and ``p = 2`` with a delay on link (2, 3) stopped with "link_delay
    names link (2, 3), which carries no hand-off of this schedule", without saying which."""
    import fastpp

    with pytest.raises(ScheduleError, match=r"link_delay names link \(2, 3\), which carries no "
                                            r"hand-off.* \(at schedule='1f1b', p=2, n=4, m=1\)"):
        fastpp.sweep(schedules=["1f1b"], p=[4, 2], n_per_p=[2], samples=10, workers=1,
                     noise=fastpp.Noise(0.05, link_delay={(2, 3): 0.1}), progress=False)


def test_megatron_config_dicts_as_nemo_and_python_write_them():
    """NeMo's switch ``fp8: false`` was priced as fp8 (the string 'False' is true) before the
    choices and refused after them; an ``AttnBackend`` member from ``vars(args)`` is its name."""
    import enum

    shape = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 512,
             "vocab_size": 1000}
    assert from_megatron({**shape, "fp8": False}, 1).config.precision == "bf16"
    assert from_megatron({**shape, "fp8": True}, 1).config.precision == "fp8"

    class AttnBackend(enum.Enum):  # Megatron's own enum's names
        flash = 1
        unfused = 3

    for member, flash in ((AttnBackend.unfused, False), (AttnBackend.flash, True)):
        model = from_megatron({**shape, "attention_backend": member}, 1).model
        assert model.flash_attention == flash


def test_a_sweep_folder_takes_only_its_own_chunks(tmp_path):
    """``resume=True`` checked a chunk's row count alone: another sweep's part of the same
    points copied in was returned as this sweep's, ``invalid="keep"`` resumed a
    ``"drop"`` sweep's chunks, and a skip count of -100 was summed."""
    pytest.importorskip("pyarrow")
    import shutil

    import fastpp
    from fastpp.sweeps import load

    grid = dict(schedules=["1f1b", "interleaved-1f1b"], p=[2, 4], n=[3, 8], chunk_size=2,
                progress=False)
    ours, other = tmp_path / "ours", tmp_path / "other"
    want = fastpp.sweep(out=ours, **grid)
    fastpp.sweep(out=other, f=[5.0], **grid)
    shutil.copy(other / "part-000000.parquet", ours / "part-000000.parquet")
    with pytest.raises(ScheduleError, match=r"damaged chunk 0 .*its digest differs"):
        load(ours)
    assert fastpp.sweep(out=ours, resume=True, **grid).equals(want)  # recomputed
    with pytest.raises(ScheduleError, match="holds a different sweep"):
        fastpp.sweep(out=ours, resume=True, invalid="keep", **grid)
    meta = ours / "_fastpp" / "part-000001.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "skipped": {"x": -100}}))
    with pytest.raises(ScheduleError, match=r"damaged chunk 1 .*its counts are not counts"):
        load(ours)
    got = fastpp.sweep(out=ours, resume=True, **grid)
    assert got.equals(want) and got.attrs["skipped"] == want.attrs["skipped"]


def test_sweep_axes_of_odd_kinds():
    """``p=[2, True]`` ran a p = 1 point; ``p=np.array(2)`` raised NumPy's "iteration over a
    0-d array" and a 2-D array pandas' "all keys need to be the same shape"."""
    import numpy as np

    import fastpp

    with pytest.raises(ScheduleError, match=r"p must hold positive integers below 2\*\*31 \(got "
                                            r"\[2, True\]\)"):
        fastpp.sweep("1f1b", p=[2, True], n=4, progress=False)
    with pytest.raises(ScheduleError, match=r"p must be a value or a 1-D list of values \(got "
                                            r"an array of shape \(1, 2\)\)"):
        fastpp.sweep("1f1b", p=np.array([[2, 4]]), n=4, progress=False)
    assert len(fastpp.sweep("1f1b", p=np.array(2), n=4, progress=False)) == 1


def test_closed_forms_of_schedules_that_exist():
    """``theory.makespan("1f1b", 4, 8, m=3)`` gave 33.0 for a schedule ``build_schedule``
    refuses, and ``f=1e308`` an infinite makespan; a large ``n`` stays the closed forms' to
    answer."""
    from fastpp import theory

    with pytest.raises(ScheduleError, match=r"m must be 1 \(one stage per device\) for '1f1b' "
                                            r"\(got m=3\)"):
        theory.makespan("1f1b", 4, 8, m=3)
    with pytest.raises(ScheduleError, match=r"f must be in \(0, 1e\+290\] \(got 1e\+308\)"):
        theory.makespan("1f1b", 4, 8, f=1e308, b=1e308)
    assert theory.makespan("1f1b", 8, 10**9) == 3 * 10**9 + 7 * 3  # past build_schedule's size


def test_trace_cpu_op_with_a_negative_duration(tmp_path):
    """A cpu_op event of dur -1 was read: rank 0's forward time came out 14% short (the
    annotations' negative durations were refused already)."""
    pytest.importorskip("pandas")
    import gzip

    import fastpp

    for path in (DATA / "gpipe").iterdir():
        trace = json.loads(gzip.decompress(path.read_bytes()))
        if "rank0" in path.name:
            for event in trace["traceEvents"]:
                if event.get("cat") == "cpu_op":
                    event["dur"] = -1.0
        (tmp_path / path.name).write_bytes(gzip.compress(json.dumps(trace).encode()))
    with pytest.raises(ScheduleError, match=r"rank 0: a cpu_op event has a negative or NaN "
                                            r"duration \(dur=-1.0\)"):
        fastpp.read_torch_trace(tmp_path)


def test_scalar_costs_beside_a_costs_column():
    """``sweep(points=table_with_costs, f=3, comm=1)`` dropped f and comm without a word."""
    import pandas as pd

    import fastpp

    table = pd.DataFrame({"schedule": ["1f1b"], "p": [2], "n": [4], "m": [1],
                          "costs": [fastpp.Costs(f=1, b=2)]})
    with pytest.raises(ScheduleError, match=r"f must not be given with points.*\(got f, comm "
                                            r"beside points\)"):
        fastpp.sweep(points=table, f=3, comm=1, progress=False)


def test_sweep_scheduler_addresses():
    """``scheduler=5`` raised Dask's TypeError, ``"not a url"`` its ValueError (and a port with
    nobody listening its OSError, after 30 s)."""
    pytest.importorskip("dask.distributed")
    import fastpp

    for address, message in ((5, r"scheduler must be a Dask scheduler's address, such as "
                                 r"'tcp://host:8786' \(got 5\)"),
                             ("not a url", r"scheduler must be the address of a running Dask "
                                           r"scheduler \(got 'not a url': .*port")):
        with pytest.raises(ScheduleError, match=message):
            fastpp.sweep("1f1b", p=2, n=4, executor="dask", scheduler=address, progress=False)


def test_sweep_folders_the_os_cannot_use(tmp_path):
    """A NUL byte in ``out`` raised ValueError and a name of 5,000 letters OSError, from
    ``sweep`` and ``load`` alike."""
    import fastpp
    from fastpp.sweeps import load

    for out, why in ((tmp_path / ("x" * 5000), "File name too long"),
                     (str(tmp_path / "a\0b"), "embedded null byte")):
        message = rf"out must be a folder path the OS can use .*{why}"
        with pytest.raises(ScheduleError, match=message):
            fastpp.sweep("1f1b", p=2, n=4, out=out, progress=False)
        with pytest.raises(ScheduleError, match=message):
            load(out)


def test_search_and_sweep_small_ones(tmp_path):
    """``optimize(time_limit=np.int64(1))`` was refused as not a number of seconds; a points
    table naming a column twice raised pandas' "Per-column arrays must each be
    1-dimensional"; a trace whose tids are lists raised "unhashable type: 'list'"."""
    import gzip

    import numpy as np
    import pandas as pd

    import fastpp

    found = fastpp.optimize(2, 3, fastpp.Costs(f=1, b=2), time_limit=np.int64(1),
                            progress=False)
    assert found.value == fastpp.optimize(2, 3, fastpp.Costs(f=1, b=2), progress=False).value
    table = pd.DataFrame({"schedule": ["1f1b"], "p": [2], "n": [4], "m": [1]})
    with pytest.raises(ScheduleError, match=r"points must name each column once \(got \['p'\] "
                                            r"twice\)"):
        fastpp.sweep(points=pd.concat([table, table[["p"]]], axis=1), progress=False)
    folder = tmp_path
    for path in (DATA / "gpipe").iterdir():
        trace = json.loads(gzip.decompress(path.read_bytes()))
        for event in trace["traceEvents"]:
            if "tid" in event:
                event["tid"] = [1]
        (folder / path.name).write_bytes(gzip.compress(json.dumps(trace).encode()))
    with pytest.raises(ScheduleError, match=r"tid must be a number or a name \(got \[1\]\)"):
        fastpp.read_torch_trace(folder)


def test_a_report_never_replaces_its_input_or_a_good_page(tmp_path):
    """``report t.csv -o t.csv`` wrote HTML over the table; a table with an infinite number
    raised json's ValueError halfway through the page, leaving a cut-off file over the last
    good report."""
    pytest.importorskip("plotly")
    from fastpp import report
    from fastpp.model import plan

    rows = plan("llama2-7b", 8, seq=1024, global_batch=8, tp=1, pp=[2], microbatch=1,
                recompute="none", schedules=["1f1b"], workers=1)
    table = tmp_path / "plan.csv"
    rows.to_csv(table, index=False)
    with pytest.raises(ScheduleError, match=r"output must be neither an input nor inside one"):
        report(table, output=table)
    assert table.read_text().startswith("model,")
    page = tmp_path / "report.html"
    page.write_text("the last good report")
    rows.assign(step_time=float("inf")).to_csv(table, index=False)
    with pytest.raises(ScheduleError, match=r"inputs must hold finite numbers where the report "
                                            r"draws them"):
        report(table, output=page)
    assert page.read_text() == "the last good report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.csv", "report.html"]


@pytest.mark.parametrize("argv, message", [
    # after the whole sweep, as a traceback
    (["--budget", "nan"], "--budget must be activation units, finite and >= 0 (got nan)"),
    (["--budget", "zbv", "--schedules", "1f1b"], "--budget must be one of the swept --schedules "
                                                 "['1f1b'] (got 'zbv')"),
    # every point invalid: an empty table written, then an IndexError (a --w over --b is
    # refused before the sweep since wave 15)
    (["--schedules", "dualpipe", "--comm", "0", "-p", "3", "--budget", "100"],
     "no valid point to summarize, every one skipped: 6 x -p must be even for 'dualpipe' "
     "(got -p=3); 6 x -m must be 1"),
    (["--schedules", "1f1b", "--comm", "0", "-p", "2", "--w", "5"],
     "--w must be <= --b: W is the weight-gradient part of each backward (got --w=5, --b=2)"),
])
def test_sweep_script_refuses_before_or_instead_of_a_traceback(tmp_path, argv, message):
    from test_bad_input_wave6 import run_script

    err = run_script("sweep.py", *argv, "--no-plots", "--no-progress", "--out", str(tmp_path),
                     cwd=tmp_path)
    assert message in err, err


def test_sweep_script_deletes_only_a_sweeps_parts(tmp_path):
    """``--out DIR`` deleted ``DIR/parts`` whatever it held."""
    from test_bad_input_wave6 import run_script

    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "mine.txt").write_text("not a sweep's")
    err = run_script("sweep.py", "--no-plots", "--out", str(tmp_path), cwd=tmp_path)
    assert "holds a 'parts' folder that is not a sweep's" in err
    assert (tmp_path / "parts" / "mine.txt").read_text() == "not a sweep's"


def test_a_report_of_a_table_without_a_name(tmp_path):
    """A sweep row without its schedule raised "'<' not supported between instances of 'str'
    and 'float'" from inside the budget's summary."""
    pytest.importorskip("plotly")
    import fastpp
    from fastpp import report

    rows = fastpp.sweep(["1f1b", "gpipe"], p=2, n=4, progress=False)
    rows["schedule"] = rows["schedule"].astype(object)
    rows.loc[0, "schedule"] = None
    with pytest.raises(ScheduleError, match=r"must hold names in its sweep's column 'schedule' "
                                            r"\(got None in row 0\)"):
        report(rows, output=tmp_path / "r.html")


def test_a_coarse_grid_marks_the_ops_it_cannot_draw_apart():
    """With forwards 100 times shorter than backwards, ``show`` drew device 0's four
    forwards as one ``0F1``: the others were drawn over, and the picture said nothing."""
    from fastpp import Costs, build_schedule, simulate

    grid = simulate(build_schedule("1f1b", 2, 4), Costs(f=0.01, b=1.0)).grid()
    device0 = grid.splitlines()[1].split()[2:]  # (after "device  0:")
    assert device0[0] == "0F0+"  # F0 and F1 in the first step, which shows the first and '+'
    assert device0.count("0F2+") == 1 and "0F1" not in device0


def test_a_report_of_huge_points_draws_no_timeline(tmp_path):
    """A sweep table with p = 10**6 (within the 4,000,000 ops a point may have) ran past two
    minutes re-simulating timelines for the page."""
    pytest.importorskip("plotly")
    import fastpp
    from fastpp import report
    from fastpp.reports.figures import resimulate

    rows = fastpp.sweep(["1f1b"], p=2, n=[4], progress=False)
    assert resimulate(next(rows.itertuples())) is not None
    rows = rows.assign(p=10**6, n=1)
    assert resimulate(next(rows.itertuples())) is None  # 3 million ops: no timeline
    assert report(rows, output=tmp_path / "r.html").stat().st_size > 0


def test_pictures_of_tables_they_cannot_draw(tmp_path):
    """``bubble_heatmaps`` of no rows raised ZeroDivisionError, of p = 0 divided by zero,
    of a text metric NumPy's ValueError and of negative values matplotlib's; ``plan_scatter``
    of text ``fits`` raised a TypeError and drew negative bytes on a log axis."""
    pytest.importorskip("matplotlib")
    import fastpp
    from fastpp import plot
    from fastpp.model import plan

    rows = fastpp.sweep(["1f1b", "gpipe"], p=[2, 4], n_per_p=[1, 2], progress=False)
    for bad, metric, message in ((rows.iloc[:0], "bubble_ratio", "must hold a sweep's rows"),
                                 (rows.assign(p=0), "bubble_ratio", "p column must hold positive"),
                                 (rows, "schedule", "metric column 'schedule' must be a number"),
                                 (rows.assign(bubble_ratio=-1.0), "bubble_ratio",
                                  "metric column 'bubble_ratio' must be finite and >= 0")):
        with pytest.raises(ScheduleError, match=message):
            plot.bubble_heatmaps(bad, tmp_path / "h.png", metric=metric)
    table = plan("llama2-7b", 8, seq=1024, global_batch=8, tp=1, pp=[2], microbatch=1,
                 recompute="none", schedules=["1f1b"], workers=1)
    with pytest.raises(ScheduleError, match="fits column must hold bools"):
        plot.plan_scatter(table.assign(fits="yes"), tmp_path / "s.png")
    with pytest.raises(ScheduleError, match="peak_memory column must be finite and > 0"):
        plot.plan_scatter(table.assign(peak_memory=-1.0), tmp_path / "s.png")


def test_unused_arguments_and_values_that_leave_json(tmp_path):
    """``optimize(lam=nan)`` and ``samples=-1`` passed without noise (unused, but not checked);
    a plan table's ``fits`` of NaN was drawn as fitting; ``time_scale=1e308`` wrote a trace
    holding Infinity, which no JSON reader takes."""
    import fastpp
    from fastpp import Costs, build_schedule, simulate, trace

    for bad, message in (({"lam": float("nan")}, r"lam must be in \[0, 1e\+06\] \(got nan\)"),
                         ({"samples": -1}, r"samples counts each candidate.s Monte Carlo "
                                           r"timelines: give noise="),
                         ({"noise_seed": "x"}, r"noise_seed must be an integer")):
        with pytest.raises(ScheduleError, match=message):
            fastpp.optimize(2, 3, Costs(f=1, b=2), progress=False, **bad)
    result = simulate(build_schedule("1f1b", 2, 4), Costs(f=1, b=2))
    with pytest.raises(ScheduleError, match=r"time_scale must keep the times finite \(got "
                                            r"1e\+308"):
        trace.write_chrome_trace(result, tmp_path / "t.json", time_scale=1e308)
    pytest.importorskip("plotly")
    from fastpp import report
    from fastpp.model import plan

    rows = plan("llama2-7b", 8, seq=1024, global_batch=8, tp=1, pp=[2], microbatch=1,
                recompute="none", schedules=["1f1b"], workers=1)
    with pytest.raises(ScheduleError, match=r"must hold true or false in its plan's column "
                                            r"'fits' \(got float64\)"):
        report(rows.assign(fits=float("nan")), output=tmp_path / "r.html")
