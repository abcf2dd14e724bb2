"""The error contract: bad input to a public function is the library's own error, naming the
parameter, what it must be and what it got; never NumPy's, Numba's or Python's, and never a
silently accepted value. Rows of the escapes found in review (issue 22's table)."""

import numpy as np
import pytest

import fastpp
from fastpp import Costs, Schedule, ScheduleError, ScheduleTypeError, theory
from fastpp.io import read_torch_csv, write_torch_csv


@pytest.fixture
def csv_path(tmp_path):
    return write_torch_csv(fastpp.build_schedule("1f1b", 2, 4), tmp_path / "s.csv")


@pytest.mark.parametrize("kwargs, name", [
    ({"f": [1, [2]], "b": 2}, "costs.f"),  # ragged: once a ValueError while formatting
    ({"f": "1", "b": 2}, "costs.f"),  # once accepted as 1.0
    ({"f": True, "b": 2}, "costs.f"),  # once accepted as 1.0
    ({"f": 1, "b": 2, "w": [0.5, "x"]}, "costs.w"),
])
def test_costs_take_numbers_only(kwargs, name):
    with pytest.raises(ScheduleTypeError, match=rf"{name} must be a number"):
        Costs(**kwargs)


@pytest.mark.parametrize("n", [1.5, "2", -1, 0, True])
def test_read_torch_csv_n(csv_path, n):
    with pytest.raises(ScheduleError, match=r"n must be a positive integer"):
        read_torch_csv(csv_path, n=n)


def test_read_torch_csv_placement_and_path(csv_path):
    with pytest.raises(ScheduleTypeError, match=r"placement must be a string"):
        read_torch_csv(csv_path, placement=["loop"])
    with pytest.raises(ScheduleTypeError, match=r"path must be a file path"):
        read_torch_csv(None)


@pytest.mark.parametrize("rows", [None, 5, "0F0", [None], [["0F0", 3]]])
def test_from_tokens_types(rows):
    with pytest.raises(ScheduleTypeError, match=r"rows|token"):
        Schedule.from_tokens(rows)


@pytest.mark.parametrize("seed, error", [("a", ScheduleTypeError), (None, ScheduleTypeError),
                                         (1.5, ScheduleTypeError), (-1, ScheduleError)])
def test_optimize_seed(seed, error):
    with pytest.raises(error, match=r"seed must be"):
        fastpp.optimize(2, 2, seed=seed, method="heuristic", progress=False)


def test_optimize_bounds_its_size_and_memory():
    with pytest.raises(ScheduleError, match=r"p\*n\*m must be at most"):
        fastpp.optimize(10**5, 10**5, progress=False)  # once a MemoryError
    with pytest.raises(ScheduleTypeError, match=r"memory must be a number"):
        fastpp.optimize(2, 4, memory="12", progress=False)  # once accepted as 12
    with pytest.raises(ScheduleError, match=r"memory must be"):
        fastpp.optimize(2, 4, memory=[3.0, np.nan], progress=False)


@pytest.mark.parametrize("p, n", [(-4, 8), (0, 8), (4, 0), (4, 2.5)])
def test_theory_counts(p, n):
    with pytest.raises(ScheduleError, match=r"(p|n) must be a positive integer"):
        theory.idle("1f1b", p, n)  # once returned -15 for p=-4


def test_theory_still_answers_valid_counts():
    assert theory.idle("1f1b", 4, 8) == 3 * 3.0  # (p-1)(f+b) with f=1, b=2
    assert theory.idle("1f1b", np.int64(4), 8, m=1) == 9.0


@pytest.mark.parametrize("n, p", [(0, 4), (4, 0), (-1, 4), (2.5, 4)])
def test_compute_theoretical_peak_counts(n, p):
    with pytest.raises(ScheduleError, match=r"num_(microbatches|stages) must be a positive"):
        fastpp.compute_theoretical_peak("1f1b", n, p)  # once returned 0 for n=0
