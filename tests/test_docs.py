"""The examples in fastpp's docstrings run and print what they say."""

import doctest
import importlib
import pkgutil

import pytest

import fastpp

MODULES = sorted(info.name for info in pkgutil.walk_packages(fastpp.__path__, "fastpp.")
                 if info.name != "fastpp.__main__")


@pytest.mark.parametrize("name", ["fastpp", *MODULES])
def test_docstring_examples(name):
    module = importlib.import_module(name)
    failed, _ = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failed == 0, name


def test_readme_examples(monkeypatch):
    """The README's ``>>>`` examples (reading, replaying and calibrating a recorded run) print
    what the README says; run from the repository root, where their paths point."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    # a code fence closes an example's expected output
    text = "\n".join("" if line.strip().startswith("```") else line
                     for line in (root / "README.md").read_text().splitlines())
    test = doctest.DocTestParser().get_doctest(text, {}, "README.md", "README.md", 0)
    assert len(test.examples) >= 10
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def _shown(comment: str):
    """The value a README comment shows first: the longest prefix that is a Python literal
    (``57.0``, ``[11, 9, 7, 5]``, ``(32, 61)``), else its first word (a layout string)."""
    import ast

    for end in range(len(comment), 0, -1):
        try:
            return ast.literal_eval(comment[:end].strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return comment.split()[0] if comment.split() else None


def _agrees(value, shown) -> bool:
    """Does ``value`` print as ``shown``, at the precision shown?"""
    import numpy as np

    if isinstance(value, tuple) and not isinstance(shown, tuple):
        value = value[0]  # "a, b  # 10.16 s; b in bytes ...": the comment takes them in turn
    if isinstance(shown, str):
        return str(value) == shown
    if isinstance(shown, list | tuple):
        value = np.asarray(value, dtype=float).tolist() if not isinstance(
            value, tuple) else list(value)
        return len(value) == len(shown) and all(map(_agrees, value, shown))
    if isinstance(shown, int | float) and not isinstance(shown, bool):
        digits = len(repr(shown).split(".")[1]) if "." in repr(shown) else 0
        return round(float(value), digits) == shown
    return False


def _python_blocks(text: str) -> list[str]:
    import re

    return [b for b in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
            if not b.lstrip().startswith(">>>")]  # the doctest blocks run above


def test_readme_python_blocks(monkeypatch, tmp_path):
    """The README's plain ``python`` blocks run, in order, in one namespace (a block uses what
    an earlier one defined), and a line ``expression  # value`` shows the expression's value.
    The ``measure`` block is left out: it runs PyTorch for real (tests/test_measured_real.py
    runs ``measure``), and so is a block reading the scripts' ``results/`` files."""
    import ast
    import os
    from pathlib import Path

    if os.environ.get("NUMBA_DISABLE_JIT") == "1":  # tests/test_coverage.py's run
        pytest.skip("the README's sweeps, plans and searches take minutes without the JIT")
    root = Path(__file__).resolve().parents[1]
    blocks = _python_blocks((root / "README.md").read_text())
    assert len(blocks) >= 8
    monkeypatch.chdir(tmp_path)  # files a block writes land here
    namespace, checked, wrong = {}, 0, []
    for block in blocks:
        if "measure(" in block or "results/" in block:  # a real run, or the scripts' files
            continue
        for node in ast.parse(block).body:
            code = ast.get_source_segment(block, node)
            line = block.splitlines()[node.end_lineno - 1]
            comment = line.split("  # ", 1)[1] if "  # " in line else ""
            if isinstance(node, ast.Expr) and comment:
                shown = _shown(comment)
                value = eval(compile(ast.Expression(node.value), "README", "eval"), namespace)
                if shown is not None and not isinstance(shown, str) or "|" in str(shown):
                    if not _agrees(value, shown):
                        wrong.append(f"{code}  # {comment} (is {value})")
                    checked += 1
            else:
                exec(compile(ast.Module([node], []), "README", "exec"), namespace)
    assert not wrong, "the README shows other values:\n" + "\n".join(wrong)
    # optimize's small example: the log its comment spells out in words
    assert [(round(v, 1), source) for _, v, source in namespace["small"].log] == [
        (66.2, "zb-greedy"), (51.1, "list(backward first)"), (48.7, "list(forward first)")]
    assert checked >= 5


def _cli_lines(text: str) -> list[list[str]]:
    """The ``python -m fastpp ...`` commands of the README's shell blocks as argument lists:
    continuation lines joined, comments dropped, optional ``[...]`` groups given."""
    import re
    import shlex

    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line.replace("[", " ").replace("]", " "), comments=True)
            if words[:3] == ["python", "-m", "fastpp"]:
                commands.append(words[3:])
    return commands


def test_readme_commands(monkeypatch, tmp_path, capsys):
    """Every ``python -m fastpp`` command in the README parses; ``list``, ``show`` and
    ``simulate`` run for real (in an empty folder, where their files land). ``optimize``,
    ``plan``, ``measure`` and ``report`` (seconds to minutes, PyTorch for ``measure``, the
    scripts' files for ``report``) are checked as far as their arguments: their work is
    replaced by recording what it was given."""
    from pathlib import Path

    import fastpp.__main__ as cli

    root = Path(__file__).resolve().parents[1]
    commands = _cli_lines((root / "README.md").read_text())
    assert {c[0] for c in commands} >= {"list", "show", "simulate", "optimize", "plan",
                                        "measure"}
    given = []

    def optimize(*args, **kwargs):  # parsed and converted: stop before the search
        given.append(("optimize", args, kwargs))
        raise SystemExit(0)

    monkeypatch.setattr(cli, "optimize", optimize)
    monkeypatch.setattr(cli, "_plan", lambda args: given.append(("plan", args)) or 0)
    monkeypatch.setattr(cli, "_measure", lambda args: given.append(("measure", args)) or 0)
    import fastpp.reports  # report reads the scripts' results/ files: its arguments only

    monkeypatch.setattr(fastpp.reports, "report", lambda *a, **k: given.append(("report", a)))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    for argv in commands:
        try:
            code = cli.main(argv)
        except SystemExit as stop:  # argparse's errors exit 2
            code = stop.code
        assert code == 0, f"python -m fastpp {' '.join(argv)}: exit {code}\n" \
                          f"{capsys.readouterr().err}"
    assert {g[0] for g in given} >= {"optimize", "plan", "measure"}
    for script in ("sweep.py", "plan.py", "measure.py"):  # the scripts the README runs
        assert (root / "scripts" / script).is_file()
