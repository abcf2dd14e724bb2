"""The house: the suite leaves the checkout clean, and the commands' default outputs are
ignored by git."""

import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, tree_status


def test_tree_status_sees_a_new_file(tmp_path):
    """The session check in conftest.py (a file left by a test fails the run) can fail."""
    if subprocess.run(["git", "--version"], capture_output=True).returncode:
        pytest.skip("no git on this machine")  # pragma: no cover
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    before = tree_status(tmp_path)
    (tmp_path / "x.png").write_bytes(b"junk")
    assert tree_status(tmp_path) - before == {"?? x.png"}
    assert tree_status(tmp_path.parent / "nowhere") is None


@pytest.mark.parametrize("path", ["measured/rank0_trace.json", "report.html",
                                  "results/plan.parquet", "site/index.html"])
def test_default_outputs_are_ignored(path):
    """measure's --out, report's -o, plan's and the scripts' --out, and a docs build."""
    if tree_status(ROOT) is None:
        pytest.skip("not a git checkout (an unpacked sdist)")
    ignored = subprocess.run(["git", "-C", ROOT, "check-ignore", "-q", "--no-index", path])
    assert ignored.returncode == 0, path
    # and the package's own folder of that name is not
    assert subprocess.run(["git", "-C", ROOT, "check-ignore", "-q", "--no-index",
                           "fastpp/measured/run.py"]).returncode == 1


def test_no_junk_at_the_root():
    """The top level is fixed; what python tests/test_fuzz_api.py once wrote is gone."""
    if tree_status(ROOT) is None:
        pytest.skip("not a git checkout (an unpacked sdist)")
    tracked = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split()
    top = {Path(f).parts[0] for f in tracked}
    assert top <= {"fastpp", "bench", "tests", "scripts", "docs", "pyproject.toml",
                   "README.md", ".ci", ".gitignore"}, top


def test_missing_data_skips_here_but_fails_in_ci(monkeypatch):
    """needs_data skips a test whose published file is missing, except with CI=true, where
    the test runs (and fails on the missing file); .ci/run sets CI and checks the folder."""
    from helpers import needs_data

    monkeypatch.delenv("CI", raising=False)
    assert needs_data("no_such_table.csv").args == (True,)
    assert needs_data().args == (False,)  # nothing missing: never skipped
    monkeypatch.setenv("CI", "true")
    assert needs_data("no_such_table.csv").args == (False,)
    script = (Path(ROOT) / ".ci" / "run").read_text()
    assert "export CI=true" in script and "korthikanti_2022.csv" in script


def test_the_readme_test_command_is_what_ci_runs():
    """The quickstart's test command, in the README and the docs, is .ci/run's: its install
    and its pytest line."""
    script = (Path(ROOT) / ".ci" / "run").read_text().splitlines()
    install = next(line for line in script if line.startswith("python3 -m venv"))
    run = next(line for line in script if line.startswith(".venv/bin/python -m pytest"))
    for page in ("README.md", "docs/getting-started.md"):
        text = (Path(ROOT) / page).read_text()
        assert f"{install} && {run}\n" in text, page


def test_subpackages_load_on_first_use():
    """``import fastpp; fastpp.model`` works (it was an AttributeError while ``report``
    loaded lazily), and ``import fastpp`` alone still imports neither pandas nor the model."""
    import sys

    code = ("import sys, fastpp; assert 'pandas' not in sys.modules; "
            "assert 'fastpp.model' not in sys.modules; "
            "print(fastpp.model.plan.__name__, fastpp.io.read_torch_csv.__name__, "
            "fastpp.trace.__name__, fastpp.measured.__name__, fastpp.reports.__name__); "
            "fastpp.nope")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert run.stdout.split() == ["plan", "read_torch_csv", "fastpp.trace", "fastpp.measured",
                                  "fastpp.reports"], run.stderr
    assert "AttributeError: module 'fastpp' has no attribute 'nope'" in run.stderr
