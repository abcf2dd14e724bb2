"""vTrain's configuration files read as a model, a run and a cluster (``from_vtrain``)."""

import dataclasses
import json

import pytest
from helpers import needs_data

from fastpp import ScheduleError, ScheduleTypeError
from fastpp.model import HARDWARE, RunConfig, from_vtrain, plan, to_vtrain, vtrain_cluster
from fastpp.model.explain import explain
from fastpp.model.validate import DATA
from fastpp.model.validate_small import COLUMNS, vtrain_frame, vtrain_rows, vtrain_table

# one of vTrain's multi-node validation configurations, as its repository holds it
# (config/validation/multi/config_val_39B_2_16_16_2.json)
MULTI = {"num_gpus": 512, "gpu_name": "A100", "tensor_parallel_size": 2,
         "data_parallel_size": 16, "pipeline_parallel_size": 16, "global_batch_size": 1536,
         "micro_batch_size": 2, "num_layers": 48, "hidden_size": 8192,
         "num_attention_heads": 64, "max_length": 2048, "use_gradient_bucket": False,
         "use_checkpoint": True, "pipeline_scheduling": "1f1b", "inter_node_bandwidth": 800,
         "intra_node_bandwidth": 150, "node_size": 8, "trace_path": "trace"}


def _config(row) -> dict:
    """A row of ``vtrain_single_node_a.csv`` as the configuration vTrain ran it from."""
    return {"num_gpus": int(row["gpus"]), "tensor_parallel_size": int(row["t"]),
            "data_parallel_size": int(row["d"]), "pipeline_parallel_size": int(row["p"]),
            "global_batch_size": int(row["global_batch"]),
            "micro_batch_size": int(row["microbatch"]), "num_layers": int(row["layers"]),
            "hidden_size": int(row["hidden"]), "num_attention_heads": int(row["heads"]),
            "max_length": int(row["seq"]), "use_checkpoint": True}


@needs_data("vtrain_single_node_a.csv")
def test_a_configuration_is_priced_as_its_measured_row():
    """Read and planned, each configuration gives ``validate``'s price of its row: every
    tensor, data and pipeline split, microbatch and model of the file."""
    frame = vtrain_frame(DATA)
    rows = vtrain_rows(HARDWARE["A100-80GB"], DATA)
    picked = frame.drop_duplicates(["t", "d", "p", "microbatch", "hidden"]).index[::3]
    assert len(picked) > 40
    for i in picked:
        run = from_vtrain(_config(frame.loc[i]))
        step = plan(run.model, hardware=run.hardware, config=run.config)["step_time"].iloc[0]
        assert 1e3 * step == pytest.approx(rows[i][4], rel=1e-12), rows[i][1]


def test_a_multi_node_configuration(tmp_path):
    path = tmp_path / "config_val_39B_2_16_16_2.json"
    path.write_text(json.dumps(MULTI))
    run = from_vtrain(path)
    model, config = run
    assert model.name == "config_val_39B_2_16_16_2"
    assert (model.layers, model.hidden, model.heads, model.vocab) == (48, 8192, 64, 50432)
    assert model.tied_embeddings and model.dropout and not model.flash_attention
    assert (config.t, config.d, config.p, config.microbatch, config.n) == (2, 16, 16, 2, 48)
    assert (config.recompute, config.zero, config.reduce_bytes) == ("full", 0, 2.0)
    assert not config.gradient_overlap and not config.sequence_parallel
    assert run.gpus == 512
    assert run.ignored == ("intra_node_bandwidth", "trace_path",
                           "fp16 (vTrain's runs): priced as bf16")
    # 800 Gb/s a node over 8 GPUs: 100 Gb/s each, at 90% of the line rate
    assert run.hardware.network.bandwidth == pytest.approx(0.9 * 100e9 / 8)
    assert run.hardware.gpus_per_node == 8
    assert run.hardware.peak_flops == HARDWARE["A100-80GB"].peak_flops
    row = plan(model, hardware=run.hardware, config=config).iloc[0]
    faster = plan(model, hardware=vtrain_cluster(1600), config=config).iloc[0]
    assert row["fits"] and row["step_time"] > faster["step_time"]
    # within a node the network is not used
    one_node = {**MULTI, "num_gpus": 8, "data_parallel_size": 1, "pipeline_parallel_size": 4,
                "global_batch_size": 32, "num_layers": 8, "hidden_size": 1024,
                "num_attention_heads": 16}
    run = from_vtrain(one_node)
    steps = [plan(run.model, hardware=vtrain_cluster(bw), config=run.config)["step_time"]
             .iloc[0] for bw in (800, 1600)]
    assert steps[0] == steps[1]


def test_one_degree_is_derived_as_vtrain_derives_it():
    partial = {**MULTI, "data_parallel_size": None}
    assert from_vtrain(partial).config.d == 16
    # without a pipeline and without a microbatch, one microbatch a replica, as vTrain takes
    flat = {**MULTI, "pipeline_parallel_size": 1, "data_parallel_size": 256,
            "micro_batch_size": None}
    assert from_vtrain(flat).config.microbatch == 1536 // 256
    assert from_vtrain({**flat, "micro_batch_size": 2}).config.microbatch == 2
    del partial["data_parallel_size"]
    assert from_vtrain(partial).config.d == 16
    no_gpus = {k: v for k, v in MULTI.items() if k != "num_gpus"}
    assert from_vtrain(no_gpus).gpus == 512


@pytest.mark.parametrize("change, message", [
    ({"gpu_name": "V100"}, r"gpu_name must be 'A100'.*got gpu_name='V100'"),
    ({"model_arch": "Bert"}, r"model_arch must be 'ShardedGptModel'"),
    ({"pipeline_scheduling": "gpipe"}, r"pipeline_scheduling must be '1f1b'"),
    ({"num_gpus": 256}, r"num_gpus must be .* = 512 \(got num_gpus=256\)"),
    ({"data_parallel_size": None, "pipeline_parallel_size": None},
     r"data_parallel_size must be given"),
    ({"data_parallel_size": None, "num_gpus": 100}, r"num_gpus must be a multiple of .* 32"),
    ({"micro_batch_size": None}, r"micro_batch_size must be given"),
    ({"micro_batch_size": 0}, r"micro_batch_size must be a positive integer"),
    ({"num_attention_heads": 63}, r"num_attention_heads must be a multiple of"),
    ({"use_checkpoint": "yes"}, r"use_checkpoint must be true or false"),
    ({"hidden_size": 8192.5}, r"hidden_size must be a positive integer"),
    ({"node_size": 0}, r"node_size must be a positive integer"),
    ({"global_batch_size": 1000}, r"global_batch must be a multiple of microbatch \* d"),
    ({"seq_length": 2048}, r"'seq_length' is not a vTrain configuration key"),
    ({"num_layers": 50}, r"num_layers must be a multiple of pipeline_parallel_size = 16"),
    ({"inter_node_bandwidth": 10**400}, r"inter_node_bandwidth must be at most"),
    ({"vocab_size": 10**30}, r"vocab_size must be at most"),
    ({"intra_node_bandwidth": "fast"}, r"intra_node_bandwidth must be a positive integer"),
    ({"trace_path": 3}, r"trace_path must be a string"),
    ({"ddp_bucket_size": -1}, r"ddp_bucket_size must be a positive integer"),
    ({"use_gradient_bucket": 1}, r"use_gradient_bucket must be true or false"),
    ({3: 4}, r"3 is not a vTrain configuration key"),
    # a null is "not given" only where vTrain's default is None
    ({"hidden_size": None}, r"hidden_size must be given a value, or left out .* 20480"),
    ({"use_checkpoint": None}, r"use_checkpoint must be given a value"),
])
def test_bad_configurations_are_named(change, message):
    with pytest.raises(ScheduleError, match=message):
        from_vtrain({**MULTI, **change})


def test_bad_files_are_named(tmp_path):
    with pytest.raises(ScheduleError, match="no file"):
        from_vtrain(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ScheduleError, match="is not JSON"):
        from_vtrain(tmp_path / "bad.json")
    with pytest.raises(ScheduleError, match="config must be a dict"):
        from_vtrain(3)
    with pytest.raises(ScheduleError, match="inter_node_bandwidth must be a positive integer"):
        vtrain_cluster(0)


def test_explain_cli_reads_a_vtrain_file(capsys, tmp_path):
    from fastpp.__main__ import main

    path = tmp_path / "config_val_39B_2_16_16_2.json"
    path.write_text(json.dumps(MULTI))
    assert main(["explain", "--vtrain", str(path), "--neighbours", "1", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "on 512 x A100-80GB (800 Gb/s a node): t=2 cp=1 p=16 d=16" in out
    assert "not modelled: intra_node_bandwidth trace_path" in out
    for flags, message in ((["--hardware", "A100-80GB"], "--hardware must not be given"),
                           (["--model", "llama3-8b"], "--model must not be given with --vtrain"),
                           (["--gpus", "64"], "--gpus must be the file's num_gpus, 512"),
                           (["--tp", "2"], "--tp must be given with --hf only: --vtrain")):
        assert main(["explain", "--vtrain", str(path), *flags]) == 2
        assert message in capsys.readouterr().err


def test_to_vtrain_gives_the_configuration_back(tmp_path):
    run = from_vtrain(MULTI, name="39B")
    written = to_vtrain(run.config, run.model, run.hardware)
    assert {k: v for k, v in written.items() if k in MULTI} == {
        k: v for k, v in MULTI.items() if k not in ("intra_node_bandwidth", "trace_path")}
    again = from_vtrain(written, name="39B")
    assert (again.model, again.config, again.hardware) == (run.model, run.config, run.hardware)
    fast = vtrain_cluster(1600, 8)
    assert to_vtrain(run.config, run.model, fast)["inter_node_bandwidth"] == 1600
    for change, field in ((dict(recompute="selective"), "recompute='selective'"),
                          (dict(zero=1), "zero=1"), (dict(sequence_parallel=True),
                                                     "sequence_parallel=True"),
                          (dict(schedule="interleaved-1f1b", m=2), "schedule=")):
        with pytest.raises(ScheduleError, match=f"to_vtrain cannot state {field}"):
            to_vtrain(run.config.replace(**change), run.model)
    with pytest.raises(ScheduleError, match="the model's flash_attention=True"):
        to_vtrain(run.config, dataclasses.replace(run.model, flash_attention=True))
    with pytest.raises(ScheduleError, match="hardware must be a vtrain_cluster"):
        to_vtrain(run.config, run.model, HARDWARE["H100-80GB"])
    with pytest.raises(ScheduleError, match="to_vtrain cannot state cp=2"):
        to_vtrain(run.config.replace(cp=2, d=8), run.model)
    with pytest.raises(ScheduleError, match="model must be a fastpp.model.Transformer"):
        to_vtrain(run.config, None)


def test_explain_keeps_to_what_vtrain_runs():
    """vTrain's neighbours: 1F1B, ZeRO-0, full or no recomputation, stages dividing the
    layers; written as the keys that change."""
    run = from_vtrain({**MULTI, "num_gpus": 64, "data_parallel_size": 2,
                       "pipeline_parallel_size": 16, "global_batch_size": 128,
                       "num_layers": 48}, name="39B")
    found = explain(run.model, run.config, run.hardware, neighbours=50, workers=1,
                    flags="vtrain")
    assert found.neighbours
    for row in found.neighbours:
        assert row["schedule"] == "1f1b" and row["zero"] == 0
        assert row["recompute"] in ("none", "full") and 48 % row["p"] == 0
        keys = dict(word.split("=") for word in row["changes"].split())
        assert keys and set(keys) <= set(to_vtrain(run.config, run.model))
        other = RunConfig.from_row(row, seq=run.config.seq, sequence_parallel=False,
                                   reduce_bytes=2.0, precision=None, layout=None)
        # the file with the printed keys changed reads as the neighbour
        changed = {**to_vtrain(run.config, run.model, run.hardware),
                   **{k: json.loads(v) for k, v in keys.items()}}
        assert from_vtrain(changed).config == other
    with pytest.raises(ScheduleError, match="flags must be one of"):
        explain(run.model, run.config, run.hardware, neighbours=0, flags="nemo")
    with pytest.raises(ScheduleError, match="to_vtrain cannot state zero=1"):
        explain(run.model, run.config.replace(zero=1), run.hardware, neighbours=1,
                flags="vtrain")


def test_explains_changes_read_back_from_a_file_without_a_microbatch():
    """A file without a pipeline may leave the microbatch out (global_batch / d): where a
    neighbour changes d or p, its microbatch is written too."""
    flat = {**MULTI, "num_gpus": 4, "tensor_parallel_size": 1, "data_parallel_size": 4,
            "pipeline_parallel_size": 1, "global_batch_size": 16, "micro_batch_size": None,
            "num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16}
    run = from_vtrain(flat)
    found = explain(run.model, run.config, run.hardware, neighbours=20, workers=1,
                    flags="vtrain")
    moved = 0
    for row in found.neighbours:
        keys = {k: json.loads(v) for k, v in (w.split("=") for w in row["changes"].split())}
        back = from_vtrain({**flat, **keys}).config
        assert (back.t, back.d, back.p, back.microbatch) == (row["t"], row["d"], row["p"],
                                                             row["microbatch"])
        moved += "data_parallel_size" in keys
    assert moved


@needs_data("vtrain_single_node_a.csv")
def test_a_table_in_vtrains_format_is_priced_as_its_configurations(tmp_path):
    """``vtrain_table`` (``scripts/fidelity.py --vtrain-table``): the file's check rows as a
    table of their own give ``validate``'s prices; a multi-node row, ``from_vtrain``'s on
    vTrain's cluster."""
    lines = (DATA / "vtrain_single_node_a.csv").read_text().splitlines()
    odd = tmp_path / "odd.csv"
    odd.write_text("\n".join([lines[0], *lines[2::2]]) + "\n")
    got = vtrain_table(odd)
    want = vtrain_rows(HARDWARE["A100-80GB"], DATA, "check")
    assert len(got) == len(want) == 373
    assert got["predicted_ms"].tolist() == [row[4] for row in want]
    multi = tmp_path / "multi.csv"
    row = [MULTI[k] for k in ("num_gpus", "global_batch_size", "micro_batch_size",
                              "hidden_size", "num_attention_heads", "num_layers",
                              "max_length", "tensor_parallel_size", "data_parallel_size",
                              "pipeline_parallel_size")]
    multi.write_text(lines[0] + "\n" + ",".join(map(str, row)) + ",15000.0\n")
    priced = vtrain_table(multi).iloc[0]
    run = from_vtrain(MULTI)
    step = plan(run.model, hardware=run.hardware, config=run.config)["step_time"].iloc[0]
    assert priced["predicted_ms"] == pytest.approx(1e3 * step, rel=1e-12)
    assert priced["error"] == pytest.approx(1e3 * step / 15000.0 - 1.0, rel=1e-12)
    (tmp_path / "short.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ScheduleError, match="must have the 11 columns"):
        vtrain_table(tmp_path / "short.csv")
    # columns are read by their names: moved, or named short, the same prices
    header = lines[0].split(",")
    order = [10, *range(10)]
    moved = tmp_path / "moved.csv"
    moved.write_text("\n".join(",".join(line.split(",")[k] for k in order)
                               for line in [lines[0], *lines[2::2]]) + "\n")
    assert vtrain_table(moved)["predicted_ms"].tolist() == got["predicted_ms"].tolist()
    short = tmp_path / "short_names.csv"
    short.write_text("\n".join([",".join(COLUMNS), *lines[2::2]]) + "\n")
    assert vtrain_table(short)["predicted_ms"].tolist() == got["predicted_ms"].tolist()
    renamed = tmp_path / "renamed.csv"
    for first in (lines[1], "8.0e+00," + lines[1].split(",", 1)[1], "8,32,4,nan," +
                  lines[1].split(",", 4)[4]):  # no header: a first row of numbers
        renamed.write_text(first + "\n" + lines[2] + "\n")
        with pytest.raises(ScheduleError, match=r"must open with a header row \(got 8"):
            vtrain_table(renamed)
    renamed.write_text(lines[0] + "\n")
    with pytest.raises(ScheduleError, match=r"must have a row below its header \(got none\)"):
        vtrain_table(renamed)
    # the time's unit is in its name: seconds are not read as milliseconds
    renamed.write_text(",".join([*header[:-1], "iteration time (s)"]) + "\n" + lines[1] + "\n")
    with pytest.raises(ScheduleError, match=r"time must be named 'iteration time \(ms\)' or "
                                            r"'iteration_ms', in milliseconds \(got "
                                            r"'iteration time \(s\)'\)"):
        vtrain_table(renamed)
    # a header worded otherwise keeps the file's order; a named one out of it is refused
    renamed.write_text("\n".join([",".join(["GPU count", *header[1:]]), *lines[2::2]]) + "\n")
    assert vtrain_table(renamed)["predicted_ms"].tolist() == got["predicted_ms"].tolist()
    for names, name, k in ((["GPU count", header[2], header[1], *header[3:]], header[2], 2),
                           ([header[0], header[0], *header[2:]], header[0], 2)):
        renamed.write_text(",".join(names) + "\n" + "\n".join(lines[1:3]) + "\n")
        with pytest.raises(ScheduleError, match=rf"columns must be named as "
                                                rf"vtrain_single_node_a.csv's .*each once, or "
                                                rf"keep its order \(got '{name}' as column "
                                                rf"{k}\)"):
            vtrain_table(renamed)
    good = "8,32,4,1024,16,24,1024,2,2,2,219.7"
    must = "microbatch must be a positive integer below 2..31 .got "
    for cells, message in (("8,32,0,", must + "0 in row 1"), ("8,32,,", must + "nan"),
                           ("8,32,four,", must + "'four'"), ("8,32,4.5,", must + "4.5"),
                           ("8,30,4,", "global_batch must be a multiple of microbatch . d = 8"),
                           ("4,32,4,", "gpus must be t . d . p = 8 .got 4 in row 1"),
                           # counts int64 would wrap around, and layouts no run has
                           ("8,32,1e30,", must + "1e.30"),
                           ("8,32,4,1024,17,", "heads must be a multiple of t = 2 .got 17"),
                           ("8,32,4,1024,16,25,", "layers must be a multiple of p = 2 .got 25")):
        bad = tmp_path / "bad.csv"
        bad.write_text(lines[0] + "\n" + cells + good.split(",", cells.count(","))[-1] + "\n")
        with pytest.raises(ScheduleError, match=message):
            vtrain_table(bad)
    for time in ("0", "1e-320"):  # (the second gave an infinite error)
        bad.write_text(lines[0] + "\n" + good.rsplit(",", 1)[0] + f",{time}\n")
        with pytest.raises(ScheduleError, match="iteration_ms must be a time of at least 0.001 "
                                                "ms"):
            vtrain_table(bad)
    bad.write_text(lines[0] + "\n" + good + ",1\n")  # a field more than the header
    with pytest.raises(ScheduleError, match="rows must have as many fields as its header"):
        vtrain_table(bad)
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "utf16.csv").write_bytes((lines[0] + "\n" + good + "\n").encode("utf-16"))
    for path in (tmp_path / "missing.csv", tmp_path / "empty.csv", tmp_path / "utf16.csv",
                 tmp_path, str(tmp_path / "a\0.csv")):
        with pytest.raises(ScheduleError, match="must be a readable CSV"):
            vtrain_table(path)
    for path in (None, 5):
        with pytest.raises(ScheduleTypeError, match="path must be a file path"):
            vtrain_table(path)
