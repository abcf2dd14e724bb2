"""fastpp's version, one place (pyproject.toml's ``version`` says the same; a test holds them
equal): a module of its own, so that the sweep store can record it without importing the
package it is part of."""

__version__ = "0.1.0"
