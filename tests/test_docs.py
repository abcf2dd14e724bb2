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
