"""The eleventh bad-input wave (5 December 2026): each case failed on the code before."""

import pytest

from fastpp import Costs, Noise, ScheduleError, build_schedule, simulate


def test_a_link_named_in_both_orders():
    """A link's delay holds both ways; naming it twice had added the two delays."""
    with pytest.raises(ScheduleError, match=r"link_delay must name each link once: .* \(got "
                                            r"\(0, 1\) and \(1, 0\)\)"):
        Noise(link_delay={(0, 1): 0.1, (1, 0): 0.2})
    with pytest.raises(ScheduleError, match="name each link once"):
        Noise().with_link_delay({(2, 1): 0.1, (1, 2): 0.1})


def test_absorption_under_blocking_is_the_blocking_delay():
    """With blocking=True the link thresholds are of the delay the sender holds, as the run
    models it (they had been of a latency)."""
    s, c = build_schedule("1f1b", 4, 8), Costs(f=1.0, b=2.0, comm=0.05)
    mc = simulate(s, c, noise=Noise(0.2, blocking=True), samples=64, seed=0)
    for link, delay in mc.absorption(steps=14)["links"].items():
        def mean(x, link=link):
            return simulate(s, c, noise=Noise(0.2, blocking=True, link_delay={link: x}),
                            samples=64, seed=0).mean
        assert mean(delay) <= 1.01 * mc.mean < mean(delay * 1.001)


def test_frontier_script_budgets_bound(tmp_path):
    """10**12 budgets asked NumPy for a 7 TiB grid (a MemoryError traceback)."""
    from test_bad_input_wave6 import run_script

    assert "--budgets must be at most 10,000, a search each (got 1,000,000,000,000)" in \
        run_script("frontier.py", "--budgets", "1000000000000", "--out", str(tmp_path),
                   cwd=tmp_path)


def test_seed_demo_script_refuses_with_the_library_and_scales(tmp_path):
    """The demo's devices take a forward time of 0 that fastpp's costs refuse (a traceback);
    its own checks compared clocks to 1e-9 absolute, failing at a forward time of 1e9."""
    from test_bad_input_wave6 import run_script

    assert "error: --fwd-time must be finite and > 0 (got 0.0)" in run_script(
        "seed_demo.py", "--fwd-time", "0", cwd=tmp_path)  # (costs.f until wave 15)
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, str(root / "scripts" / "seed_demo.py"), "--fwd-time",
                           "1e9"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and "passed" in done.stdout, done.stdout[-800:]


@pytest.mark.parametrize("argv, message", [
    (["simulate", "-s", "1f1b", "-p", "4", "-n", "8", "--f", "-1"],
     "error: --f must be finite and > 0 (got -1.0)"),
    (["simulate", "-s", "1f1b", "-p", "4", "-n", "8", "--gamma", "2"],
     "error: --gamma must be in [0, 1]"),
    (["simulate", "-s", "zb-h1", "-p", "4", "-n", "8", "--w", "5"],
     "error: --w must be <= --b (got --w=5.0, --b=2.0 at stage 0)"),  # as it simulates
    (["optimize", "-p", "4", "-n", "8", "--memory-limit", "0.1"],
     "got --memory-limit=0.1"),
    (["simulate", "-s", "1f1b", "-p", "4", "-n", "8", "--csv", ""],
     "error: --csv must be a file path that can be written (got '': an empty name)"),
    (["simulate", "-s", "1f1b", "-p", "4", "-n", "8", "--trace", "/nonexistent/x.json"],
     "error: --trace must be a file path that can be written (got '/nonexistent/x.json': "
     "no folder '/nonexistent')"),  # (refused before the simulation, since 6 December)
    (["optimize", "-p", "4", "-n", "8", "--memory-limit", "-2"],
     "error: --memory-limit must be a number of units > 0"),
    (["optimize", "-p", "4", "-n", "8", "--time-limit", "-1"],
     "argument --time-limit: must be a finite number of seconds > 0 (got '-1')"),
])
def test_cli_names_its_flags(argv, message, capsys):
    """The CLI's messages name its flags, not the library parameters they become (costs.f,
    memory, time_limit, path)."""
    from fastpp.__main__ import main

    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's own errors
        code = stop.code
    assert code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("method", ["exact", "auto"])
def test_exact_search_with_zero_length_input_gradients_on_a_v(method):
    """b == w: every I takes 0. At the V's bottom two stages share a device, and the solved
    I(p, j) and I(p - 1, j) tie in time; sorted by stage, the exact schedule deadlocked and
    optimize raised (a helper's brute force found it in 5 of 10 such instances). Its optimum,
    60, is the brute force's."""
    import fastpp

    f, w = [10.0, 8.0, 10.0, 6.0, 10.0, 8.0], [8.0, 4.0, 8.0, 8.0, 12.0, 6.0]
    found = fastpp.optimize(3, 2, Costs(f, w, w=w, gamma=0.4), memory=1.0, placement="v",
                            method=method, progress=False, time_limit=10)
    assert found.optimal and found.value == 60


def test_scripts_refuse_or_explain_before_running(tmp_path):
    """frontier.py --out naming a file ended in a FileExistsError after every search;
    layout_demo.py --help ran the whole demo."""
    import subprocess
    import sys
    from pathlib import Path

    from test_bad_input_wave6 import run_script

    taken = tmp_path / "taken"
    taken.write_text("")
    assert "--out must be a folder" in run_script("frontier.py", "--out", str(taken),
                                                  cwd=tmp_path)
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, str(root / "scripts" / "layout_demo.py"), "--help"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("usage:") and "layout" in \
        done.stdout and "Et*" not in done.stdout


@pytest.mark.parametrize("argv, message", [
    (["simulate", "-s", "1f1b", "-p", "2", "-n", "4", "--trace", ""],
     "--trace must be a file path that can be written (got '': an empty name)"),
    (["simulate", "-s", "1f1b", "-p", "2", "-n", "4", "--gantt", ""],
     "--gantt must be a file path that can be written (got '': an empty name)"),
    (["plan", "--model", "llama3-8b", "--gpus", "8", "--out", ""],
     "--out must be a folder (got '')"),
])
def test_cli_refuses_empty_names(argv, message, capsys):
    """An empty output name had been taken as none (nothing written, exit 0) or, for plan's
    --out, as the current folder."""
    from fastpp.__main__ import main

    assert main(argv) == 2 and message in capsys.readouterr().err
