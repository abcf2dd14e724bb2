"""The twelfth bad-input wave (5 December 2026): each case failed on the code before."""

from fastpp.__main__ import main


def test_a_weight_gradient_over_the_backward_names_no_missing_flag(capsys):
    """The refusal named ``--i``, a flag the command line does not have."""
    assert main(["simulate", "-s", "1f1b", "-p", "2", "-n", "2", "--w", "3"]) == 2
    err = capsys.readouterr().err
    assert "error: --w must be <= --b (got --w=3.0, --b=2.0 at stage 0)" in err
    assert "--i" not in err


def test_measure_script_takes_the_memory_limit_it_shows_and_checks_it_first(tmp_path):
    """``--memory-limit`` said its default was ``1.5p`` and refused ``1.5p``; a bad value is
    refused before any run, nothing written."""
    import importlib.util
    from pathlib import Path

    from test_bad_input_wave6 import run_script

    path = Path(__file__).resolve().parent.parent / "scripts" / "measure.py"
    spec = importlib.util.spec_from_file_location("measure_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for given, limit in ((["--memory-limit", "1.5p"], 6.0), ([], 6.0),
                         (["--memory-limit", "5"], 5.0)):
        args = script.parse(["-p", "4", *given])
        assert script.memory_limit_flag(args.memory_limit, args.p) == limit
    err = run_script("measure.py", "--memory-limit", "2x", "--out", str(tmp_path), cwd=tmp_path)
    assert "--memory-limit must be a number of units > 0 or a multiple of p such as '1.5p' " \
           "(got '2x')" in err
    assert not any(tmp_path.iterdir())  # nothing ran


def test_explain_run_flags_say_what_they_are(capsys):
    """``explain --help`` listed its run flags (with ``--hf``) without a word or a default."""
    import pytest

    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for text in ("--tp TP tensor-parallel degree (1)", "--seq SEQ sequence length (4096)",
                 "--zero ZERO ZeRO stage, 0 to 3 (1)",
                 "sequences per step (default: one microbatch per replica)"):
        assert text in out, text


def test_measure_refuses_its_outputs_and_inputs_before_running(tmp_path, capsys):
    """``measure`` found a ``--trace`` or ``--picture`` it could not write, or a
    ``--costs-from`` that held no run, only after the run it had just spent minutes on."""
    out = tmp_path / "out"
    for argv, message in (
            (["--trace", str(tmp_path / "none" / "t.json")], "--trace must be a file path that "
             f"can be written (got '{tmp_path / 'none' / 't.json'}': no folder"),
            (["--picture", str(tmp_path)], "--picture must be a file path that can be written "
             f"(got '{tmp_path}': a folder)"),
            (["--costs-from", str(tmp_path)], "--costs-from must be the folder of a measured "
             "run's traces")):
        assert main(["measure", "-s", "1f1b", "--out", str(out), *argv]) == 2
        assert message in capsys.readouterr().err
        assert not out.exists()  # nothing ran


def test_measure_on_cuda_without_a_gpu_is_refused_before_the_ranks_start(tmp_path):
    """Each rank had died in ``torch.cuda.set_device`` with a traceback."""
    import pytest

    from fastpp import ScheduleError
    from fastpp.measured import measure

    pytest.importorskip("torch")
    from fastpp.measured.runner import _cuda_devices

    if _cuda_devices() >= 2:
        pytest.skip("this machine has the GPUs")
    with pytest.raises(ScheduleError, match=r"device must be 'cpu' here: 'cuda' needs a GPU for "
                                            r"each of the p=2 ranks \(got device='cuda'; torch "
                                            r"sees \d CUDA devices\)"):
        measure("1f1b", 2, 2, out=tmp_path / "out", device="cuda")
    assert not (tmp_path / "out").exists()


def test_commands_and_scripts_name_the_flags_not_the_parameters(tmp_path, capsys):
    """plan, explain, sweep.py and frontier.py named what they refused by fastpp's parameter
    (``global_batch``, ``n_per_p``, ``from_megatron(..., vocab=N)``), not by the flag typed."""
    from test_bad_input_wave6 import run_script

    assert main(["plan", "--model", "llama3-8b", "--gpus", "8", "--microbatch", "3",
                 "--global-batch", "8", "--no-plots", "--out", str(tmp_path)]) == 2
    assert "error: --microbatch must divide --global-batch=8 (got --microbatch=3)" in \
        capsys.readouterr().err
    assert main(["explain", "--megatron", "--num-layers 2 --hidden-size 64 "
                 "--num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 "
                 "--micro-batch-size 1 --global-batch-size 8", "--gpus", "8"]) == 2
    assert "(or --vocab N)" in capsys.readouterr().err
    from pathlib import Path

    hf = Path(__file__).resolve().parent / "data" / "hf" / "qwen3-8b.json"
    assert main(["explain", "--hf", str(hf), "--gpus", "8", "--tp", "3"]) == 2
    assert "(got --gpus=8, --tp=3, --cp=1, --pp=1)" in capsys.readouterr().err
    assert "error: --n-per-p must hold positive integers below 2**31 (got [0])" in \
        run_script("sweep.py", "--n-per-p", "0", "--out", str(tmp_path), cwd=tmp_path)


def test_flags_replace_parameters_only_where_they_are_what_was_typed(capsys):
    """The review of the renaming: symbols in an expression (``p*n*m``, ``2*cp``) stay; an
    explain run given by a Megatron script is named in its own words, not by the ``--hf``
    run flags it refuses; an on/off flag is no value (``sequence_parallel=False`` stays)."""
    import argparse

    from fastpp.checks import by_flags, flag_names

    assert main(["simulate", "-s", "1f1b", "-p", "3000", "-n", "3000"]) == 2
    assert "error: p*n*m must be at most 4,000,000 for '1f1b' (got p*n*m=9000000)" in \
        capsys.readouterr().err
    assert main(["explain", "--megatron", "--num-layers 4 --hidden-size 256 "
                 "--num-attention-heads 8 --seq-length 512 --vocab-size 1000 "
                 "--micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size 3",
                 "--gpus", "8"]) == 2
    assert "(got --gpus=8, t=3, cp=1, p=1)" in capsys.readouterr().err
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int)
    ap.add_argument("--cp", type=int)
    ap.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction)
    flags = flag_names(ap)
    assert flags == {"seq": "--seq", "cp": "--cp"}
    assert by_flags("cp must split seq into 2 x cp equal chunks: seq must be a multiple of "
                    "2*cp=4 (got seq=1001, cp=2), or give sequence_parallel=False", flags) == (
        "--cp must split seq into 2 x cp equal chunks: --seq must be a multiple of 2*cp=4 "
        "(got --seq=1001, --cp=2), or give sequence_parallel=False")


def test_measure_script_refuses_a_limit_no_schedule_fits_before_running(tmp_path):
    """A limit of the right form below what any V schedule needs ran every class, then ended
    in a traceback."""
    from test_bad_input_wave6 import run_script

    err = run_script("measure.py", "--memory-limit", "0.5", "--out", str(tmp_path / "o"),
                     cwd=tmp_path)
    assert "memory must be at least" in err and not (tmp_path / "o").exists()
