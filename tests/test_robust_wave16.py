"""The sixteenth wave's robustness trial (5 December 2026, night): interruption, resume,
concurrent runs. Each case failed on the code before it."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fastpp
from fastpp import ScheduleError

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(schedules=["1f1b", "zb-h1"], p=[2, 4], n_per_p=[1, 2], chunk_size=2,
             progress=False)
# a sweep far longer than any test waits on it, in a child process (18,000 chunks of one
# point, one thread: 26 s here), so that it still runs when the test acts; the tests wait for
# its files, not for time, and kill it
SLOW = ("import sys, fastpp; fastpp.sweep(['1f1b', 'zb-h1', 'interleaved-1f1b'], "
        "p=[2, 4, 8, 16, 32, 64], n_per_p=[1, 2, 4, 8, 16], comm=[k / 100 for k in range(200)],"
        " chunk_size=1, workers=1, progress=False, out=sys.argv[1])")


def env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT),
                                                          os.environ.get("PYTHONPATH", "")]))


def wait_for(path: Path, proc, seconds=30.0):
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, "the child ended before writing " + str(path)
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_resume_by_another_fastpp_is_refused(tmp_path):
    """A manifest of another version (or other code of the same version) had resumed,
    mixing two codes' rows in one table."""
    out = tmp_path / "run"
    fastpp.sweep(**SMALL, out=out)
    path = out / "_fastpp" / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["version"] == fastpp.__version__ and manifest["code"]
    for change, said in (({"version": "0.0.9"}, "fastpp 0.0.9"),
                         ({"code": "0123456789abcdef"}, "code 0123456789abcdef"),
                         ({"version": None, "code": None}, "did not record its version")):
        path.write_text(json.dumps({**manifest, **change}))
        with pytest.raises(ScheduleError, match=f"{said}.*start afresh \\(delete the folder"):
            fastpp.sweep(**SMALL, out=out, resume=True)
    path.write_text(json.dumps(manifest))
    assert len(fastpp.sweep(**SMALL, out=out, resume=True)) > 0


def test_finished_sweep_resumes_from_a_read_only_folder(tmp_path):
    """The manifest was rewritten on every resume: a finished sweep on a read-only mount
    raised a raw OSError instead of giving its rows."""
    out = tmp_path / "run"
    fastpp.sweep(**SMALL, out=out)
    code = (f"import fastpp; df = fastpp.sweep(**{SMALL!r}, out={str(out)!r}, resume=True); "
            f"print(len(df), df.attrs['resumed'])")
    run = subprocess.run(["unshare", "-m", "sh", "-c", f'mount --bind -o ro "{out}" "{out}" '
                          f'&& exec "{sys.executable}" -c "$0"', code],
                         capture_output=True, text=True, env=env())
    if "mount" in run.stderr or "unshare" in run.stderr:
        pytest.skip(f"no read-only mount here: {run.stderr.strip()}")
    rows = len(fastpp.sweep(**SMALL))
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(rows), str(rows)]


def test_chunk_that_cannot_be_written_names_out_not_none(tmp_path):
    """A folder removed under a running sweep was said as '... (No such file or directory:
    None)'."""
    from fastpp.sweeps.store import Store

    frame = fastpp.sweep(**SMALL).iloc[:1]
    store = Store(tmp_path / "run", "x", 4, 2, False)
    shutil.rmtree(tmp_path / "run")
    with pytest.raises(ScheduleError, match=r"^out='.*run' cannot take chunk 0") as error:
        store.write(0, frame, {})
    assert "None" not in str(error.value)
    store.close()


def test_second_sweep_on_a_folder_in_use_is_refused(tmp_path):
    """Two sweeps on one folder wrote (and removed) each other's files; a stale hold (a run
    killed with SIGKILL) does not stop the next."""
    out = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-c", SLOW, str(out)], env=env(),
                             stderr=subprocess.DEVNULL)
    try:
        wait_for(out / "_fastpp" / "part-000003.json", first)
        with pytest.raises(ScheduleError, match=rf"^out='.*run' is in use by process "
                                                rf"{first.pid}; wait for it or choose another"):
            fastpp.sweep(['1f1b'], p=2, n=2, out=out, resume=True, progress=False)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert (out / "_fastpp" / "lock").exists()  # (killed: its lock file stays, not its hold)
    with pytest.raises(ScheduleError, match="different sweep"):  # the folder is free
        fastpp.sweep(['1f1b'], p=2, n=2, out=out, resume=True, progress=False)


def script_run(*argv, **kwargs):
    return subprocess.Popen([sys.executable, str(ROOT / "scripts" / "sweep.py"), *argv],
                            env=env(), text=True, **kwargs)


def test_picture_that_cannot_be_written_leaves_the_last_good_one(tmp_path):
    """savefig wrote the picture in place: a disk that filled up mid-write (here a file size
    limit) left a truncated PNG where the last good one was."""
    path = tmp_path / "gantt.png"
    code = ("import resource, signal, sys, fastpp\n"
            "from fastpp import plot\n"
            "res = fastpp.simulate(fastpp.build_schedule('1f1b', 4, 8), fastpp.Costs(1, 2))\n"
            "plot.gantt(res, sys.argv[1])\n"
            "good = open(sys.argv[1], 'rb').read()\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (len(good) // 2, len(good) // 2))\n"
            "try:\n"
            "    plot.gantt(res, sys.argv[1])\n"
            "except fastpp.ScheduleError as error:\n"
            "    print('refused:', error)\n"
            "print(open(sys.argv[1], 'rb').read() == good)\n")
    pytest.importorskip("matplotlib")
    run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, env=env())
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "True", run.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["gantt.png"]  # (no temporary file left)


GRID = ["-p", "2", "4", "8", "16", "32", "--n-per-p", "1", "2", "4", "8", "--comm", "0"]


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


def pd_read(path):
    import pandas as pd

    return pd.read_parquet(path)


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
        err = first.communicate(timeout=60)[1]
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


def children(pid: int) -> dict[int, list[str]]:
    """The processes whose parent is ``pid``, with their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
    return {k: [a.decode() for a in v if a] for k, v in found.items()}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, PR_SET_PDEATHSIG")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_measure_stopped_by_a_signal_leaves_no_rank_running(tmp_path, sig):
    """SIGTERM to `fastpp measure` left its ranks running (re-parented to PID 1), writing
    into --out and holding the port, and /tmp/fastpp-ranks-* behind; SIGKILL, which nothing
    can catch, left them too."""
    pytest.importorskip("torch")
    runner = subprocess.Popen(
        [sys.executable, "-m", "fastpp", "measure", "-s", "1f1b", "-p", "2", "-n", "2",
         "--layers", "2", "--hidden", "8", "--microbatch", "2", "--steps", "100000",
         "--out", str(tmp_path / "m")], env=env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    ranks = {}
    try:
        deadline = time.monotonic() + 30
        while len(ranks := {k: v for k, v in children(runner.pid).items()
                            if any(a.endswith("rank.py") for a in v)}) < 2:
            assert runner.poll() is None and time.monotonic() < deadline, "no ranks started"
            time.sleep(0.1)
        folder = Path(next(iter(ranks.values()))[-1]).parent
        assert folder.name.startswith("fastpp-ranks-")
        time.sleep(0.5)  # (in torch's import, or running)
        runner.send_signal(getattr(signal, sig))  # the runner only, not its group
        runner.wait(30)
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in ranks) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(pid) for pid in ranks), "a rank runs on"
        if sig == "SIGTERM":
            assert runner.returncode == 128 + signal.SIGTERM
            assert not folder.exists()
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        for pid in ranks:  # (left running: the defect)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_measure_script_takes_a_timeout(tmp_path):
    """scripts/measure.py had no --timeout (1800 s hard-coded): a hung rank held a run for half
    an hour. The flag is checked as `fastpp measure --timeout` is."""
    from helpers import script

    measure = script("measure")
    assert measure.parse(["--timeout", "90"]).timeout == 90
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "measure.py"), "--timeout",
                          "0", "--out", str(tmp_path), "--picture", str(tmp_path / "p.png"),
                          "--trace", str(tmp_path / "t.json")], capture_output=True, text=True,
                         env=env())
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == (
        "error: --timeout must be a finite number of seconds > 0 (got --timeout=0.0)")
