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
