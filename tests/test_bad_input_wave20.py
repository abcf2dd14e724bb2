"""The twentieth bad-input wave (7 December 2026): reviewers auditing the public API's names,
errors and documentation, the Monte Carlo's statistics and the engines' exactness. Each case
failed on the code before it."""

import dataclasses
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fastpp
import fastpp.model as fm
from fastpp import Costs, ScheduleError, ScheduleTypeError, build_schedule, simulate, theory

DATA = Path(__file__).parent / "data"
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


@pytest.mark.parametrize("field, value", [("op_overhead", []), ("handoff", [1e-3, 2e-3]),
                                          ("memory_bytes", []), ("host_step", np.ones(2))])
def test_a_gpus_scalar_fields_refuse_arrays(field, value):
    """An array (an empty one skipped every check) was taken, and pricing then failed in
    NumPy's broadcasting, or named ``capacity`` for ``memory_bytes``."""
    with pytest.raises(ScheduleError, match=f"{field} must be one number"):
        dataclasses.replace(fm.HARDWARE["H100-80GB"], **{field: value})
    with pytest.raises(ScheduleError, match="n.latency must be one number"):
        fm.Link("n", 4e10, [1e-5, 1e-3])


def test_the_bubble_closed_form_takes_the_group_size():
    """``bubble_fraction`` alone had no ``G``: it refused a schedule that builds."""
    build_schedule("interleaved-1f1b", 4, 10, 2, G=5)
    assert theory.bubble_fraction("interleaved-1f1b", 4, 10, 2, G=5) is None  # none known
    res = simulate(build_schedule("interleaved-1f1b", 4, 8, 2, G=4), Costs(1, 2))
    assert theory.bubble_fraction("interleaved-1f1b", 4, 8, 2, G=4) == pytest.approx(
        res.bubble_ratio, rel=1e-12)


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


def test_the_overlap_reason_refuses_an_unknown_schedule():
    """It returned ``""``, "the overlap can run", for a schedule that does not exist."""
    with pytest.raises(ScheduleError, match=r"name must be one of .* \(got 'nope'\)"):
        fm.overlap_reason("nope", True, "none")


def test_megatron_reads_a_launch_scripts_path():
    """A script's path was read as a command without flags: "--num-layers must be given"."""
    script = DATA / "megatron" / "narayanan_1.7b.sh"
    by_text = fm.from_megatron(script.read_text())
    for given in (str(script), script):
        run = fm.from_megatron(given)
        assert (run.model, run.config) == (by_text.model, by_text.config)
    with pytest.raises(ScheduleError, match=r"args must be a readable launch script "
                                            r"\(/no/such.sh: "):
        fm.from_megatron("/no/such.sh", 8)


def test_measured_op_times_price_no_sweep_or_plan():
    """A measured run's absolute times replaced every row's costs: a sweep's noisy columns
    were the same at f=1 and f=100, and plan ranked full recomputation with none."""
    run = fastpp.read_torch_trace(DATA / "gpipe")
    noise = fastpp.Noise(empirical=run)
    with pytest.raises(ScheduleError, match=r"noise must not draw a measured run's op times "
                                            r"in sweep: .* MeasuredSteps"):
        fastpp.sweep(["1f1b"], p=2, n=4, f=[1.0, 100.0], b=2.0, progress=False, noise=noise)
    with pytest.raises(ScheduleError, match=r"in plan: they are absolute"):
        fm.plan("llama2-7b", gpus=16, seq=4096, global_batch=64, tp=[2], pp=[2],
                schedules=["1f1b"], noise=noise, objective="p95")
    # one schedule priced by the run's own times is what simulate does
    assert simulate(run.schedule, Costs(1, 2), noise=noise, samples=4).samples == 4


def test_optimize_refuses_samples_without_noise():
    """``samples=5`` without noise was ignored, where simulate, sweep and plan refuse it."""
    with pytest.raises(ScheduleError, match=r"samples counts each candidate's Monte Carlo "
                                            r"timelines: give noise="):
        fastpp.optimize(4, 8, Costs(f=1, b=2, w=1), method="heuristic", progress=False,
                        samples=5)


def test_a_makespan_too_short_for_a_throughput_is_refused():
    """``f / m`` of a subnormal ``f`` rounded to 0: simulate returned a makespan of 0 (and
    ``throughput`` raised ``ZeroDivisionError``), where a sweep refuses the point. Measured
    ``durations`` of 0 take no time: their throughput is infinite (it raised too)."""
    s = build_schedule("interleaved-1f1b", 2, 4, 2)
    for f in (5e-324, 1e-320):
        with pytest.raises(ScheduleError, match=r"costs must keep the throughput n / makespan "
                                                r"finite"):
            simulate(s, Costs(f, f))
    one = build_schedule("1f1b", 2, 2)
    assert simulate(one, Costs(1, 2), durations=np.zeros(one.kind.shape)).throughput == np.inf
    assert simulate(s, Costs(1e-300, 1e-300)).throughput < np.inf


def test_an_op_of_no_time_holds_its_activations_once():
    """The reference counted a forward of no time (a zero in measured durations, or a cost
    the clock's precision absorbs) as freed at the instant it allocated, the engine as held
    once, in the device's op order: 51 of 374 random wide-ranging cases disagreed. The
    reference now takes one instant's events in op order, as a device runs them."""
    from reference import assert_agrees, simulate_reference

    s = build_schedule("1f1b", 2, 1)
    wide = Costs([1e17, 1.0], [1.0, 1.0])  # 1e17 + 1 == 1e17: device 1's ops take no time
    assert_agrees(simulate(s, wide), simulate_reference(s, wide))
    assert simulate_reference(s, wide).peak_live == [1, 1]
    s = build_schedule("zb-h1", 1, 1)
    costs, zero = Costs(1, 2, w=1, gamma=0.5), np.array([[0.0, 0.0, 1.0]])
    assert simulate_reference(s, costs, durations=zero).peak_activations == [1.0]
    assert_agrees(simulate(s, costs, durations=zero), simulate_reference(s, costs,
                                                                         durations=zero))
    rng = np.random.default_rng(0)
    for name in ("1f1b", "zb-h1", "interleaved-1f1b", "zbv", "gpipe"):
        s = build_schedule(name, 3, 6)
        durations = rng.choice([0.0, 1.0, 2.5], size=s.kind.shape)
        durations[:, :2] = 1.0  # (some time: a makespan of 0 has no bubble ratio)
        assert_agrees(simulate(s, costs, durations=durations),
                      simulate_reference(s, costs, durations=durations))


def test_a_number_too_large_for_a_float_is_refused_as_a_number():
    """``Costs([10**400, 1], 2)`` said f "must be a number or an array of numbers" (a
    ScheduleTypeError), and ``Costs(10**400, 2)`` printed the number's 401 digits."""
    for f in ([10**400, 1], 10**400, -(10**400)):
        with pytest.raises(ScheduleError, match=r"costs.f must be finite and > 0 \(got "
                                                r"\[?-?1.000e\+400") as caught:
            Costs(f, 2)
        assert not isinstance(caught.value, ScheduleTypeError)
        assert len(str(caught.value)) < 100


def test_an_unused_seed_is_refused_by_sweep_as_by_the_others():
    """The noise checks were written four times and had drifted: sweep alone ran
    ``seed=-1`` without noise, which simulate, plan and optimize refuse."""
    with pytest.raises(ScheduleError, match=r"seed must be an integer in \[0, 2\*\*64\) "
                                            r"\(got -1\)"):
        fastpp.sweep(["1f1b"], p=[2], n=[2], seed=-1, progress=False)


def _script(name: str, *argv, cwd, timeout=180) -> subprocess.CompletedProcess:
    root = Path(__file__).resolve().parent.parent
    return subprocess.run([sys.executable, str(root / "scripts" / name), *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=str(root)))


def test_a_fresh_main_job_takes_the_folder_an_interrupted_clear_left(tmp_path):
    """Ctrl-C between a fresh run's clearing of the last sweep and its new manifest left
    ``parts/_fastpp/lock`` alone, and every later fresh run was refused ("holds a 'parts'
    folder that is not a sweep's")."""
    (tmp_path / "out" / "parts" / "_fastpp").mkdir(parents=True)
    (tmp_path / "out" / "parts" / "_fastpp" / "lock").write_text("1 host\n")
    small = ["--no-plots", "--no-progress", "-p", "2", "--n-per-p", "1", "--schedules", "1f1b"]
    run = _script("sweep.py", *small, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "out" / "sweep.parquet").is_file()
    # a fresh run replaces the last one's table and pictures too: an interrupted one had
    # left them beside its own partial parts
    for name in ("report.html", "pareto.png"):
        (tmp_path / "out" / name).write_text("the last sweep's")
    run = _script("sweep.py", *small, "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert not (tmp_path / "out" / "report.html").exists()
    assert not (tmp_path / "out" / "pareto.png").exists()
    (tmp_path / "other" / "parts" / "mine").mkdir(parents=True)  # no sweep's: still refused
    run = _script("sweep.py", *small, "--out", str(tmp_path / "other"), cwd=tmp_path)
    assert run.returncode == 2 and "not a sweep's" in run.stderr


def test_the_fidelity_scripts_files_are_written_whole(tmp_path, monkeypatch):
    """``--errorbars`` wrote the package's errorbars.json in place: a Ctrl-C while it wrote
    left it empty, and every plan after it a JSONDecodeError; ``--markdown`` and the picture
    the same. Each goes through a temporary file now (``atomic_write``)."""
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("fidelity_script",
                                                  root / "scripts" / "fidelity.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    table = tmp_path / "errorbars.json"
    table.write_text('{"regimes": []}\n')
    real = Path.write_text

    def cut(self, text, *args, **kwargs):  # Ctrl-C halfway through the write
        real(self, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(script, "regime_table", lambda df: [{"gpu": "A100"}] * 50)
    monkeypatch.setattr(Path, "write_text", cut)
    with pytest.raises(KeyboardInterrupt):
        script.write_errorbars(None, table)
    monkeypatch.setattr(Path, "write_text", real)
    assert table.read_text() == '{"regimes": []}\n'  # the old table, whole
    assert [x.name for x in tmp_path.iterdir()] == ["errorbars.json"]  # no temporary left
    source = (root / "scripts" / "fidelity.py").read_text()
    assert "savefig(path" not in source and ".write_text(" not in source.replace(
        "tmp.write_text(", "")  # (the markdown and the picture likewise)


def test_ctrl_c_is_a_line_and_130_not_a_traceback():
    """``python -m fastpp plan``, ``optimize``, ``scripts/frontier.py`` and
    ``scripts/fidelity.py`` printed a traceback of 26 to 216 lines on Ctrl-C."""
    from fastpp.checks import until_interrupted

    def interrupted():
        raise KeyboardInterrupt

    assert until_interrupted(interrupted) == 130
    root = Path(__file__).resolve().parent.parent
    for name in ("frontier.py", "fidelity.py", "variability.py", "measure.py", "memorybars.py"):
        assert "until_interrupted(main)" in (root / "scripts" / name).read_text(), name
    # a real Ctrl-C in a real search: its best so far, or a line, and 130; no traceback
    import signal
    import time

    run = subprocess.Popen([sys.executable, "-m", "fastpp", "optimize", "-p", "8", "-n", "48",
                            "--w", "1", "--comm", "0.3", "--memory-limit", "3", "--method",
                            "improve", "--time-limit", "60", "--quiet"],  # (runs its minute)
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=dict(os.environ, PYTHONPATH=str(root)))
    time.sleep(6)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert "interrupted" in out + err


def test_ctrl_c_in_a_search_gives_its_best_schedule_so_far(monkeypatch):
    """Ctrl-C threw a search's best schedule away; now ``optimize`` raises
    ``SearchInterrupted`` (a KeyboardInterrupt: a loop of searches stops too) holding it,
    and the command line prints it and exits 130."""
    from fastpp.search import SearchInterrupted, optimizer

    real = optimizer._Search.improve

    def improve(self, until, seed):  # the user presses Ctrl-C in the local search
        real(self, min(until, 0.05), seed)
        raise KeyboardInterrupt

    monkeypatch.setattr(optimizer._Search, "improve", improve)
    costs = Costs(f=1, b=2, w=1, comm=0.3)  # (at 3 M_B a device no candidate is proven)
    with pytest.raises(SearchInterrupted) as stop:
        fastpp.optimize(4, 12, costs, memory=3, method="improve", time_limit=5,
                        progress=False)
    found = stop.value.result
    assert isinstance(stop.value, KeyboardInterrupt)
    assert found.stopped == "interrupted" and found.value == simulate(found.schedule,
                                                                      costs).makespan
    from fastpp.__main__ import main

    argv = ["optimize", "-p", "4", "-n", "12", "--comm", "0.3", "--w", "1", "--memory-limit",
            "3", "--method", "improve", "--time-limit", "5", "--quiet"]
    assert main(argv) == 130
    from fastpp.checks import Terminated

    def killed(self, until, seed):  # SIGTERM, as until_interrupted raises it
        real(self, min(until, 0.05), seed)
        raise Terminated

    monkeypatch.setattr(optimizer._Search, "improve", killed)
    assert main(argv) == 143


def test_a_ctrl_c_numba_swallowed_ends_the_main_job_as_one(tmp_path, monkeypatch):
    """A Ctrl-C during a cold compile, raised inside Numba's ctypes callback, was printed by
    Python as an unraisable exception and left Numba's "no compiled object yet"
    RuntimeError: a 55-line traceback and exit 1 in 3 of 20 tries, not "interrupted"."""
    import importlib.util
    import types

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("sweep_script", root / "scripts" / "sweep.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    seen = []
    report = script._unraisable(seen.append)
    for exc in (KeyboardInterrupt, SystemExit, RuntimeError):
        report(types.SimpleNamespace(exc_type=exc))
    assert [x.exc_type for x in seen] == [RuntimeError]  # the others were said already

    def half_loaded(*args, **kwargs):
        script.SEEN.append(2)  # (the signal the handler records: SIGINT)
        raise RuntimeError("no compiled object yet for <Library 'peaks'>")

    monkeypatch.setattr(script, "sweep", half_loaded)
    monkeypatch.setattr(script, "SEEN", [])
    args = script.parse(["--out", str(tmp_path), "--dask", "local", "--no-plots"])
    with pytest.raises(KeyboardInterrupt):
        script._run(args, tmp_path / "parts", None)


def test_a_plans_monte_carlos_show_progress(monkeypatch):
    """``plan --noise`` ran its Monte Carlos for 55 s without a word: with ``progress`` (the
    command line's) a bar counts them, past a second."""
    from fastpp.sweeps import robust

    made = []
    real = robust.progress_bar
    monkeypatch.setattr(robust, "progress_bar", lambda total, enabled, **options: made.append(
        (total, enabled, options)) or real(total, enabled, **options))
    for progress in (False, True):
        fm.plan("llama3-8b", 8, seq=2048, global_batch=16, tp=[1], pp=[2], schedules=["1f1b"],
                noise=fastpp.Noise(cov=0.1), samples=8, progress=progress)
    assert [enabled for _, enabled, _ in made] == [False, True] and made[0][0] > 0
    bar = real(5, True, **made[1][2])
    assert bar.total == 5 and bar.delay == 1.0  # (tqdm's: nothing shown under a second)
    bar.close()


def test_sigterm_ends_long_work_as_ctrl_c_does(tmp_path):
    """SIGTERM killed the main job without a word (exit 143, no "N points kept; rerun with
    --resume"), left a half-written ``.part-*.tmp`` that stayed after a resume, and the
    command line's a traceback; it is taken as Ctrl-C is now."""
    import signal
    import time

    from fastpp.checks import Terminated, until_interrupted

    def killed():
        raise Terminated

    assert until_interrupted(killed) == 143
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # (put back)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # another's handler is left alone
    try:
        assert until_interrupted(lambda: 0) == 0
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    root = Path(__file__).resolve().parent.parent
    run = subprocess.Popen([sys.executable, str(root / "scripts" / "sweep.py"), "--out",
                            str(tmp_path / "out"), "--no-plots", "--no-progress", "-p", "2",
                            "4", "8", "16", "--n-per-p", "1", "2", "4", "8"], cwd=tmp_path,
                           stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                           env=dict(os.environ, PYTHONPATH=str(root)))
    for line in run.stdout:  # in its sweep: past the compile or load of its kernels
        if line.startswith("kernels ready"):
            break
    time.sleep(0.2)
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 143 and "Traceback" not in err, err[-2000:]
    assert re.search(r"\nterminated: (no point kept yet|[\d,]+ of [\d,]+ points kept in "
                     r".*; rerun with --resume)", err), err
    assert not list((tmp_path / "out").rglob("*.tmp"))
    # a temporary file a killed writer left is cleared by the next run that holds the folder
    pytest.importorskip("pandas")
    given = dict(p=[2], n_per_p=[1, 2], progress=False, out=tmp_path / "mine")
    whole = fastpp.sweep(["1f1b"], **given)
    stale = [tmp_path / "mine" / ".part-000000.parquet.dead.tmp",
             tmp_path / "mine" / "_fastpp" / ".manifest.json.dead.tmp"]
    for path in stale:
        path.write_bytes(b"half")
    again = fastpp.sweep(["1f1b"], **given, resume=True)
    assert not any(path.exists() for path in stale)
    assert again.equals(whole)


def test_a_plan_leaves_no_earlier_plans_picture_beside_its_table(tmp_path):
    """Interrupted after its table, ``plan --out`` left an earlier run's plan.png and
    plan.html beside it; they go before the new table is written."""
    from fastpp.__main__ import main

    for name in ("plan.png", "plan.html"):
        (tmp_path / name).write_text("an earlier plan's")
    assert main(["plan", "--model", "llama3-8b", "--gpus", "8", "--seq", "2048",
                 "--global-batch", "16", "--tp", "1", "--pp", "2", "--schedules", "1f1b",
                 "--no-plots", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "plan.parquet").is_file()
    assert not (tmp_path / "plan.png").exists() and not (tmp_path / "plan.html").exists()
