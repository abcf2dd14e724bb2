"""The nineteenth bad-input wave (7 December 2026): three reviewers acting as users of the
measured runs and their variability, of the search, the closed forms and the seed chapter's
API. Each case failed on the code before it."""

import signal
from pathlib import Path

import numpy as np
import pytest

import fastpp
from fastpp import Costs, ScheduleError, ScheduleTypeError, build_schedule, simulate, theory

DATA = Path(__file__).parent / "data"


def test_exact_search_keeps_the_limits_it_has_where_one_device_has_none():
    """One device without a limit dropped every device's from the exact model: its answers
    broke device 0's limit and were thrown away, and it proved nothing (bound 49 of 52)."""
    pytest.importorskip("ortools")
    costs = Costs(f=[1, 2, 1], b=[3, 2, 4], w=[1, 1, 1], comm=0.5, gamma=0.5)
    some = fastpp.optimize(3, 4, costs, memory=np.array([1, np.inf, np.inf]), method="exact",
                           time_limit=30, progress=False)
    every = fastpp.optimize(3, 4, costs, memory=np.array([1, 100, 100]), method="exact",
                            time_limit=30, progress=False)
    assert every.optimal and every.value == 52
    assert some.optimal and some.value == every.value and some.lower_bound == 52
    assert simulate(some.schedule, costs).peak_activations[0] <= 1


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


@pytest.mark.parametrize("call", [lambda: theory.idle("1f1b", 2, 4, 1, 0.0),
                                  lambda: theory.bubble_fraction("chimera", 4, 4, 1, 0.0, 0.0)])
def test_closed_forms_refuse_the_costs_costs_refuses(call):
    """f = 0 gave an idle time of 2, and f = b = 0 a bubble ratio of 0.2 (0 / 0)."""
    with pytest.raises(ScheduleError, match=r"f must be in \(0, 1e\+290\] \(got 0\.0\)"):
        call()
    assert theory.idle("zb-h1", 2, 4, 1, 1.0, 2.0, 0.0) is not None  # w = 0 is a cost


@pytest.mark.parametrize("folder", [None, 5])
def test_read_steps_of_no_path(folder):
    with pytest.raises(ScheduleTypeError, match=r"folder must be a path to measure's run "
                                                r"folder \(got (NoneType|int)\)"):
        fastpp.measured.read_steps(folder)


@pytest.mark.parametrize("seed", ["x", 1.5])
def test_simulate_refuses_a_seed_of_the_wrong_type_without_noise(seed):
    with pytest.raises(ScheduleTypeError, match=r"seed must be an integer"):
        simulate(build_schedule("1f1b", 2, 4), Costs(1, 2), seed=seed)
    assert simulate(build_schedule("1f1b", 2, 4), Costs(1, 2), seed=np.int64(3)).makespan


def test_a_slow_link_is_priced_once_in_a_runs_own_prediction():
    """A run with measure's slow link holds its sleeps in its own costs (its sends): the
    prediction from them priced the link a second time, +96% at 0.05 s a send (a reviewer's
    real run); from another run's costs it is priced."""
    from fastpp.measured import predictions, read_torch_trace

    run = read_torch_trace(DATA / "interleaved-1f1b")
    got = predictions(run, DATA / "zbv", link_delay=(0.05, 0, 1))
    assert got["predicted"] == simulate(run.schedule, run.costs()).makespan
    plain = predictions(run, DATA / "zbv")["predicted from"]
    assert got["predicted from"] > plain + 0.05  # (at least one crossing of the link)


@pytest.mark.parametrize("change, message", [
    (dict(hidden=2**47, heads=32), r"hidden must be at most 16,777,216 \(no model is larger\)"),
    (dict(vocab=2**62), r"vocab must be at most 2,147,483,648"),
    (dict(heads=10**30), r"heads must be at most 16,777,216"),
    (dict(experts=2**40, top_k=1), r"experts must be at most 16,777,216"),
])
def test_a_model_past_any_size_is_refused_where_it_is_made(change, message):
    """Each raised a raw OverflowError from NumPy's conversions, inside plan."""
    import dataclasses

    from fastpp.model import MODELS

    with pytest.raises(ScheduleError, match=message):
        dataclasses.replace(MODELS["llama3-8b"], **change)


def test_hardware_and_run_sizes_past_any_machine():
    import dataclasses

    from fastpp.model import HARDWARE, MODELS, RunConfig, plan

    with pytest.raises(ScheduleError, match=r"gpus_per_node must be at most 2,147,483,648"):
        dataclasses.replace(HARDWARE["H100-80GB"], gpus_per_node=10**30)
    with pytest.raises(ScheduleError, match=r"imbalance must be a number finite and >= 1"):
        RunConfig(seq=4096, global_batch=16, t=2, p=2, d=2, imbalance=10**310)
    for seed in (float("nan"), -1, True):
        with pytest.raises(ScheduleError, match=r"seed must be an integer in \[0, 2\*\*64\)"):
            plan(MODELS["llama3-8b"], 8, "H100-80GB", seq=4096, global_batch=8, tp=1, pp=1,
                 microbatch=1, schedules=["1f1b"], seed=seed)


MEGATRON = ("--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
            "--max-position-embeddings 4096 --micro-batch-size 1 --vocab-size 32000 --bf16 "
            "--global-batch-size 64")


@pytest.mark.parametrize("extra, message", [
    ("--tensor-model-parallel-size 2 --tp-comm-overlap",
     r"--tp-comm-overlap needs --sequence-parallel with --tensor-model-parallel-size > 1"),
    ("--tp-comm-overlap --sequence-parallel", r"--tp-comm-overlap needs --sequence-parallel"),
    ("--overlap-param-gather", r"--overlap-param-gather needs --use-distributed-optimizer"),
    ("--use-torch-fsdp2 --use-distributed-optimizer",
     r"--use-torch-fsdp2 cannot run with --use-distributed-optimizer"),
    ("--use-torch-fsdp2", r"--use-torch-fsdp2 cannot run with tied embeddings"),
    ("--use-torch-fsdp2 --untie-embeddings-and-output-weights --pipeline-model-parallel-size 2",
     r"--use-torch-fsdp2 cannot run with --pipeline-model-parallel-size > 1"),
    ("--num-layers 16 --pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2"
     " --decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 2",
     r"--num-layers-per-virtual-pipeline-stage cannot run with --decoder-first/last"),
    ("--expert-model-parallel-size 2", r"--expert-model-parallel-size 2 needs --num-experts"),
    ("--num-experts 6 --expert-model-parallel-size 4 --moe-router-topk 2",
     r"--num-experts 6 must be a multiple of --expert-model-parallel-size 4"),
    ("--context-parallel-size 2 --seq-length 2050",
     r"--seq-length 2050 must split into 2 x --context-parallel-size = 4 equal chunks"),
])
def test_megatron_runs_megatron_asserts_on_are_refused_naming_the_flags(extra, message):
    """Each was priced (the TP overlap's gain without sequence parallelism, FSDP2 as ZeRO-3
    beside the distributed optimizer), or refused later under fastpp's field names."""
    from fastpp.model import from_megatron

    with pytest.raises(ScheduleError, match=message):
        from_megatron(f"{MEGATRON} {extra}", 8)


def test_megatron_scripts_arithmetic_and_backquotes():
    """``$((N/(T*P)))`` stopped at its first ``))`` and named a variable the script sets; a
    backquoted command in a launcher flag was read as words, the GPU count the default's."""
    from fastpp.model import from_megatron

    script = (f"WORLD_SIZE=16; TP=2; PP=2; MBS=1\nDP=$((WORLD_SIZE/(TP*PP)))\nN=$(( (2*(3+1)) / 2"
              f" ))\ntorchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py {MEGATRON} "
              f"--tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP "
              f"--global-batch-size $((MBS*DP*16)) --num-layers $N\n")
    run = from_megatron(script, None)
    assert (run.config.gpus, run.config.d, run.config.global_batch, run.model.layers) == \
        (16, 4, 64, 4)
    with pytest.raises(ScheduleError, match=r"the GPU count must be given: torchrun's --nnodes"
                                            r" needs the variable '`scontrol"):
        from_megatron("torchrun --nproc_per_node 8 --nnodes `scontrol show hostnames | wc -l` "
                      f"pretrain_gpt.py {MEGATRON}\n", None)


def test_megatron_notes_what_it_prices_otherwise():
    from fastpp.model import from_megatron

    run = from_megatron(f"{MEGATRON} --use-distributed-optimizer --overlap-grad-reduce", 8)
    assert any(x.startswith("--overlap-grad-reduce without --overlap-param-gather")
               for x in run.ignored)
    assert "vocab=50000: the script's --vocab-size 32000 priced" in \
        from_megatron(MEGATRON, 8, vocab=50000).ignored


def test_tp_overlap_needs_sequence_parallel():
    from fastpp.model import MODELS, RunConfig, plan, to_megatron

    with pytest.raises(ScheduleError, match=r"tp_overlap needs sequence_parallel"):
        RunConfig(seq=4096, global_batch=16, t=2, p=1, d=4, sequence_parallel=False,
                  tp_overlap=True)
    with pytest.raises(ScheduleError, match=r"tp_overlap needs sequence_parallel"):
        plan(MODELS["llama3-8b"], 8, "H100-80GB", seq=4096, global_batch=8,
             sequence_parallel=False, tp_overlap=True)
    # at t = 1 it has nothing to overlap, and Megatron refuses the flag there: not written
    one = RunConfig(seq=4096, global_batch=16, t=1, p=1, d=8, tp_overlap=True)
    assert "--tp-comm-overlap" not in to_megatron(one)


def test_configs_as_their_frameworks_read_them():
    """NeMo's devices -1 (Lightning's "all") was refused with gpus= given; a key given twice
    in an llm-foundry YAML took its last value, which OmegaConf refuses; Composer's fp32 was
    refused where Megatron's is priced as bf16; a vTrain file's error named RunConfig's
    fields; two sections' contradicting keys were named without their sections."""
    from fastpp.model import from_llm_foundry, from_megatron, from_vtrain

    shape = {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16,
             "seq_length": 1024, "vocab_size": 32000}
    run = from_megatron({"trainer": {"devices": -1, "num_nodes": 2}, "model": shape}, 16)
    assert run.config.gpus == 16
    with pytest.raises(ScheduleError, match=r"ddp.use_distributed_optimizer and "
                                            r"optimizer.use_distributed_optimizer contradict"):
        from_megatron({"model": shape, "ddp": {"use_distributed_optimizer": False},
                       "optimizer": {"use_distributed_optimizer": True}}, 8)
    pytest.importorskip("yaml")
    yaml = ("model:\n  name: mpt_causal_lm\n  d_model: 768\n  n_heads: 12\n  n_layers: 12\n"
            "  max_seq_len: 2048\n  vocab_size: 50368\nmax_seq_len: 2048\n"
            "global_train_batch_size: 256\ndevice_train_microbatch_size: 8\n"
            "precision: fp32\n")
    assert "precision: fp32 priced as bf16 (fastpp prices bf16 and fp8 products)" in \
        from_llm_foundry(yaml, 8).ignored
    with pytest.raises(ScheduleError, match=r"found duplicate key 'n_layers'"):
        from_llm_foundry(yaml.replace("  n_layers: 12\n", "  n_layers: 12\n  n_layers: 24\n"),
                         8)
    vtrain = {"num_layers": 12, "hidden_size": 1024, "num_attention_heads": 16,
              "max_length": 1024, "vocab_size": 50257, "global_batch_size": 60,
              "micro_batch_size": 2, "tensor_parallel_size": 1, "data_parallel_size": 4,
              "pipeline_parallel_size": 1, "num_gpus": 4}
    with pytest.raises(ScheduleError, match=r"\(in the file, global_batch is "
                                            r"'global_batch_size', microbatch is "
                                            r"'micro_batch_size', d is 'data_parallel_size'\)"):
        from_vtrain(vtrain)


def test_second_read_of_the_fixes():
    """A reviewer of this wave's fixes: a YAML merge key was refused as a duplicate; plan
    refused the TP overlap without sequence parallelism where no t > 1 runs; NeMo's and
    Bridge's dicts were held to Megatron-LM's command-line asserts (their overlap callbacks
    turn the TP overlap off instead); the floor ran a GPU slower than an A100 above its own
    peak; an FSDP run got the distributed optimizer's note; a command in backquotes was
    noted as an unset variable; an overlapped pair's row named its overheads only where the
    F one was nonzero."""
    import dataclasses

    from fastpp.model import HARDWARE, MODELS, RunConfig, from_megatron, plan
    from fastpp.model.compute import matmul_efficiency

    pytest.importorskip("yaml")
    from fastpp.model import from_llm_foundry

    yaml = ("base: &b\n  d_model: 768\n  n_heads: 12\nmodel:\n  <<: *b\n  name: mpt_causal_lm\n"
            "  n_layers: 12\n  d_model: 768\n  max_seq_len: 2048\n  vocab_size: 50368\n"
            "max_seq_len: 2048\nglobal_train_batch_size: 256\ndevice_train_microbatch_size: 8\n")
    assert from_llm_foundry(yaml, 8).model.layers == 12
    with pytest.raises(ScheduleError, match="is not YAML"):
        from_llm_foundry(yaml + "? [a, b]\n: 1\n", 8)
    one = RunConfig(seq=4096, global_batch=64, t=1, p=2, d=4, tp_overlap=True,
                    sequence_parallel=False)
    assert np.isfinite(plan("llama3-8b", config=one).iloc[0]["step_time"])
    with pytest.raises(ScheduleError, match=r"tp_overlap needs sequence_parallel where t > 1: "
                                            r".*t up to 2\)"):
        plan("llama3-8b", 8, seq=4096, global_batch=64, tp=[1, 2], tp_overlap=True,
             sequence_parallel=False)
    shape = {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16,
             "seq_length": 1024, "vocab_size": 32000}
    run = from_megatron({"model": {**shape, "tensor_model_parallel_size": 2,
                                   "tp_comm_overlap": True}}, 8)
    assert not run.config.tp_overlap and any("tp_comm_overlap without sequence parallelism"
                                             in x for x in run.ignored)
    slow = dataclasses.replace(HARDWARE["H100-80GB"], name="slow", peak_flops=100e12)
    assert matmul_efficiency(slow, 4096, 4096, 4096) < slow.efficiency
    fsdp = from_megatron(f"{MEGATRON} --use-torch-fsdp2 --untie-embeddings-and-output-weights "
                         f"--overlap-grad-reduce", 8)
    assert not any("--overlap-param-gather" in x for x in fsdp.ignored)
    backquoted = from_megatron(f"torchrun --nproc_per_node 8 pretrain_gpt.py {MEGATRON} "
                               f"--seed `date +%s`\n", None)
    assert "`date +%s` (a command, not run here)" in backquoted.ignored
    pair = build_schedule("dualpipev", 2, 4, 2)
    with pytest.raises(ScheduleError, match=r"costs.fb / m \+ the F and B overheads must"):
        simulate(pair, Costs(1, 2, fb=1e300, overhead={"B": 1.0}))
    assert MODELS  # (the presets load with the floor's check)


def test_explain_megatron_with_model_says_nothing_of_the_vocab_it_replaces(capsys):
    from fastpp.__main__ import main

    code = main(["explain", "--megatron", f"{MEGATRON} --tensor-model-parallel-size 2",
                 "--model", "llama3-8b", "--gpus", "8", "--neighbours", "0"])
    out = capsys.readouterr()
    assert code == 0 and "vocab=128256:" not in out.out + out.err


def test_sweep_script_keeps_an_early_interrupt_a_callback_swallowed(tmp_path, monkeypatch):
    """A Ctrl-C in the main job's first second raised its exit inside a ctypes callback
    (Numba loading a cached kernel), which swallowed it: the job ran on to its end and
    exit 0 (a CI run). The handler records it, and the job stops where it hands over,
    before it clears a previous sweep."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "scripts"))
    import sweep as script

    previous = tmp_path / "out" / "parts"
    previous.mkdir(parents=True)
    monkeypatch.setattr(script, "SEEN", [signal.SIGINT])  # (the signal the handler saw)
    assert script.main(["--out", str(tmp_path / "out"), "--no-plots"]) == 130
    assert previous.is_dir()  # (a fresh run would have replaced it)


def test_sweep_script_keeps_an_interrupt_swallowed_while_kernels_load(tmp_path, monkeypatch,
                                                                       capsys):
    """The same past the handover: Python's KeyboardInterrupt, raised in Numba's callback
    while the kernels load, was swallowed and the job ran to exit 0 (the next CI run)."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "scripts"))
    import sweep as script

    seen = []
    monkeypatch.setattr(script, "SEEN", seen)
    monkeypatch.setattr(script, "warm_up", lambda **_: seen.append(signal.SIGINT))
    assert script.main(["--out", str(tmp_path / "out"), "--no-plots", "-p", "2",
                        "--no-progress"]) == 130
    assert "\ninterrupted: no point kept yet" in capsys.readouterr().err
