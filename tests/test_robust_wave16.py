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
# a sweep of some ten seconds in a child process: 1,800 chunks of one point, one thread
SLOW = ("import sys, fastpp; fastpp.sweep(['1f1b', 'zb-h1', 'interleaved-1f1b'], "
        "p=[2, 4, 8, 16, 32, 64], n_per_p=[1, 2, 4, 8, 16], comm=[k / 100 for k in range(20)],"
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
        with pytest.raises(ScheduleError, match=f"{said}.*start afresh without resume=True"):
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
