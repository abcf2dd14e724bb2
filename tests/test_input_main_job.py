"""The main job, ``scripts/sweep.py``: its flags checked before the work (and before it clears the
last sweep), resume, a second run on one ``--out``, and interruption at any point (Ctrl-C
during its imports or inside Numba's callbacks, SIGTERM, a closed pipe): a line and the exit
status, never a traceback or a half-written folder.

The cases come from the bad-input review waves of December 2026 (docs/design.md tells their
history); each failed on the code before its fix, and its docstring says how.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import env, run_script, wait_for

import fastpp

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str, *argv, cwd, timeout=180) -> subprocess.CompletedProcess:
    root = Path(__file__).resolve().parent.parent
    return subprocess.run([sys.executable, str(root / "scripts" / name), *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=str(root)))


def script_run(*argv, **kwargs):
    return subprocess.Popen([sys.executable, str(ROOT / "scripts" / "sweep.py"), *argv],
                            env=env(), text=True, **kwargs)


GRID = ["-p", "2", "4", "8", "16", "32", "--n-per-p", "1", "2", "4", "8", "--comm", "0"]


def pd_read(path):
    import pandas as pd

    return pd.read_parquet(path)


def test_sweep_script_summary_latency_not_swept(tmp_path):
    """``--summary-comm 5`` where ``--comm 0``: no row at that latency, and the summary
    raised ``budget must be ... one of []`` from deep inside, as a traceback."""
    err = run_script("sweep.py", "--schedules", "1f1b", "-p", "2", "--n-per-p", "1", "-m", "1",
                     "--comm", "0", "--summary-comm", "5", "--out", str(tmp_path), cwd=tmp_path)
    assert "--summary-comm must be one of the --comm values [0.0] (got 5)" in err


@pytest.mark.parametrize("argv, message", [
    # after the whole sweep, as a traceback
    (["--budget", "nan"], "--budget must be activation units, finite and >= 0 (got nan)"),
    (["--budget", "zbv", "--schedules", "1f1b"], "--budget must be one of the swept --schedules "
                                                 "['1f1b'] (got 'zbv')"),
    # an inference schedule's peak: best_within_budget's ScheduleError as a traceback after the
    # whole sweep (the summary leaves forward-only out)
    (["--budget", "forward-only"], "--budget must be a training schedule: the summary leaves "
                                   "inference-only schedules out (got 'forward-only')"),
    # every point invalid: an empty table written, then an IndexError (a --w over --b is
    # refused before the sweep since wave 15)
    (["--schedules", "dualpipe", "--comm", "0", "-p", "3", "--budget", "100"],
     "no valid point to summarize, every one skipped: 6 x -p must be even for 'dualpipe' "
     "(got -p=3); 6 x -m must be 1"),
    (["--schedules", "1f1b", "--comm", "0", "-p", "2", "--w", "5"],
     "--w must be <= --b: W is the weight-gradient part of each backward (got --w=5, --b=2)"),
])
def test_sweep_script_refuses_before_or_instead_of_a_traceback(tmp_path, argv, message):
    from helpers import run_script

    err = run_script("sweep.py", *argv, "--no-plots", "--no-progress", "--out", str(tmp_path),
                     cwd=tmp_path)
    assert message in err, err


@pytest.mark.parametrize("schedules", [["forward-only"], ["dualpipe", "forward-only"]])
def test_sweep_script_with_no_training_row_says_so(tmp_path, schedules):
    """Only inference rows (forward-only alone, or beside a schedule none of whose points is
    valid at -p 3): the summary leaves them out, and drawing its empty view raised "df must
    hold a sweep's rows (got an empty table)" as a traceback, exit 1."""
    err = run_script("sweep.py", "--schedules", *schedules, "--budget", "5", "-p", "3",
                     "--n-per-p", "1", "-m", "1", "--comm", "0", "--no-progress", "--out",
                     str(tmp_path), cwd=tmp_path)
    assert "no training schedule's valid point to summarize" in err, err
    assert (tmp_path / "sweep.parquet").exists()  # the rows are kept


def test_sweep_script_says_when_the_budget_schedule_has_no_valid_point(tmp_path):
    """``-m 2`` with the default ``--budget 1f1b``: 1F1B takes m=1 only, no row of it to
    take the budget from, and best_within_budget's "budget must be a number or a schedule
    of df" came as a traceback after the sweep, exit 1."""
    err = run_script("sweep.py", "-p", "2", "4", "--n-per-p", "1", "2", "-m", "2", "--comm",
                     "0", "--no-plots", "--no-progress", "--out", str(tmp_path), cwd=tmp_path)
    assert "--budget 1f1b has no valid point to take its peak from" in err, err
    assert (tmp_path / "sweep.parquet").exists()  # the rows are kept


def test_sweep_script_says_a_group_without_the_budget_schedule_has_no_budget(tmp_path):
    """At p=2, n=2 DualPipe (n < 2p) has no valid point, ZBV has one: the summary said
    "nothing within the budget (the least peak: 2.00)", as if ZBV exceeded DualPipe's peak;
    there the budget schedule gives no budget at all."""
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "sweep.py"), "-p", "2",
                          "--n-per-p", "1", "2", "-m", "1", "2", "--schedules", "dualpipe", "zbv",
                          "--budget", "dualpipe", "--comm", "0", "--no-plots", "--no-progress",
                          "--out", str(tmp_path)], env=env(), capture_output=True, text=True,
                         timeout=180)
    assert run.returncode == 0, run.stderr
    lines = [" ".join(x.split()) for x in run.stdout.splitlines()]
    assert "2 2 no budget: no valid dualpipe point here" in lines, run.stdout
    assert any(x.startswith("2 4 dualpipe 1 ") for x in lines), run.stdout


def test_sweep_script_refuses_the_home_of_no_user(tmp_path):
    """``--out ~nouser/x``: pathlib's RuntimeError ("Could not determine home directory")
    went through argparse as a traceback, exit 1; the library's out says it so."""
    err = run_script("sweep.py", "--out", "~no-such-user-fastpp/x", cwd=tmp_path)
    assert "argument --out: must be a folder path the OS can use" in err, err


def test_sweep_script_deletes_only_a_sweeps_parts(tmp_path):
    """``--out DIR`` deleted ``DIR/parts`` whatever it held."""
    from helpers import run_script

    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "mine.txt").write_text("not a sweep's")
    err = run_script("sweep.py", "--no-plots", "--out", str(tmp_path), cwd=tmp_path)
    assert "holds a 'parts' folder that is not a sweep's" in err
    assert (tmp_path / "parts" / "mine.txt").read_text() == "not a sweep's"


def test_sweep_script_says_when_resume_has_nothing_to_resume(tmp_path):
    """``--resume`` with an ``--out`` that held no sweep started a new one without a word."""
    out = tmp_path / "new"
    argv = [sys.executable, str(ROOT / "scripts" / "sweep.py"), "-p", "2", "--n-per-p", "1",
            "--comm", "0", "--schedules", "1f1b", "--out", str(out), "--no-progress",
            "--no-plots", "--resume"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    first = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0, first.stderr[-2000:]
    assert (f"--resume: nothing to resume, {str(out / 'parts')!r} does not exist; starting a "
            f"new sweep in --out {str(out)!r}") in first.stderr
    assert (out / "sweep.parquet").is_file()
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0 and "nothing to resume" not in again.stderr


def test_sweep_script_refuses_a_w_over_b_before_the_sweep(tmp_path):
    """--w over --b skipped every point, wrote an empty table and printed a dict of reasons."""
    from helpers import run_script

    err = run_script("sweep.py", "-p", "2", "--n-per-p", "1", "--w", "5", "--no-progress",
                     "--no-plots", "--out", "sw", cwd=tmp_path)
    assert "--w must be <= --b: W is the weight-gradient part of each backward (got --w=5, " \
           "--b=2)" in err
    assert not (tmp_path / "sw").exists()


def test_sweep_script_checks_its_flags_before_clearing_the_last_sweep(tmp_path):
    """A fresh run cleared ``--out/parts`` before it checked its flags: one mistyped flag
    deleted the last sweep's chunks, and left the folder refused ("not a sweep's") to every
    run after. ``--out ''`` wrote the job into the working folder, and ``--out '~/x'``
    split it between ``$HOME/x`` (the library's parts) and a literal ``./~/x``, then failed
    with a traceback."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from helpers import run_script

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "out"
    small = ["--no-plots", "--no-progress", "-p", "2", "--n-per-p", "1", "--schedules", "1f1b"]

    def ok(*argv, env=None):
        run = subprocess.run([sys.executable, str(root / "scripts" / "sweep.py"), *small,
                              *argv], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120, env=dict(os.environ, PYTHONPATH=str(root),
                                                   **(env or {})))
        assert run.returncode == 0, run.stderr[-2000:]

    ok("--out", str(out))
    chunk = next((out / "parts").glob("part-*"))
    err = run_script("sweep.py", *small, "--out", str(out), "--f", "-1", cwd=tmp_path)
    assert "error: --f must be finite and > 0 (got -1.0)" in err
    assert chunk.exists()  # the last sweep's chunks are still there
    ok("--out", str(out))  # and the folder still takes a run
    err = run_script("sweep.py", *small, "--out", "", cwd=tmp_path)
    assert "argument --out: must be a folder path (got '')" in err
    assert not (tmp_path / "parts").exists() and not (tmp_path / "sweep.parquet").exists()
    ok("--out", "~/x", env={"HOME": str(tmp_path / "home")})
    assert (tmp_path / "home" / "x" / "sweep.parquet").is_file()
    assert not (tmp_path / "~").exists()


def test_sweep_script_interrupted_during_its_imports_says_so(tmp_path):
    """Ctrl-C in the main job's first 1.5 s (its imports) printed a KeyboardInterrupt
    traceback; it now says the sweep had not started and exits 130, as an interrupted sweep
    does (past its imports, the sweep's own handling says so alike)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    run = subprocess.Popen([sys.executable, str(root / "scripts" / "sweep.py"), "--out",
                            str(tmp_path / "out"), "--no-plots"], cwd=tmp_path,
                           stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                           env=dict(os.environ, PYTHONPATH=str(root)))
    time.sleep(0.5)  # (past the handler at the script's top, likely before the imports end)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 130 and "Traceback" not in err, err[-2000:]
    # (before the sweep, or in it: a warm machine sweeps a chunk in 1.5 s)
    assert re.search(r"\ninterrupted(:| before the sweep started)", err), err


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


def test_a_ctrl_c_swallowed_mid_sweep_is_raised_again_at_once():
    """A Ctrl-C raised inside Numba's ctypes callback while the sweep loaded a kernel on
    first use was swallowed and kept in ``SEEN``, but raised only where the sweep handed
    over, at its end: a CI run's main job went on a minute after its Ctrl-C. The report of
    the swallowed one sends the signal again, which the handler raises in Python's code."""
    import importlib.util
    import time
    import types

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("sweep_script", root / "scripts" / "sweep.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.SEEN.append(signal.SIGINT)  # (what the handler recorded before it was swallowed)
    report = script._unraisable(lambda unraisable: None)
    previous = signal.signal(signal.SIGINT, script._interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            report(types.SimpleNamespace(exc_type=KeyboardInterrupt))
            for _ in range(200):  # (the signal is taken at the next bytecode boundaries)
                time.sleep(0.005)
    finally:
        signal.signal(signal.SIGINT, previous)


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
    # a sweep of about 4 s warm (its first grid took 0.21 s, and a signal 0.2 s in could land
    # after the sweep, in the interpreter's exit, with SIGTERM's default back: exit -15)
    run = subprocess.Popen([sys.executable, str(root / "scripts" / "sweep.py"), "--out",
                            str(tmp_path / "out"), "--no-plots", "--no-progress", "-p", "8",
                            "16", "32", "64", "--n-per-p", "8", "16", "32", "64", "-m", "1",
                            "2", "4"], cwd=tmp_path,
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


def test_sweep_script_checks_every_flag_before_compiling(monkeypatch, capsys, tmp_path):
    """scripts/sweep.py --comm -1 compiled the kernels (half a minute on a new machine),
    then refused the flag; sweep(check_only=True) checks without sweeping."""
    import pytest
    from helpers import script

    sweep_script = script("sweep")

    def no_work(**kwargs):
        raise AssertionError("the kernels were compiled before the flags were checked")

    monkeypatch.setattr(sweep_script, "warm_up", no_work)
    for flags, message in ((["--comm", "-1"], "error: --comm must be finite and >= 0 (got "
                                              "[-1.0])"),
                           (["--gamma", "2"], "error: --gamma must be in [0, 1] (got 2.0)"),
                           (["--workers", "0"], "error: --workers must be a positive integer")):
        assert sweep_script.main([*flags, "--no-plots", "--no-progress", "--out",
                                  str(tmp_path / "out")]) == 2
        assert capsys.readouterr().err.startswith(message), flags
    assert fastpp.sweep(["1f1b"], p=2, n=2, check_only=True) is None
    with pytest.raises(fastpp.ScheduleError, match="comm must be finite"):
        fastpp.sweep(["1f1b"], p=2, n=2, comm=-1.0, check_only=True)


def test_sweep_script_under_head_writes_every_file(tmp_path):
    """| head closed standard output: the script died with BrokenPipeError in its summary,
    before the report and the pictures."""
    out = tmp_path / "out"
    run = subprocess.run(f'"{sys.executable}" "{ROOT / "scripts" / "sweep.py"}" '
                         f'{" ".join(GRID)} --no-progress --out "{out}" | head -1',
                         shell=True, capture_output=True, text=True, env=env())
    assert "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr, run.stderr
    for name in ("sweep.parquet", "report.html", "bubble_heatmap.png", "pareto.png"):
        assert (out / name).is_file(), name


def test_sweep_script_refuses_outputs_it_cannot_write_before_the_work(tmp_path, capsys):
    """sweep.parquet (or report.html) existing as a folder was said after the whole sweep, as
    a traceback."""
    from helpers import script

    sweep_script = script("sweep")
    for name, extra in (("sweep.parquet", ["--no-plots"]), ("report.html", [])):
        out = tmp_path / name.split(".")[0]
        (out / name).mkdir(parents=True)
        code = sweep_script.main(["-p", "2", "--n-per-p", "1", "--out", str(out), *extra])
        err = capsys.readouterr()
        assert code == 2 and "kernels ready" not in err.out
        assert f"--out must be a file path that can be written (got '{out / name}'" in err.err
        assert not (out / "parts").exists()


def test_resume_that_computes_nothing_says_so(tmp_path):
    """A resume of a finished sweep said '1,234 points simulated in 0.31 s'."""
    out = tmp_path / "out"
    argv = ["-p", "2", "4", "--n-per-p", "1", "2", "--no-plots", "--no-progress", "--out",
            str(out)]
    assert script_run(*argv, stdout=subprocess.DEVNULL).wait() == 0
    again = script_run(*argv, "--resume", stdout=subprocess.PIPE)
    said = again.communicate()[0]
    assert again.returncode == 0
    line = next(line for line in said.splitlines() if "simulated" in line)
    rows = len(pd_read(out / "sweep.parquet"))
    assert line.startswith(f"{rows:,} points: {rows:,} resumed from {out / 'parts'}, 0 "
                           f"simulated in "), line


def test_second_script_run_on_an_out_in_use_is_refused_then_ctrl_c_says_what_is_kept(
        tmp_path):
    """The second run on one --out removed the first's parts mid-run (the first then died
    naming 'parts' and ': None'); Ctrl-C printed a 20-line KeyboardInterrupt traceback."""
    out = tmp_path / "out"
    argv = [*GRID[:-2], "--comm", *[str(k / 100) for k in range(200)], "--chunk-size", "1",
            "--workers", "1", "--no-plots", "--no-progress", "--out", str(out)]
    first = script_run(*argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       start_new_session=True)
    try:
        wait_for(out / "parts" / "_fastpp" / "part-000003.json", first)
        second = script_run(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        said, err = second.communicate()
        assert second.returncode == 2, err
        assert err == (f"error: --out={str(out)!r} is in use by process {first.pid}; wait "
                       f"for it or choose another --out\n")
        time.sleep(0.5)
        os.killpg(first.pid, signal.SIGINT)  # Ctrl-C
        try:
            err = first.communicate(timeout=60)[1]
        except subprocess.TimeoutExpired:  # (where it is: every thread's stack, then fail)
            first.send_signal(signal.SIGUSR1)
            time.sleep(2)
            first.kill()
            pytest.fail("no exit a minute after Ctrl-C; its stacks:\n" + first.communicate()[1])
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 130
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("interrupted: ") and last.endswith(
        f" points kept in {out}; rerun with --resume to continue"), last
    kept, total = (int(x.replace(",", "")) for x in last.split()[1:4:2])
    assert 4 <= kept < total
